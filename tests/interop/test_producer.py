"""The official rocketmq-python-client 5.1.2 Producer (sync and async send) against real broker processes.

Access point = the broker itself (standalone) and = the name server of a broker that registered there.
"""

from __future__ import annotations

import pytest
from rocketmq import ClientConfiguration, Credentials, Message, Producer
from rocketmq.grpc_protocol import definition_pb2

import oms
from tests.broker.v2client import raw_client
from tests.waiting import wait_until


def _message(topic: str, body: bytes, tag: str = "TagA", keys: str = "key-1") -> Message:
    msg = Message()
    msg.topic = topic
    msg.body = body
    msg.tag = tag
    msg.keys = keys
    msg.add_property("color", "blue")
    return msg


def _produce(access_point: str, topic: str, n_sync: int, n_async: int) -> list[str]:
    producer = Producer(ClientConfiguration(access_point, Credentials(), request_timeout=5), (topic,))
    producer.startup()
    try:
        ids = [producer.send(_message(topic, f"sync-{i}".encode())).message_id for i in range(n_sync)]
        futures = [producer.send_async(_message(topic, f"async-{i}".encode())) for i in range(n_async)]
        ids += [f.result(timeout=10).message_id for f in futures]
    finally:
        producer.shutdown()
    return ids


def _all_messages(addr: str, topic: str) -> list[definition_pb2.Message]:
    found = []
    with raw_client(addr) as c:
        for qid in range(4):
            found += c.pull("check", topic, qid, 0, batch=256).messages
    return found


@pytest.mark.timeout(120)
def test_official_producer_against_broker(broker):
    ids = _produce(broker.addr, "InteropT", n_sync=8, n_async=8)
    assert len(set(ids)) == 16
    stored = _all_messages(broker.addr, "InteropT")
    assert sorted(m.system_properties.message_id for m in stored) == sorted(ids)
    m = next(m for m in stored if m.body == b"sync-0")
    assert m.system_properties.tag == "TagA"
    assert list(m.system_properties.keys) == ["key-1"]
    assert m.user_properties["color"] == "blue"
    # round robin over the 4 queues
    assert len({m.system_properties.queue_id for m in stored}) == 4


@pytest.mark.timeout(120)
def test_official_producer_through_name_server(broker_factory):
    ns = broker_factory.namesrv()
    b = broker_factory.broker(ns)
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.resource_manager() as rm:
        # the port opens before the first registration lands: a route asked for in between names no broker
        wait_until(lambda: len(rm.cluster_list()) == 1, 20, what="the broker registered with the name server")
    ids = _produce(ns.addr, "InteropNsT", n_sync=4, n_async=4)
    stored = _all_messages(b.addr, "InteropNsT")
    assert sorted(m.system_properties.message_id for m in stored) == sorted(ids)


@pytest.mark.timeout(120)
def test_official_producer_fifo_topic(broker):
    import grpc

    from orbitmq.proto import admin_pb2, admin_pb2_grpc

    with grpc.insecure_channel(broker.addr) as ch:
        cfg = admin_pb2.TopicConfig(
            topic_name="InteropFifoT", read_queue_nums=4, write_queue_nums=4, perm=6, message_type="FIFO"
        )
        resp = admin_pb2_grpc.AdminStub(ch).CreateOrUpdateTopic(admin_pb2.CreateOrUpdateTopicRequest(config=cfg))
        assert resp.status.code == definition_pb2.Code.OK
    producer = Producer(ClientConfiguration(broker.addr, Credentials(), request_timeout=5), ("InteropFifoT",))
    producer.startup()
    try:
        receipts = []
        for i in range(6):
            msg = _message("InteropFifoT", f"fifo-{i}".encode())
            msg.message_group = "order-42"
            receipts.append(producer.send(msg))
        plain = _message("InteropFifoT", b"no-group")
        with pytest.raises(Exception, match="type"):
            producer.send(plain)  # NORMAL is not accepted by a FIFO topic (client-side check from the route)
    finally:
        producer.shutdown()
    stored = [m for m in _all_messages(broker.addr, "InteropFifoT")]
    assert [m.body for m in stored] == [f"fifo-{i}".encode() for i in range(6)]  # one queue, in order
    assert {m.system_properties.message_group for m in stored} == {"order-42"}
    assert all(m.system_properties.message_type == definition_pb2.FIFO for m in stored)
