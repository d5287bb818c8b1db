"""Delay messages: parked in SCHEDULE_TOPIC_XXXX, visible in the real topic only at their delivery time,
also across a broker restart; the official Producer's delay send works."""

from __future__ import annotations

import time

import grpc
import pytest
from rocketmq import ClientConfiguration, Credentials, Message, Producer
from rocketmq.grpc_protocol import definition_pb2

from common.proto import admin_pb2, admin_pb2_grpc
from tests.broker.v2client import message, raw_client
from tests.procs import wait_until

OK = definition_pb2.Code.OK


def _delay_topic(addr: str, topic: str) -> None:
    with grpc.insecure_channel(addr) as ch:
        cfg = admin_pb2.TopicConfig(
            topic_name=topic, read_queue_nums=1, write_queue_nums=1, perm=6, message_type="DELAY"
        )
        resp = admin_pb2_grpc.AdminStub(ch).CreateOrUpdateTopic(admin_pb2.CreateOrUpdateTopicRequest(config=cfg))
        assert resp.status.code == OK


def _delayed(topic: str, body: bytes, deliver_s: int) -> definition_pb2.Message:
    m = message(topic, body)
    m.system_properties.message_type = definition_pb2.DELAY
    m.system_properties.delivery_timestamp.seconds = deliver_s
    return m


def _bodies(addr: str, topic: str) -> list[bytes]:
    with raw_client(addr) as c:
        return [m.body for m in c.pull("g", topic, 0, 0, batch=100).messages]


@pytest.mark.timeout(120)
def test_delay_message_appears_at_its_time_even_across_restart(broker):
    _delay_topic(broker.addr, "DelayT")
    now = int(time.time())
    with raw_client(broker.addr) as c:
        assert c.send(_delayed("DelayT", b"soon", now + 2)).status.code == OK
        assert c.send(_delayed("DelayT", b"later", now + 5)).status.code == OK
        assert c.send(_delayed("DelayT", b"past", now - 5)).status.code == OK  # due already: stored at once
    assert _bodies(broker.addr, "DelayT") == [b"past"]
    wait_until(lambda: _bodies(broker.addr, "DelayT") == [b"past", b"soon"], 6, what="first delay due")
    assert time.time() >= now + 2 - 0.1
    broker.restart()  # "later" is still parked: it must survive the restart
    assert _bodies(broker.addr, "DelayT") == [b"past", b"soon"]
    wait_until(lambda: _bodies(broker.addr, "DelayT") == [b"past", b"soon", b"later"], 10, what="second delay")
    assert time.time() >= now + 5 - 0.1
    with raw_client(broker.addr) as c:
        msg = c.pull("g", "DelayT", 0, 2).messages[0]
    assert msg.system_properties.message_type == definition_pb2.DELAY
    assert msg.system_properties.delivery_timestamp.seconds == now + 5
    broker.restart()  # delivered messages are not delivered again
    time.sleep(1.5)
    assert _bodies(broker.addr, "DelayT") == [b"past", b"soon", b"later"]


@pytest.mark.timeout(120)
def test_official_producer_delay_send(broker):
    _delay_topic(broker.addr, "DelayOfficialT")
    producer = Producer(ClientConfiguration(broker.addr, Credentials(), request_timeout=5), ("DelayOfficialT",))
    producer.startup()
    try:
        msg = Message()
        msg.topic, msg.body = "DelayOfficialT", b"delayed"
        msg.delivery_timestamp = int(time.time()) + 2  # the client puts this into Timestamp.seconds (§5.4)
        producer.send(msg)
    finally:
        producer.shutdown()
    assert _bodies(broker.addr, "DelayOfficialT") == []
    wait_until(lambda: _bodies(broker.addr, "DelayOfficialT") == [b"delayed"], 8, what="official delay")


@pytest.mark.timeout(120)
def test_official_producer_recall(broker):
    _delay_topic(broker.addr, "RecallT")
    producer = Producer(ClientConfiguration(broker.addr, Credentials(), request_timeout=5), ("RecallT",))
    producer.startup()
    try:
        receipts = []
        for body in (b"recalled", b"kept"):
            msg = Message()
            msg.topic, msg.body = "RecallT", body
            msg.delivery_timestamp = int(time.time()) + 2
            receipts.append(producer.send(msg))
        assert receipts[0].recall_handle
        assert producer.recall_message("RecallT", receipts[0].recall_handle) == receipts[0].message_id
        with pytest.raises(Exception, match="already delivered or recalled"):
            producer.recall_message("RecallT", receipts[0].recall_handle)
        wait_until(lambda: _bodies(broker.addr, "RecallT") == [b"kept"], 8, what="kept delay message")
        with pytest.raises(Exception, match="already delivered or recalled"):
            producer.recall_message("RecallT", receipts[1].recall_handle)  # too late: delivered
    finally:
        producer.shutdown()
    broker.restart()
    time.sleep(1.5)
    assert _bodies(broker.addr, "RecallT") == [b"kept"]  # the recall survived the restart
