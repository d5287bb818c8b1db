"""Send-back for offset-based consumers: a message failing repeatedly walks the (short, configured) delay levels
through %RETRY%<group>, keeps its id, original topic and reconsume count, survives a restart mid-wait, and ends
in %DLQ%<group> after the group's retryMaxTimes."""

from __future__ import annotations

import time

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2

from orbitmq.proto import admin_pb2, admin_pb2_grpc, consume_pb2, consume_pb2_grpc
from orbitmq.record import RecordView, iter_records
from tests.broker.v2client import message, raw_client

OK = definition_pb2.Code.OK
# Levels 3, 4, 5 (the first retries) wait 0.6 s, 0.8 s, 1 s.
LEVELS = "200ms 400ms 600ms 800ms 1s 2s"


def _wait_one(stub, topic: str, offset: int, timeout: float = 15.0) -> tuple[RecordView, float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        req = consume_pb2.PullBatchRequest(group="RetryG", topic=topic, queue_id=0, offset=offset, long_polling_ms=500)
        resp = stub.PullBatch(req, timeout=10)
        if resp.count:
            [record] = list(iter_records(resp.records))
            return record, time.monotonic()
        time.sleep(0.05)
    raise TimeoutError(f"nothing arrived in {topic} at offset {offset}")


def _send_back(stub, topic: str, record: RecordView, **kw) -> consume_pb2.SendBackResponse:
    req = consume_pb2.SendBackRequest(group="RetryG", topic=topic, commitlog_offset=record.commitlog_offset, **kw)
    return stub.SendBack(req, timeout=10)


@pytest.mark.timeout(120)
def test_retry_ladder_restart_and_dead_letter(broker_factory):
    broker = broker_factory.broker(options={"messageDelayLevel": LEVELS, "defaultTopicQueueNums": "1"})
    with raw_client(broker.addr) as c, grpc.insecure_channel(broker.addr) as ch:
        admin = admin_pb2_grpc.AdminStub(ch)
        cfg = admin_pb2.GroupConfig(group_name="RetryG", retry_max_times=2, consume_enable=True)
        assert admin.CreateOrUpdateGroup(admin_pb2.CreateOrUpdateGroupRequest(config=cfg), timeout=10).status.code == OK
        sent = c.send(message("RetryT", b"fragile", keys=["k1"]))
        msg_id = sent.entries[0].message_id
        stub = consume_pb2_grpc.ConsumeStub(ch)
        first, _ = _wait_one(stub, "RetryT", 0)
        assert first.reconsume_times == 0

        t0 = time.monotonic()
        back = _send_back(stub, "RetryT", first)
        assert back.status.code == OK and back.destination == "%RETRY%RetryG" and back.reconsume_times == 1
        retry1, arrived = _wait_one(stub, "%RETRY%RetryG", 0)
        assert arrived - t0 >= 0.5  # level 3 = 600 ms
        assert retry1.body == b"fragile" and retry1.reconsume_times == 1
        assert retry1.properties["RETRY_TOPIC"] == "RetryT" and retry1.properties["UNIQ_KEY"] == msg_id
        assert "DELAY" not in retry1.properties and "TIMER_DELIVER_MS" not in retry1.properties

        # The second retry waits 800 ms; a restart in the middle does not lose it.
        back = _send_back(stub, "%RETRY%RetryG", retry1)
        assert back.status.code == OK and back.reconsume_times == 2
    broker.restart()
    with grpc.insecure_channel(broker.addr) as ch:
        stub = consume_pb2_grpc.ConsumeStub(ch)
        retry2, _ = _wait_one(stub, "%RETRY%RetryG", 1)
        assert retry2.reconsume_times == 2 and retry2.properties["RETRY_TOPIC"] == "RetryT"
        # retryMaxTimes = 2 reached: the next failure dead-letters it.
        back = _send_back(stub, "%RETRY%RetryG", retry2)
        assert back.status.code == OK and back.destination == "%DLQ%RetryG" and back.reconsume_times == 3
        dead, _ = _wait_one(stub, "%DLQ%RetryG", 0)
        assert dead.body == b"fragile" and dead.reconsume_times == 3
        assert dead.properties["DLQ_ORIGIN_MESSAGE_ID"] == msg_id
        # Nothing else shows up in the retry topic.
        late = stub.PullBatch(consume_pb2.PullBatchRequest(group="RetryG", topic="%RETRY%RetryG", queue_id=0, offset=2))
        assert late.count == 0


@pytest.mark.timeout(60)
def test_send_back_errors_and_dead_letter_now(broker):
    with raw_client(broker.addr) as c, grpc.insecure_channel(broker.addr) as ch:
        assert c.send(message("RetryErrT", b"x")).status.code == OK
        stub = consume_pb2_grpc.ConsumeStub(ch)
        record, _ = _wait_one(stub, "RetryErrT", 0)
        wrong_topic = _send_back(stub, "OtherT", record)
        assert wrong_topic.status.code == definition_pb2.Code.BAD_REQUEST and "RetryErrT" in wrong_topic.status.message
        missing = stub.SendBack(
            consume_pb2.SendBackRequest(group="RetryG", topic="RetryErrT", commitlog_offset=10**12), timeout=10
        )
        assert missing.status.code == definition_pb2.Code.MESSAGE_NOT_FOUND
        bad_group = stub.SendBack(consume_pb2.SendBackRequest(group="bad group", topic="RetryErrT"), timeout=10)
        assert bad_group.status.code == definition_pb2.Code.ILLEGAL_CONSUMER_GROUP
        now = _send_back(stub, "RetryErrT", record, delay_level=-1)
        assert now.status.code == OK and now.destination == "%DLQ%RetryG"


def test_bad_delay_levels_are_refused_at_start(broker_factory):
    with pytest.raises(RuntimeError, match="messageDelayLevel"):
        broker_factory.broker(options={"messageDelayLevel": "1s 5x"})
