"""Master/slave replication with real processes: byte-identical CommitLog under load, resume after a slave restart,
reads and offsets on the slave with the master stopped, SYNC_MASTER statuses, slaves refusing writes."""

from __future__ import annotations

import os
import shutil
import signal
import threading

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2

from orbitmq.proto import admin_pb2
from orbitmq.proto import namesrv_pb2 as pb
from orbitmq.proto.admin_pb2_grpc import AdminStub
from orbitmq.proto.namesrv_pb2_grpc import NameServerStub
from orbitmq.route import TopicRouteData
from orbitmq.route_proto import route_from_proto
from tests.broker.v2client import message, raw_client
from tests.ha.cluster import HA_OPTIONS, OK, commitlog_bytes, commitlog_end, read_all, send_batch, start_group
from tests.waiting import wait_until

pytestmark = pytest.mark.integration
Code = definition_pb2.Code


def _load(addr: str, topic: str, threads: int, batches: int) -> dict[str, bytes]:
    """``threads`` producers sending ``batches`` batches of varied sizes each; every acknowledged id -> body."""
    acked: dict[str, bytes] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def run(t: int) -> None:
        for b in range(batches):
            bodies = [f"t{t}-b{b}-m{m}-".encode() + os.urandom(16 + (b * 37 + m * 101) % 900) for m in range(8)]
            code, ids, why = send_batch(addr, topic, bodies)
            if code != OK:
                errors.append(f"{code} {why}")
                continue
            with lock:
                acked.update(zip(ids, bodies, strict=True))

    workers = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not errors, errors[:3]
    return acked


@pytest.mark.timeout(180)
def test_slave_commitlog_is_byte_identical_under_load_and_serves_reads(broker_factory):
    ns = broker_factory.namesrv()
    group = start_group(broker_factory, ns, "ha-load", role="SYNC_MASTER")
    acked = _load(group.master.addr, "HaLoad", threads=4, batches=60)  # ~1 MiB: several 256 KiB segments
    assert len(acked) == 4 * 60 * 8
    master_store, slave_store = group.master.store, group.slave.store
    wait_until(
        lambda: commitlog_bytes(master_store) == commitlog_bytes(slave_store),
        timeout=60,
        what="the slave's CommitLog to equal the master's byte for byte",
    )
    assert len(list((slave_store / "commitlog").iterdir())) >= 4
    # the slave built its own ConsumeQueues and serves every message
    assert read_all(group.slave.addr, "HaLoad") == acked
    # slaves appear in the name server's routes with their ids
    route = _namesrv_route(ns.addr, "HaLoad")
    assert [b.broker_addrs for b in route.broker_datas] == [{0: group.master.addr, 1: group.slave.addr}]
    # and refuse writes, saying why
    code, _, why = send_batch(group.slave.addr, "HaLoad", [b"to a slave"])
    assert code == Code.INTERNAL_SERVER_ERROR and "is a SLAVE" in why, why
    assert read_all(group.slave.addr, "HaLoad") == acked


def _namesrv_route(addr: str, topic: str) -> TopicRouteData:
    with grpc.insecure_channel(addr) as channel:
        resp = NameServerStub(channel).GetRouteInfoByTopic(pb.GetRouteInfoRequest(topic=topic), timeout=10)
    return route_from_proto(resp)


@pytest.mark.timeout(180)
def test_slave_restart_resumes_from_its_offset(broker_factory):
    group = start_group(broker_factory, None, "ha-resume", role="ASYNC_MASTER")
    first = _load(group.master.addr, "HaResume", threads=2, batches=20)
    wait_until(lambda: commitlog_bytes(group.master.store) == commitlog_bytes(group.slave.store), timeout=60)
    group.slave.stop()
    second = _load(group.master.addr, "HaResume", threads=2, batches=20)
    group.slave.start()
    wait_until(lambda: commitlog_bytes(group.master.store) == commitlog_bytes(group.slave.store), timeout=60)
    assert "replicating from master" in group.slave.log()
    # a crashed slave resumes too: recovery trims its tail, then it reports where it ends
    group.slave.stop(signal.SIGKILL)
    third = _load(group.master.addr, "HaResume", threads=2, batches=20)
    group.slave.start()
    wait_until(lambda: commitlog_bytes(group.master.store) == commitlog_bytes(group.slave.store), timeout=60)
    assert read_all(group.slave.addr, "HaResume") == {**first, **second, **third}


@pytest.mark.timeout(180)
def test_slave_serves_reads_and_offsets_with_the_master_stopped(broker_factory):
    ns = broker_factory.namesrv()
    group = start_group(broker_factory, ns, "ha-read", role="SYNC_MASTER")
    acked = _load(group.master.addr, "HaRead", threads=1, batches=10)
    with raw_client(group.master.addr) as c:
        assert c.update_offset("ha-consumer", "HaRead", 2, 5).code == OK

    def offset_synced() -> bool:
        with raw_client(group.slave.addr) as c:
            r = c.get_offset("ha-consumer", "HaRead", 2)
            return r.status.code == OK and r.offset == 5

    wait_until(offset_synced, timeout=30, what="the slave to copy the consumer offset (SlaveSynchronize)")
    group.master.stop(signal.SIGKILL)
    assert read_all(group.slave.addr, "HaRead") == acked
    with raw_client(group.slave.addr) as c:
        assert c.get_offset("ha-consumer", "HaRead", 2).offset == 5


@pytest.mark.timeout(120)
def test_sync_master_without_a_slave_answers_ha_not_available(broker_factory):
    master = broker_factory.broker(options={"brokerRole": "SYNC_MASTER", "haListenPort": "0"})
    code, _, why = send_batch(master.addr, "HaAlone", [b"no slave"])
    assert code == Code.HA_NOT_AVAILABLE and "slave" in why, why
    # the message is stored on the master all the same, as RocketMQ does
    assert list(read_all(master.addr, "HaAlone").values()) == [b"no slave"]


def _produce_until(addr: str, topic: str, stop: threading.Event, acked: dict[str, bytes]) -> None:
    """Send one message at a time until ``stop``; record what the broker acknowledged (OK), ignore the rest."""
    n = 0
    with raw_client(addr) as c:
        while not stop.is_set():
            n += 1
            body = f"{threading.get_ident()}-{n}".encode()
            try:
                resp = c.send(message(topic, body), timeout=5)
            except grpc.RpcError:
                continue  # the master is gone: nothing acknowledged
            if resp.status.code == OK:
                acked[resp.entries[0].message_id] = body


@pytest.mark.timeout(400)
def test_sync_master_killed_with_its_store_deleted_loses_no_acknowledged_message(broker_factory):
    """RocketMQ's promise for SYNC_MASTER: what was acknowledged is on the slave. Ten rounds, each a new group."""
    for round_no in range(10):
        group = start_group(broker_factory, None, f"ha-kill-{round_no}", role="SYNC_MASTER")
        acked: dict[str, bytes] = {}
        stop = threading.Event()
        producers = [
            threading.Thread(target=_produce_until, args=(group.master.addr, "HaKill", stop, acked)) for _ in range(3)
        ]
        for p in producers:
            p.start()
        try:
            target = 150 + 20 * round_no
            wait_until(lambda a=acked, n=target: len(a) >= n, timeout=60, what="acknowledged sends")
            group.master.stop(signal.SIGKILL)  # mid-load: sends are in flight
            shutil.rmtree(group.master.store)
        finally:
            stop.set()
            for p in producers:
                p.join(timeout=30)
        survivors = read_all(group.slave.addr, "HaKill")
        missing = set(acked) - set(survivors)
        assert not missing, f"round {round_no}: {len(missing)} of {len(acked)} acknowledged messages lost"
        assert all(survivors[i] == body for i, body in acked.items())
        group.slave.stop()


@pytest.mark.timeout(120)
def test_sync_master_answers_slave_timeout_while_its_slave_is_frozen(broker_factory):
    group = start_group(broker_factory, None, "ha-frozen", role="SYNC_MASTER", options={"syncFlushTimeout": "800"})
    assert send_batch(group.master.addr, "HaFrozen", [b"before"])[0] == OK
    os.kill(group.slave.process.pid, signal.SIGSTOP)
    try:
        code, _, why = send_batch(group.master.addr, "HaFrozen", [b"frozen"])
        assert code == Code.SLAVE_PERSISTENCE_TIMEOUT and "syncFlushTimeout 800 ms" in why, why
    finally:
        os.kill(group.slave.process.pid, signal.SIGCONT)
    # the slave catches up from where it stopped and the master answers OK again
    wait_until(lambda: send_batch(group.master.addr, "HaFrozen", [b"after"])[0] == OK, timeout=30)
    wait_until(lambda: set(read_all(group.slave.addr, "HaFrozen").values()) >= {b"before", b"frozen", b"after"})


@pytest.mark.timeout(120)
def test_min_in_sync_replicas_and_all_ack_in_sync_state_set(broker_factory):
    # minInSyncReplicas 3 with one slave: a SYNC_MASTER put is refused, nothing waits for a slave that cannot exist
    short = start_group(broker_factory, None, "ha-min", options={"minInSyncReplicas": "3"})
    wait_until(lambda: "slave connected" in short.master.log(), timeout=30)
    code, _, why = send_batch(short.master.addr, "HaMin", [b"refused"])
    assert code == Code.HA_NOT_AVAILABLE and "slave" in why, why

    # allAckInSyncStateSet: with two in-sync slaves and one frozen, a put waits for both and times out;
    # without the key the other slave's confirmation is enough
    for all_ack, expected in (("true", Code.SLAVE_PERSISTENCE_TIMEOUT), ("false", OK)):
        name = f"ha-allack-{all_ack}"
        opts = {"syncFlushTimeout": "800", "allAckInSyncStateSet": all_ack}
        group = start_group(broker_factory, None, name, options=opts)
        ha_port = group.master.options["haListenPort"]
        second = broker_factory.broker(
            None,
            name=f"{name}-slave2",
            options={
                **HA_OPTIONS,
                **opts,
                "brokerRole": "SLAVE",
                "brokerId": "2",
                "brokerName": name,
                "haMasterAddress": f"127.0.0.1:{ha_port}",
            },
        )
        wait_until(lambda g=group: g.master.log().count("slave connected") >= 2, timeout=30, what="two slaves")
        wait_until(lambda g=group: send_batch(g.master.addr, "HaAllAck", [b"warm"])[0] == OK, timeout=30)
        wait_until(lambda g=group: slaves_in_sync(g.master.addr) == 2, timeout=30, what="both slaves caught up")
        os.kill(second.process.pid, signal.SIGSTOP)
        try:
            code, _, why = send_batch(group.master.addr, "HaAllAck", [b"one slave frozen"])
        finally:
            os.kill(second.process.pid, signal.SIGCONT)
        assert code == expected, (all_ack, code, why)


def slaves_in_sync(addr: str) -> int:
    """Slaves the master reports with no lag (``haSlave<N>``: ``addr acked=... lag=0``)."""
    with grpc.insecure_channel(addr) as channel:
        info = AdminStub(channel).BrokerRuntimeInfo(admin_pb2.BrokerRuntimeInfoRequest(), timeout=10).info
    return sum(1 for k, v in info.items() if k.startswith("haSlave") and k[7:].isdigit() and v.endswith(" lag=0"))


@pytest.mark.timeout(180)
def test_a_frozen_slave_the_master_cannot_write_to_is_dropped_and_catches_up_when_back(broker_factory):
    """A slave that stops reading (SIGSTOP: alive, the connection open, nothing read or reported) while the master
    has more to send than the sockets hold: the master drops it after haHousekeepingInterval (3 s here) instead of
    waiting on the full socket, and the slave, thawed, reconnects and catches up."""
    group = start_group(broker_factory, None, "ha-stalled", role="ASYNC_MASTER")
    assert send_batch(group.master.addr, "HaStalled", [b"before"])[0] == OK
    os.kill(group.slave.process.pid, signal.SIGSTOP)
    try:
        body = b"s" * 16_000
        for _ in range(64):  # ~16 MiB: more than the master's send and the slave's receive buffers take
            code, _, why = send_batch(group.master.addr, "HaStalled", [body] * 16)
            assert code == OK, why
        wait_until(
            lambda: "slave disconnected" in group.master.log(), timeout=30, what="the master to drop the frozen slave"
        )
    finally:
        os.kill(group.slave.process.pid, signal.SIGCONT)
    wait_until(lambda: group.master.log().count("slave connected") >= 2, timeout=60, what="the slave to reconnect")
    assert send_batch(group.master.addr, "HaStalled", [b"after"])[0] == OK
    wait_until(
        lambda: commitlog_end(group.master.store) == commitlog_end(group.slave.store),
        timeout=60,
        what="the slave to catch up",
    )
