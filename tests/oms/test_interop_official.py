"""Interop of the oms SDK with the official rocketmq-python-client 5.1.2 against a real broker: oms sends, the
official Simple/PushConsumer read; the official Producer sends, the oms push and pull consumers read."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from rocketmq import ConsumeResult, FilterExpression, Message, MessageListener, Producer, PushConsumer
from rocketmq.grpc_protocol import definition_pb2

import oms
from orbitmq.proto import admin_pb2, admin_pb2_grpc
from tests.conftest import BrokerHandle
from tests.oms.helpers import create_topic
from tests.pop.client_helpers import config, receive_until, simple_consumer
from tests.waiting import wait_until

WAIT_S = 15.0


def create_group(addr: str, group: str, *, orderly: bool = False) -> None:
    with grpc.insecure_channel(addr) as ch:
        cfg = admin_pb2.GroupConfig(group_name=group, consume_enable=True, consume_message_orderly=orderly)
        resp = admin_pb2_grpc.AdminStub(ch).CreateOrUpdateGroup(
            admin_pb2.CreateOrUpdateGroupRequest(config=cfg), timeout=10
        )
        assert resp.status.code == definition_pb2.Code.OK, resp.status


def oms_message(topic: str, i: int, body: bytes | None = None) -> oms.BytesMessage:
    msg = oms.BytesMessage(body or f"oms-{i}".encode(), topic, tags=f"Tag{i % 2}", keys=[f"key-{i}", f"order-{i}"])
    msg.put_user_headers("color", "red" if i % 2 else "blue").put_user_headers("n", i)
    return msg


def check_official(received: Any, sent: oms.BytesMessage, message_id: str) -> None:
    """An official-client message matches what oms sent: id, body, tag, keys and user properties."""
    assert received.message_id == message_id
    assert received.body == sent.body
    assert received.tag == sent.tags
    assert received.keys == set(sent.keys)
    assert {k: received.properties.get(k) for k in ("color", "n")} == {
        "color": sent.user_headers()["color"],
        "n": sent.user_headers()["n"],
    }
    assert not received.corrupted


def official_send(addr: str, topic: str, count: int, message_group: str | None = None) -> list[tuple[Message, str]]:
    """Send ``count`` messages with the official Producer: tag, two keys, two user properties; (message, id)."""
    producer = Producer(config(addr), (topic,))
    producer.startup()
    try:
        out = []
        for i in range(count):
            msg = Message()
            msg.topic = topic
            msg.body = f"official-{i}".encode()
            msg.tag = f"Tag{i % 2}"
            msg.keys = f"key-{i}"
            msg.keys = f"order-{i}"
            msg.add_property("color", "red" if i % 2 else "blue")
            msg.add_property("n", str(i))
            if message_group:
                msg.message_group = message_group
            out.append((msg, producer.send(msg).message_id))
        return out
    finally:
        producer.shutdown()


def check_oms(received: oms.BytesMessage, sent: Message, message_id: str) -> None:
    """An oms message matches what the official Producer sent."""
    assert received.message_id == message_id
    assert received.body == sent.body
    assert received.tags == sent.tag
    assert set(received.keys) == sent.keys
    headers = received.user_headers()
    assert (headers.get("color"), headers.get("n")) == (sent.properties["color"], sent.properties["n"])


@pytest.fixture
def official_pusher() -> Iterator[Callable[[str, str, MessageListener], PushConsumer]]:
    started: list[PushConsumer] = []

    def start(addr: str, group: str, topic: str, listener: MessageListener) -> PushConsumer:
        consumer = PushConsumer(config(addr), group, listener, {topic: FilterExpression("*")})
        consumer.startup()
        started.append(consumer)
        return consumer

    yield start  # type: ignore[misc]
    for consumer in started:
        consumer.shutdown()


@pytest.mark.timeout(60)
def test_oms_producer_to_official_simple_consumer_with_compressed_body(
    shared_broker: BrokerHandle, producer: oms.Producer
) -> None:
    topic, group = "InteropOmsSimple", "GInteropOmsSimple"
    big = os.urandom(1500) * 6  # 9 000 bytes, compressible: oms sends it zlib-compressed (body_encoding GZIP)
    sent = [oms_message(topic, i) for i in range(6)] + [oms_message(topic, 6, big)]
    ids = [producer.send(m).message_id for m in sent[:3]]  # one by one, and as a batch
    ids += [r.message_id for r in producer.send_batch(sent[3:])]
    assert all(ids) and len(set(ids)) == len(sent)
    with simple_consumer(shared_broker.addr, group, topic, await_s=1) as consumer:
        got = receive_until(consumer, len(sent), invisible_s=30, timeout=WAIT_S)
        by_id = {m.message_id: m for m in got}
        assert sorted(by_id) == sorted(ids), "every message once"
        for msg, message_id in zip(sent, ids, strict=True):
            check_official(by_id[message_id], msg, message_id)
        assert len(by_id[ids[-1]].body) == 9000, "the compressed body comes back as sent"
        for m in got:
            consumer.ack(m)
        assert consumer.receive(16, 30) == []


class _OfficialRecorder(MessageListener):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: dict[str, Any] = {}

    def consume(self, message: Any) -> ConsumeResult:
        with self.lock:
            self.seen[message.message_id] = message
        return ConsumeResult.SUCCESS

    def count(self) -> int:
        with self.lock:
            return len(self.seen)


@pytest.mark.timeout(60)
def test_oms_producer_to_official_push_consumer(
    shared_broker: BrokerHandle, producer: oms.Producer, official_pusher: Any
) -> None:
    topic, group = "InteropOmsPush", "GInteropOmsPush"
    big = os.urandom(1000) * 8
    sent = [oms_message(topic, i) for i in range(5)] + [oms_message(topic, 5, big)]
    futures = [producer.send_async(m) for m in sent]
    ids = [f.get(10).message_id for f in futures]
    listener = _OfficialRecorder()
    official_pusher(shared_broker.addr, group, topic, listener)
    wait_until(lambda: listener.count() >= len(sent), what="the official PushConsumer got every message")
    time.sleep(0.3)  # nothing more (no duplicate) shows up
    assert sorted(listener.seen) == sorted(ids)
    for msg, message_id in zip(sent, ids, strict=True):
        check_official(listener.seen[message_id], msg, message_id)


@pytest.mark.timeout(60)
def test_official_producer_to_oms_push_consumer(shared_broker: BrokerHandle, access_point: Any) -> None:
    topic, group = "InteropOfficialPush", "GInteropOfficialPush"
    sent = official_send(shared_broker.addr, topic, 6)
    got: dict[str, oms.BytesMessage] = {}
    lock = threading.Lock()

    def listener(message: oms.BytesMessage, context: oms.ConsumeContext) -> object:
        with lock:
            got[message.message_id or ""] = message
        return oms.ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    with access_point.create_push_consumer(consumer_id=group, consume_from_where="first") as consumer:
        consumer.attach_queue(topic, listener)
        wait_until(lambda: len(got) >= len(sent), what="the oms push consumer got every message")
        time.sleep(0.3)
    assert sorted(got) == sorted(message_id for _, message_id in sent)
    for msg, message_id in sent:
        check_oms(got[message_id], msg, message_id)


@pytest.mark.timeout(60)
def test_official_producer_to_oms_pull_consumer_receive_and_queue_pull(
    shared_broker: BrokerHandle, access_point: Any
) -> None:
    topic = "InteropOfficialPull"
    sent = official_send(shared_broker.addr, topic, 6)
    by_id = {message_id: msg for msg, message_id in sent}
    with access_point.create_pull_consumer(consumer_id="GInteropOfficialPull", consume_from_where="first") as pc:
        pc.attach_queue(topic)
        received: list[oms.BytesMessage] = []
        deadline = time.monotonic() + WAIT_S
        while len(received) < len(sent) and time.monotonic() < deadline:
            received += pc.batch_receive(16, 1.0)
        assert sorted(m.message_id or "" for m in received) == sorted(by_id)
        for m in received:
            check_oms(m, by_id[m.message_id or ""], m.message_id or "")
            pc.ack(m)
        pulled = [m for q in pc.queues(topic) for m in pc.pull(q, 0, 64, timeout=0.0)]
        assert sorted(m.message_id or "" for m in pulled) == sorted(by_id)
        for m in pulled:
            check_oms(m, by_id[m.message_id or ""], m.message_id or "")


@pytest.mark.timeout(60)
def test_fifo_message_group_oms_to_official_simple_consumer(
    shared_broker: BrokerHandle, producer: oms.Producer
) -> None:
    topic, group = "InteropFifoOms", "GInteropFifoOms"
    create_topic(shared_broker.addr, topic, "FIFO")
    create_group(shared_broker.addr, group, orderly=True)
    sent = [oms.BytesMessage(f"fifo-{i}", topic, sharding_key="order-7", tags="F") for i in range(5)]
    ids = [producer.send(m).message_id for m in sent]
    order: list[str] = []
    with simple_consumer(shared_broker.addr, group, topic, await_s=1) as consumer:
        deadline = time.monotonic() + WAIT_S
        while len(order) < len(sent) and time.monotonic() < deadline:
            for m in consumer.receive(16, 30):  # a FIFO group hands out the next of a group after the ack
                assert m.message_group == "order-7" and m.tag == "F"
                order.append(m.message_id)
                consumer.ack(m)
    assert order == ids, "one message group: consumed in send order"


@pytest.mark.timeout(60)
def test_fifo_message_group_official_to_oms_pull(shared_broker: BrokerHandle, access_point: Any) -> None:
    topic = "InteropFifoOfficial"
    create_topic(shared_broker.addr, topic, "FIFO")
    sent = official_send(shared_broker.addr, topic, 5, message_group="order-9")
    with access_point.create_pull_consumer(consumer_id="GInteropFifoOfficial") as pc:
        per_queue = {q.queue_id: list(pc.pull(q, 0, 64)) for q in pc.queues(topic)}
    filled = [msgs for msgs in per_queue.values() if msgs]
    assert len(filled) == 1, "one message group lands in one queue"
    assert [m.message_id for m in filled[0]] == [message_id for _, message_id in sent], "in send order"
    for m, (msg, message_id) in zip(filled[0], sent, strict=True):
        assert m.sharding_key == "order-9"
        check_oms(m, msg, message_id)


@pytest.mark.timeout(60)
def test_official_simple_consumer_gets_fifo_messages_of_any_queue_at_once(
    shared_broker: BrokerHandle, producer: oms.Producer
) -> None:
    topic, group = "InteropFifo8", "GInteropFifo8"
    create_topic(shared_broker.addr, topic, "FIFO", queues=8)
    create_group(shared_broker.addr, group, orderly=True)
    with simple_consumer(shared_broker.addr, group, topic, await_s=1) as consumer:
        sent = producer.send(oms.BytesMessage(b"one of eight", topic, sharding_key="order-42"))
        polls = 0
        got: list[Any] = []
        while not got and polls < 4:
            got = consumer.receive(16, 30)
            polls += 1
        assert [m.message_id for m in got] == [sent.message_id]
        assert polls <= 2, f"{polls} long polls for one message: receives looked at one queue of eight"
        consumer.ack(got[0])
