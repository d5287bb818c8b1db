"""Automatic failover through etcd (controller mode) with real etcd, name server and broker processes: a SIGKILLed
master is replaced by its in-sync slave without losing an acknowledged message and comes back as a slave
(truncated to the new master's history); a SIGSTOPped master is fenced and rejoins as a slave."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
import rocketmq

import oms
from orbitmq.proto import admin_pb2
from orbitmq.proto.admin_pb2_grpc import AdminStub
from tests.broker.v2client import message, raw_client
from tests.conftest import BrokerFactory, BrokerHandle, NamesrvHandle
from tests.ha.cluster import HA_OPTIONS, OK, commitlog_bytes, read_all
from tests.ha.etcd import EtcdHandle
from tests.oms.test_mqadmin import mqadmin_cmd, ok
from tests.procs import ServerProcess, free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.integration
LEASE_MS = 2000


def start_controller_namesrv(tmp: Path, etcd: EtcdHandle) -> NamesrvHandle:
    port = free_port()
    conf = tmp / f"namesrv-{port}.conf"
    conf.write_text(
        "enableControllerInNamesrv=true\n"
        f"controllerAddr={etcd.endpoint}\n"
        f"controllerLeaseTtlMs={LEASE_MS}\n"
        "controllerPollIntervalMs=200\n"
    )
    args = [sys.executable, "-m", "namesrv.cli", "-p", str(port), "--host", "127.0.0.1", "-c", str(conf)]
    proc = ServerProcess(args, tmp / f"namesrv-{port}.log").start()
    proc.wait_port(port)
    return NamesrvHandle(port, proc)


def start_replica(
    factory: BrokerFactory,
    ns: NamesrvHandle,
    etcd: EtcdHandle,
    cluster: str,
    group: str,
    broker_id: int,
    role: str = "SYNC_MASTER",
    lease_ms: int = LEASE_MS,
) -> BrokerHandle:
    options = {
        **HA_OPTIONS,
        "brokerName": group,
        "brokerId": str(broker_id),
        "brokerRole": role,
        "haListenPort": str(free_port()),
        "enableControllerMode": "true",
        "controllerAddr": etcd.endpoint,
        "controllerLeaseTtlMs": str(lease_ms),
        "controllerPollIntervalMs": "200",
    }
    return factory.broker(ns, name=f"{group}-{broker_id}", cluster=cluster, options=options)


def is_master(b: BrokerHandle) -> bool:
    return b.process.alive() and "became master" in b.log()


def start_synced_pair(
    factory: BrokerFactory, ns: NamesrvHandle, etcd: EtcdHandle, cluster: str, group: str
) -> tuple[BrokerHandle, BrokerHandle]:
    """Two SYNC_MASTER replicas of ``group``: (the master etcd chose, the other), once the other is in sync."""
    a = start_replica(factory, ns, etcd, cluster, group, 1)
    b = start_replica(factory, ns, etcd, cluster, group, 2)
    wait_until(lambda: is_master(a) or is_master(b), timeout=30, what="a first master")
    master, slave = (a, b) if is_master(a) else (b, a)
    wait_until(lambda: "SyncStateSet changed" in master.log(), timeout=30, what="the slave to join the SyncStateSet")
    return master, slave


@dataclass
class Producer:
    """Single sends to whichever broker takes writes; records what was acknowledged (OK) and by whom."""

    brokers: list[BrokerHandle]
    topic: str
    acked: dict[str, bytes] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)
    n: int = 0

    def run(self) -> None:
        current = 0  # the broker that took the last write is tried first (a paused one costs a timeout)
        while not self.stop.is_set():
            for k in range(len(self.brokers)):
                i = (current + k) % len(self.brokers)
                b = self.brokers[i]
                if self.stop.is_set() or not b.process.alive():
                    continue
                self.n += 1
                body = f"m{self.n}".encode()
                try:
                    with raw_client(b.addr) as c:
                        resp = c.send(message(self.topic, body), timeout=1)
                except grpc.RpcError:
                    continue
                if resp.status.code == OK:
                    self.acked[resp.entries[0].message_id] = body
                    current = i
                    break
            else:
                time.sleep(0.02)


@pytest.mark.timeout(240)
def test_killed_master_is_replaced_without_losing_acknowledged_messages_and_rejoins_as_slave(broker_factory, etcd):
    ns = start_controller_namesrv(broker_factory.tmp_path, etcd)
    try:
        cluster, group = "FoKill", "fo-kill"
        old, new = start_synced_pair(broker_factory, ns, etcd, cluster, group)
        producer = Producer([old, new], "FoKill")
        worker = threading.Thread(target=producer.run)
        worker.start()
        try:
            wait_until(lambda: len(producer.acked) >= 100, timeout=60, what="acknowledged sends on the first master")
            old.stop(signal.SIGKILL)
            killed_at = time.monotonic()
            before = len(producer.acked)
            wait_until(lambda: len(producer.acked) > before, timeout=30, what="a write accepted by the new master")
            failover_s = time.monotonic() - killed_at
            target = len(producer.acked) + 50
            wait_until(lambda: len(producer.acked) >= target, timeout=60, what="writes on the new master")
        finally:
            producer.stop.set()
            worker.join(timeout=30)
        assert is_master(new)
        assert failover_s < 10, f"failover took {failover_s:.1f} s"
        info = runtime_info(new.addr)
        assert info["brokerEpoch"] == "2" and info["brokerRole"] == "SYNC_MASTER", info
        survivors = read_all(new.addr, "FoKill")
        missing = set(producer.acked) - set(survivors)
        assert not missing, f"{len(missing)} of {len(producer.acked)} acknowledged messages lost"
        # the name server routes to the new master at once (it re-registered as id 0)
        with raw_client(ns.addr) as c:
            route = c.route("FoKill")
        assert {f"{a.host}:{a.port}" for q in route.message_queues for a in q.broker.endpoints.addresses} == {new.addr}
        # the old master returns with its store: it follows the new one, its extra tail cut, byte for byte
        old.start()
        wait_until(lambda: "following master" in old.log(), timeout=30, what="the old master to rejoin as slave")
        wait_until(
            lambda: commitlog_bytes(old.store) == commitlog_bytes(new.store),
            timeout=60,
            what="the old master's CommitLog to equal the new master's",
        )
        with raw_client(old.addr) as c:
            refused = c.send(message("FoKill", b"to the old master"), timeout=5)
        assert refused.status.code != OK and "SLAVE" in refused.status.message
    finally:
        ns.process.stop()


@pytest.mark.timeout(240)
def test_paused_master_is_fenced_and_rejoins_as_slave(broker_factory, etcd):
    ns = start_controller_namesrv(broker_factory.tmp_path, etcd)
    try:
        cluster, group = "FoStop", "fo-stop"
        old, new = start_synced_pair(broker_factory, ns, etcd, cluster, group)
        producer = Producer([old, new], "FoStop")
        worker = threading.Thread(target=producer.run)
        worker.start()
        try:
            wait_until(lambda: len(producer.acked) >= 50, timeout=60)
            old.process.proc.send_signal(signal.SIGSTOP)  # a partition: alive, but silent
            wait_until(lambda: is_master(new), timeout=30, what="the slave to take over")
            target = len(producer.acked) + 50
            wait_until(lambda: len(producer.acked) >= target, timeout=60, what="writes on the new master")
            old.process.proc.send_signal(signal.SIGCONT)
            # back, it must not take a write as master: fenced at once (its lease is stale), then a slave
            with raw_client(old.addr) as c:
                late = c.send(message("FoStop", b"to the paused master"), timeout=10)
            assert late.status.code != OK, "a paused master took a write after a new master was elected"
            assert "fenced" in late.status.message or "SLAVE" in late.status.message, late.status.message
            wait_until(lambda: "following master" in old.log(), timeout=30, what="the old master to step down")
            target = len(producer.acked) + 30
            wait_until(lambda: len(producer.acked) >= target, timeout=60, what="writes after the old master returned")
        finally:
            producer.stop.set()
            worker.join(timeout=30)
            if old.process.alive():
                old.process.proc.send_signal(signal.SIGCONT)
        survivors = read_all(new.addr, "FoStop")
        assert not set(producer.acked) - set(survivors)
        # no message stored twice: every body once on the surviving master
        bodies = list(survivors.values())
        assert len(bodies) == len(set(bodies))
        wait_until(lambda: commitlog_bytes(old.store) == commitlog_bytes(new.store), timeout=60)
    finally:
        ns.process.stop()


@pytest.mark.timeout(240)
def test_returning_master_truncates_what_the_new_master_never_had(broker_factory, etcd):
    """ASYNC_MASTER: writes the slave never received are cut from the old master when it rejoins (epoch history)."""
    ns = start_controller_namesrv(broker_factory.tmp_path, etcd)
    try:
        a = start_replica(broker_factory, ns, etcd, "FoTrunc", "fo-trunc", 1, role="ASYNC_MASTER")
        wait_until(lambda: is_master(a), timeout=30, what="the first broker to be elected")
        b = start_replica(broker_factory, ns, etcd, "FoTrunc", "fo-trunc", 2, role="ASYNC_MASTER")
        wait_until(lambda: "SyncStateSet changed" in a.log(), timeout=30, what="the slave to join the SyncStateSet")
        shared = [send_one(a.addr, "FoTrunc", f"shared{i}".encode()) for i in range(20)]
        wait_until(lambda: commitlog_bytes(a.store) == commitlog_bytes(b.store), timeout=30)
        b.process.proc.send_signal(signal.SIGSTOP)
        try:
            for i in range(20):  # acknowledged by an ASYNC_MASTER, never replicated
                send_one(a.addr, "FoTrunc", f"lost{i}".encode())
            a.stop(signal.SIGKILL)
        finally:
            b.process.proc.send_signal(signal.SIGCONT)
        wait_until(lambda: is_master(b), timeout=30, what="the slave to be elected")
        after = [send_one(b.addr, "FoTrunc", f"after{i}".encode()) for i in range(10)]
        a.start()
        wait_until(
            lambda: "following master" in a.log() and "dropped_bytes=0" not in a.log().split("following")[-1],
            timeout=30,
            what="the old master to rejoin and cut its tail",
        )
        wait_until(lambda: commitlog_bytes(a.store) == commitlog_bytes(b.store), timeout=60)
        on_old, on_new = read_all(a.addr, "FoTrunc"), read_all(b.addr, "FoTrunc")
        assert on_old == on_new and set(shared) | set(after) <= set(on_old)
        # frames already in the paused slave's socket buffer may have reached it; the rest were cut
        assert sum(body.startswith(b"lost") for body in on_old.values()) < 20
    finally:
        ns.process.stop()


def send_one(addr: str, topic: str, body: bytes) -> str:
    with raw_client(addr) as c:
        resp = c.send(message(topic, body), timeout=5)
    assert resp.status.code == OK, resp.status
    return resp.entries[0].message_id


@pytest.mark.timeout(240)
def test_etcd_restart_does_not_disturb_a_healthy_master(broker_factory, etcd):
    ns = start_controller_namesrv(broker_factory.tmp_path, etcd)
    try:
        a = start_replica(broker_factory, ns, etcd, "FoEtcd", "fo-etcd", 1, lease_ms=8000)
        wait_until(lambda: is_master(a), timeout=30, what="the first broker to be elected")
        b = start_replica(broker_factory, ns, etcd, "FoEtcd", "fo-etcd", 2, lease_ms=8000)
        wait_until(lambda: "SyncStateSet changed" in a.log(), timeout=30, what="the slave to join the SyncStateSet")
        failures: list[str] = []
        stop = threading.Event()

        def produce() -> None:
            n = 0
            with raw_client(a.addr) as c:
                while not stop.is_set():
                    n += 1
                    resp = c.send(message("FoEtcd", f"e{n}".encode()), timeout=10)
                    if resp.status.code != OK:
                        failures.append(resp.status.message)
                    time.sleep(0.01)

        worker = threading.Thread(target=produce)
        worker.start()
        try:
            time.sleep(1)
            etcd.stop()
            time.sleep(1)
            etcd.start()
            wait_until(lambda: "controller (etcd) reachable again" in a.log(), timeout=30)
            time.sleep(1)
        finally:
            stop.set()
            worker.join(timeout=30)
        assert not failures, failures[:3]
        assert a.log().count("became master") == 1 and "became master" not in b.log()
    finally:
        ns.process.stop()


def runtime_info(addr: str) -> dict[str, str]:
    with grpc.insecure_channel(addr) as channel:
        return dict(AdminStub(channel).BrokerRuntimeInfo(admin_pb2.BrokerRuntimeInfoRequest(), timeout=10).info)


@pytest.mark.timeout(120)
def test_mqadmin_shows_the_sync_state_set_and_epochs(broker_factory, etcd):
    ns = start_controller_namesrv(broker_factory.tmp_path, etcd)
    try:
        a = start_replica(broker_factory, ns, etcd, "FoAdm", "fo-adm", 1)
        wait_until(lambda: is_master(a), timeout=30, what="the first broker to be elected")
        b = start_replica(broker_factory, ns, etcd, "FoAdm", "fo-adm", 2)
        wait_until(lambda: "SyncStateSet changed" in a.log(), timeout=30, what="the slave to join the SyncStateSet")
        n = ("-n", ns.addr)

        def sync_state() -> list[dict[str, object]]:
            return json.loads(ok("getSyncStateSet", *n, "-b", "fo-adm", "--json"))

        wait_until(lambda: any(r["ha"].get("syncStateSet") == "1,2" for r in sync_state()), 30, what="SyncStateSet 1,2")
        rows = {r["broker_id"]: r["ha"] for r in json.loads(ok("getBrokerEpoch", *n, "-b", "fo-adm", "--json"))}
        assert rows[0]["brokerRole"] == "SYNC_MASTER" and rows[0]["masterBrokerId"] == "1", rows
        assert {r["brokerEpoch"] for r in rows.values()} == {"1"}, rows
        text = ok("getSyncStateSet", *n, "-c", "FoAdm")
        assert text.splitlines()[1].split() == ["fo-adm", "1", "1,2", "1"], text
        assert "SLAVE" in ok("haStatus", *n, "-b", "fo-adm")
        assert b.process.alive()
        done = mqadmin_cmd("getSyncStateSet", *n, "-b", "fo-nobody")
        assert done.returncode == 1 and "fo-nobody" in done.stderr
    finally:
        ns.process.stop()


@pytest.mark.timeout(240)
def test_oms_and_official_producers_follow_the_new_master(broker_factory, etcd):
    """Producers given only the name server: the official client and oms keep sending through a failover, and every
    message either of them had acknowledged is on the new master (read back from it)."""
    ns = start_controller_namesrv(broker_factory.tmp_path, etcd)
    try:
        old, new = start_synced_pair(broker_factory, ns, etcd, "FoClients", "fo-clients")
        topic = "FoClientsT"
        with raw_client(old.addr) as c:  # the topic exists on the master before the producers ask for its route
            assert c.send(message(topic, b"first"), timeout=5).status.code == OK
        acked: dict[str, set[str]] = {"oms": set(), "official": set()}
        stop = threading.Event()

        def oms_loop() -> None:
            with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap:
                producer = ap.create_producer(operation_timeout=2000)
                producer.startup()
                n = 0
                while not stop.is_set():
                    n += 1
                    try:
                        acked["oms"].add(producer.send(oms.BytesMessage(f"oms-{n}", topic)).message_id)
                    except oms.OMSException:
                        time.sleep(0.1)
                producer.shutdown()

        def official_loop() -> None:
            producer = rocketmq.Producer(
                rocketmq.ClientConfiguration(ns.addr, rocketmq.Credentials(), request_timeout=2), (topic,)
            )
            producer.startup()
            n = 0
            try:
                while not stop.is_set():
                    n += 1
                    m = rocketmq.Message()
                    m.topic, m.body = topic, f"official-{n}".encode()
                    try:
                        acked["official"].add(producer.send(m).message_id)
                    except Exception:  # the client's own errors while the master is gone: try again
                        time.sleep(0.1)
            finally:
                producer.shutdown()

        workers = [threading.Thread(target=oms_loop), threading.Thread(target=official_loop)]
        for w in workers:
            w.start()
        try:
            wait_until(lambda: all(len(s) >= 20 for s in acked.values()), 60, what="both producers sending")
            old.stop(signal.SIGKILL)
            before = {k: len(v) for k, v in acked.items()}
            wait_until(
                lambda: all(len(acked[k]) >= before[k] + 20 for k in acked),
                60,
                what="both producers sending to the new master",
            )
        finally:
            stop.set()
            for w in workers:
                w.join(timeout=60)
        assert is_master(new)
        stored = set(read_all(new.addr, topic))
        for who, ids in acked.items():
            missing = ids - stored
            assert not missing, f"{who}: {len(missing)} of {len(ids)} acknowledged messages are not on the new master"
    finally:
        ns.process.stop()
