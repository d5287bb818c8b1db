"""Delay messages: parked in SCHEDULE_TOPIC_XXXX, visible in the real topic only at their delivery time,
also across a broker restart; the official Producer's delay send works."""

from __future__ import annotations

import time

import grpc
import pytest
from rocketmq import ClientConfiguration, Credentials, Message, Producer
from rocketmq.grpc_protocol import definition_pb2

from orbitmq.proto import admin_pb2, admin_pb2_grpc
from tests.broker.v2client import message, raw_client
from tests.waiting import wait_until

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
        # 8 s: room for a restart on a loaded machine before it is due
        assert c.send(_delayed("DelayT", b"later", now + 8)).status.code == OK
        assert c.send(_delayed("DelayT", b"past", now - 5)).status.code == OK  # due already: stored at once
    assert _bodies(broker.addr, "DelayT") == [b"past"]
    wait_until(lambda: _bodies(broker.addr, "DelayT") == [b"past", b"soon"], 6, what="first delay due")
    assert time.time() >= now + 2 - 0.1
    broker.restart()  # "later" is still parked: it must survive the restart
    after_restart = _bodies(broker.addr, "DelayT")
    # "later" is there only if the restart took until its time (never earlier)
    assert after_restart == [b"past", b"soon"] or (after_restart[2:] == [b"later"] and time.time() >= now + 8 - 0.1)
    wait_until(lambda: _bodies(broker.addr, "DelayT") == [b"past", b"soon", b"later"], 14, what="second delay")
    assert time.time() >= now + 8 - 0.1
    with raw_client(broker.addr) as c:
        msg = c.pull("g", "DelayT", 0, 2).messages[0]
    assert msg.system_properties.message_type == definition_pb2.DELAY
    assert msg.system_properties.delivery_timestamp.seconds == now + 8
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


@pytest.mark.timeout(120)
def test_producer_delay_levels_use_the_brokers_ladder(broker_factory):
    """A level set by the oms producer waits this broker's ``messageDelayLevel`` (not RocketMQ's default 5 s for
    level 2), is parked in SCHEDULE_TOPIC_XXXX queue level-1, caps at the last level and survives a restart."""
    import oms

    b = broker_factory.broker(options={"messageDelayLevel": "1s 3s 4s"})
    _delay_topic(b.addr, "LevelT")
    with oms.get_messaging_access_point(f"oms:rocketmq://{b.addr}/") as ap, ap.create_producer() as producer:
        t0 = time.time()
        producer.send(oms.BytesMessage(b"level-1", "LevelT", delay_level=1))
        producer.send(oms.BytesMessage(b"level-2", "LevelT", delay_level=2))
        producer.send(oms.BytesMessage(b"level-9", "LevelT", delay_level=9))  # above the ladder: its last level (4 s)
    with raw_client(b.addr) as c:  # a malformed level from any v2 client is refused, naming property and range
        refused = c.send(message("LevelT", b"bad", props={"rmq.delay.time.level": "soon"})).status
    assert refused.code == definition_pb2.Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    assert "rmq.delay.time.level='soon'" in refused.message and "1..3" in refused.message
    with grpc.insecure_channel(b.addr) as ch:
        admin = admin_pb2_grpc.AdminStub(ch)
        parked = {}
        for q in range(3):
            req = admin_pb2.QueryMessageByOffsetRequest(topic="SCHEDULE_TOPIC_XXXX", queue_id=q, offset=0)
            resp = admin.QueryMessageByOffset(req, timeout=10)
            assert resp.status.code == OK, resp.status
            parked[q] = [v.body for v in resp.messages]
    assert parked == {0: [b"level-1"], 1: [b"level-2"], 2: [b"level-9"]}
    wait_until(lambda: _bodies(b.addr, "LevelT") == [b"level-1"], 5, what="level 1 (1 s)")
    assert time.time() - t0 >= 0.9
    b.restart()  # level 2 (3 s) and the capped one (4 s) are still parked
    wait_until(lambda: _bodies(b.addr, "LevelT") == [b"level-1", b"level-2", b"level-9"], 10, what="levels 2, 3")
    assert time.time() - t0 >= 3.9  # the capped one waited the broker's last level (4 s); by RocketMQ's default
    # ladder level 9 would wait 5 minutes, and the parked queues above already show this broker's level numbers
    with raw_client(b.addr) as c:
        delivered = c.pull("g", "LevelT", 0, 0, batch=10).messages
    assert all("rmq.delay.time.level" not in m.user_properties for m in delivered)
