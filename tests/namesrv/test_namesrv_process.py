"""Real ``mqnamesrv`` processes with a real ``BrokerRegistrar``: routes, expiry, sessions, several name servers."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2 as d
from rocketmq.grpc_protocol import service_pb2 as s

from broker.registration import BrokerRegistrar
from orbitmq.proto import namesrv_pb2 as pb
from orbitmq.route import TopicConfig, TopicMessageType
from tests.namesrv.helpers import client_metadata, internal_stub, namesrv_process, v2_stub
from tests.procs import ROOT, ServerProcess, free_port
from tests.waiting import eventually, wait_until

pytestmark = [pytest.mark.timeout(90), pytest.mark.integration]
OK = d.Code.OK


async def has_route(addr: str, topic: str) -> bool:
    async with grpc.aio.insecure_channel(addr, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        resp = await internal_stub(channel).GetRouteInfoByTopic(pb.GetRouteInfoRequest(topic=topic), timeout=3)
    assert resp.code != 0
    return resp.code == OK


def test_register_route_cluster_topics_kv_and_unregister(tmp_path: Path) -> None:
    topics = [
        TopicConfig("t-normal"),
        TopicConfig("t-fifo", read_queue_nums=2, write_queue_nums=2, message_type=TopicMessageType.FIFO),
    ]

    async def scenario(addr: str) -> None:
        registrar = BrokerRegistrar([addr], "DefaultCluster", "broker-a", 0, "127.0.0.1:18081", lambda: list(topics))
        assert await registrar.start() == 1
        try:
            route = await registrar.get_route("t-fifo")
            assert route is not None
            assert route.queue_datas[0].message_type == TopicMessageType.FIFO
            assert route.queue_datas[0].read_queue_nums == 2
            assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:18081"}
            assert await registrar.get_route("missing") is None
            info = await registrar.cluster_info()
            assert info is not None and info.cluster_addr_table == {"DefaultCluster": {"broker-a"}}
            assert registrar.master_addr == "127.0.0.1:18081"

            async with grpc.aio.insecure_channel(addr) as channel:
                stub, v2 = internal_stub(channel), v2_stub(channel)
                listed = await stub.GetAllTopicList(pb.GetAllTopicListRequest(), timeout=3)
                assert listed.code == OK and list(listed.topics) == ["t-fifo", "t-normal"]

                md = client_metadata()
                resp = await v2.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="t-normal")), metadata=md)
                assert resp.status.code == OK
                assert len(resp.message_queues) == 4
                mq = resp.message_queues[0]
                assert mq.broker.name == "broker-a" and mq.broker.id == 0
                assert mq.permission == d.Permission.READ_WRITE
                assert mq.broker.endpoints.scheme == d.AddressScheme.IPv4
                assert (mq.broker.endpoints.addresses[0].host, mq.broker.endpoints.addresses[0].port) == (
                    "127.0.0.1",
                    18081,
                )
                assert list(mq.accept_message_types) == [d.MessageType.NORMAL]
                missing = await v2.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="nope")), metadata=md)
                assert missing.status.code == d.Code.TOPIC_NOT_FOUND
                illegal = await v2.QueryRoute(s.QueryRouteRequest(topic=d.Resource(name="bad topic!")), metadata=md)
                assert illegal.status.code == d.Code.ILLEGAL_TOPIC

                # topic table changes reach the name server on register_now
                topics.append(TopicConfig("t-new"))
                topics.pop(0)
                assert await registrar.register_now() == 1
                assert await has_route(addr, "t-new")
                assert not await has_route(addr, "t-normal")

                put = await stub.PutKVConfig(pb.KVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="k", value="v"))
                assert put.code == OK
                got = await stub.GetKVConfig(pb.KVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="k"))
                assert (got.code, got.value) == (OK, "v")
                deleted = await stub.DeleteKVConfig(pb.KVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="k"))
                assert deleted.code == OK
                gone = await stub.GetKVConfig(pb.KVConfigRequest(namespace="ORDER_TOPIC_CONFIG", key="k"))
                assert gone.code == d.Code.NOT_FOUND
                bad = await stub.PutKVConfig(pb.KVConfigRequest(namespace="", key="k", value="v"))
                assert bad.code == d.Code.BAD_REQUEST
        finally:
            await registrar.shutdown()
        assert not await has_route(addr, "t-fifo")  # shutdown unregisters at once

    with namesrv_process(tmp_path) as (proc, addr):
        asyncio.run(scenario(addr))
        proc.stop()
        log = proc.log()
    assert "broker registered" in log and "broker unregistered" in log and "name server stopped" in log


def test_silent_broker_expires_but_heartbeating_one_stays(tmp_path: Path) -> None:
    async def scenario(addr: str) -> None:
        reg = pb.BrokerRegistration(
            cluster_name="c",
            broker_name="silent",
            broker_id=0,
            broker_addr="127.0.0.1:1",
            topic_configs=[pb.TopicConfigData(topic_name="t-silent", read_queue_nums=1, write_queue_nums=1, perm=6)],
        )
        async with grpc.aio.insecure_channel(addr) as channel:
            result = await internal_stub(channel).RegisterBroker(reg, timeout=3)
            assert result.code == OK
            bad = await internal_stub(channel).RegisterBroker(pb.BrokerRegistration(broker_name="x"), timeout=3)
            assert bad.code == d.Code.BAD_REQUEST
        registrar = BrokerRegistrar(
            addr, "c", "alive", 0, "127.0.0.1:2", lambda: [TopicConfig("t-alive")], interval_s=0.3
        )
        await registrar.start()
        try:
            assert await has_route(addr, "t-silent")
            start = asyncio.get_running_loop().time()

            async def silent_gone() -> bool:
                return not await has_route(addr, "t-silent")

            await eventually(silent_gone, 8, "silent broker expiry")
            assert asyncio.get_running_loop().time() - start >= 1.0  # not before brokerExpiredSeconds
            assert await has_route(addr, "t-alive")
        finally:
            await registrar.shutdown()

    with namesrv_process(tmp_path, expire_s=1.5) as (proc, addr):
        asyncio.run(scenario(addr))
        assert "broker expired" in proc.log()


def test_crashed_broker_session_close_drops_it_at_once(tmp_path: Path) -> None:
    with namesrv_process(tmp_path, expire_s=120) as (_, addr):
        broker = ServerProcess(
            [sys.executable, "-m", "tests.namesrv.registrar_proc", addr, "crashy", "127.0.0.1:3", "t-crash", "30"],
            tmp_path / "registrar.log",
        ).start()
        try:
            wait_until(lambda: asyncio.run(has_route(addr, "t-crash")), 20, "registration of crashy", interval=0.2)
            broker.stop(signal.SIGKILL)
            # far sooner than the 120 s expiry: the closed session removes it
            wait_until(lambda: not asyncio.run(has_route(addr, "t-crash")), 10, "session-close removal", interval=0.2)
        finally:
            broker.stop(signal.SIGKILL)


def test_two_name_servers_one_down_then_back(tmp_path: Path) -> None:
    port_b = free_port()
    addr_b = f"127.0.0.1:{port_b}"

    async def phase1(addr_a: str, registrar: BrokerRegistrar) -> None:
        assert await registrar.start() == 1  # B is down: no error, A accepted
        assert registrar.healthy_namesrvs == [addr_a]
        assert await has_route(addr_a, "t-two")

    with namesrv_process(tmp_path, expire_s=2.0) as (proc_a, addr_a):
        loop = asyncio.new_event_loop()
        registrar = BrokerRegistrar(
            [addr_a, addr_b], "c", "two", 0, "127.0.0.1:4", lambda: [TopicConfig("t-two")], interval_s=0.3
        )
        try:
            loop.run_until_complete(phase1(addr_a, registrar))
            args = [
                str(Path(sys.executable).parent / "mqnamesrv"),
                "-p",
                str(port_b),
                "--host",
                "127.0.0.1",
                "--broker-expired-seconds",
                "2",
            ]
            proc_b = ServerProcess(args, tmp_path / "namesrv-b.log").start()
            try:
                proc_b.wait_port(port_b, 20)
                loop.run_until_complete(eventually(lambda: has_route(addr_b, "t-two"), 10, "registration on B"))
                proc_a.stop()  # A goes away; the registrar keeps B alive past its 2 s expiry
                loop.run_until_complete(asyncio.sleep(3.0))
                assert loop.run_until_complete(has_route(addr_b, "t-two"))
                route = loop.run_until_complete(registrar.get_route("t-two"))
                assert route is not None and route.broker_datas[0].broker_name == "two"
                assert registrar.healthy_namesrvs == [addr_b]
            finally:
                loop.run_until_complete(registrar.shutdown())
                proc_b.stop()
        finally:
            loop.close()


def test_cli_reads_config_file_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    conf = tmp_path / "namesrv.conf"
    conf.write_text(f"# test config\nlistenPort={port}\nhost=127.0.0.1\nbrokerExpiredSeconds=30\n")
    args = [str(Path(sys.executable).parent / "mqnamesrv"), "-c", str(conf), "--json-log"]
    proc = ServerProcess(args, tmp_path / "l")
    proc.start()
    try:
        proc.wait_port(port, 20)
    finally:
        rc = proc.stop(signal.SIGTERM)
    assert rc == 0
    assert '"event": "name server started"' in proc.log()
    bad = ServerProcess(
        [str(Path(sys.executable).parent / "mqnamesrv"), "-c", str(tmp_path / "missing.conf")], tmp_path / "bad"
    ).start()
    assert bad.proc is not None and bad.proc.wait(timeout=20) == 2
    assert ROOT.exists()


def test_restarted_name_server_gets_the_registration_back_before_the_next_tick(tmp_path: Path) -> None:
    port = free_port()
    addr = f"127.0.0.1:{port}"
    args = [str(Path(sys.executable).parent / "mqnamesrv"), "-p", str(port), "--host", "127.0.0.1"]

    async def scenario() -> None:
        first = ServerProcess(args, tmp_path / "first.log").start()
        try:
            first.wait_port(port, 20)
            registrar = BrokerRegistrar(addr, "c", "b", 0, "127.0.0.1:5", lambda: [TopicConfig("t-re")], interval_s=60)
            assert await registrar.start() == 1
        finally:
            first.stop()
        await asyncio.sleep(1.5)  # down for longer than the first quick retry
        second = ServerProcess(args, tmp_path / "second.log").start()
        try:
            second.wait_port(port, 20)
            # the interval is 60 s: only the lost-session retry can bring the route back this fast
            await eventually(lambda: has_route(addr, "t-re"), 15, "re-registration after restart")

            async def healthy() -> bool:  # the name server may show the route before the registrar reads its reply
                return registrar.healthy_namesrvs == [addr]

            await eventually(healthy, 5, "the registrar counting the name server healthy again")
        finally:
            await registrar.shutdown()
            second.stop()

    asyncio.run(scenario())
