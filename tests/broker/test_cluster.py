"""Two name servers + two brokers: routes list both brokers, producing spreads, name server and broker failures."""

from __future__ import annotations

import signal
import time

import grpc
import pytest
from rocketmq import ClientConfiguration, Credentials, Message, Producer
from rocketmq.grpc_protocol import definition_pb2

from orbitmq.proto import admin_pb2, admin_pb2_grpc
from tests.broker.v2client import message, raw_client
from tests.waiting import wait_until

OK = definition_pb2.Code.OK
EXPIRY_S = 3.0


def _brokers_in_route(addr: str, topic: str) -> set[str]:
    with raw_client(addr) as c:
        resp = c.route(topic)
    if resp.status.code != OK:
        return set()
    return {q.broker.name for q in resp.message_queues}


def _send(producer: Producer, topic: str, n: int) -> None:
    for i in range(n):
        msg = Message()
        msg.topic = topic
        msg.body = f"c{i}".encode()
        producer.send(msg)


def _stored(addr: str, topic: str) -> int:
    with raw_client(addr) as c:
        return sum(c.query_offset(topic, q, definition_pb2.QueryOffsetPolicy.END).offset for q in range(4))


@pytest.mark.timeout(180)
def test_two_brokers_two_name_servers(broker_factory):
    ns1 = broker_factory.namesrv(broker_expired_seconds=EXPIRY_S)
    ns2 = broker_factory.namesrv(broker_expired_seconds=EXPIRY_S)
    a = broker_factory.broker([ns1, ns2], name="broker-a")
    b = broker_factory.broker([ns1, ns2], name="broker-b")
    topic = "ClusterT"
    # create the topic on both brokers (auto-create on first send), then wait for registration
    for br in (a, b):
        with raw_client(br.addr) as c:
            assert c.send(message(topic, b"seed")).status.code == OK
    for addr in (ns1.addr, ns2.addr, a.addr, b.addr):

        def both_listed(addr: str = addr) -> bool:
            return _brokers_in_route(addr, topic) == {"broker-a", "broker-b"}

        wait_until(both_listed, 15, what=addr)

    producer = Producer(ClientConfiguration(f"{ns1.addr};{ns2.addr}", Credentials(), request_timeout=5), (topic,))
    producer.startup()
    try:
        _send(producer, topic, 16)
        assert _stored(a.addr, topic) >= 1 + 4 and _stored(b.addr, topic) >= 1 + 4  # round robin over 8 queues

        ns1.stop()
        _send(producer, topic, 4)  # sends go to brokers directly
        second = Producer(ClientConfiguration(f"{ns1.addr};{ns2.addr}", Credentials(), request_timeout=5), (topic,))
        second.startup()  # route queries fail over to ns2
        try:
            _send(second, topic, 4)
        finally:
            second.shutdown()
        assert _stored(a.addr, topic) + _stored(b.addr, topic) == 2 + 16 + 8

        # a topic living only on broker-b: broker-a routes to it without creating it locally
        with raw_client(b.addr) as c:
            assert c.send(message("OnlyOnBT", b"x")).status.code == OK
        wait_until(lambda: _brokers_in_route(ns2.addr, "OnlyOnBT") == {"broker-b"}, 15, what="OnlyOnBT route")
        assert _brokers_in_route(a.addr, "OnlyOnBT") == {"broker-b"}
        with grpc.insecure_channel(a.addr) as ch:
            listed = admin_pb2_grpc.AdminStub(ch).ListTopics(admin_pb2.ListTopicsRequest(), timeout=10).topics
        assert "OnlyOnBT" not in {t.topic_name for t in listed}

        t0 = time.monotonic()
        b.stop(signal.SIGKILL)  # no unregistration: the name server must expire it
        wait_until(lambda: _brokers_in_route(ns2.addr, topic) == {"broker-a"}, EXPIRY_S + 10, what="expiry")
        assert time.monotonic() - t0 < EXPIRY_S + 10
        assert _brokers_in_route(a.addr, topic) == {"broker-a"}
    finally:
        producer.shutdown()


@pytest.mark.timeout(120)
def test_namesrv_addr_from_environment(broker_factory, tmp_path):
    import sys

    from tests.procs import ServerProcess, free_port

    ns = broker_factory.namesrv()
    port = free_port()
    args = [sys.executable, "-m", "broker.cli", "--store", str(tmp_path / "env-store"), "--port", str(port)]
    args += ["-o", "brokerName=broker-env", "-o", "warmMapedFileEnable=false", "-o", "mappedFileSizeCommitLog=4194304"]
    proc = ServerProcess(args, tmp_path / "env-broker.log", env={"NAMESRV_ADDR": ns.addr}).start()
    try:
        proc.wait_port(port)
        with raw_client(f"127.0.0.1:{port}") as c:
            assert c.send(message("EnvT")).status.code == OK
        wait_until(lambda: _brokers_in_route(ns.addr, "EnvT") == {"broker-env"}, 15, what="registration via env")
    finally:
        assert proc.stop() == 0
