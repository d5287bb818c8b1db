"""A BatchCQ topic (``queue.type=BatchCQ``): each SendBatch is stored as one inner-batch record, and every consumer
sees its messages one by one: PullBatch, v2 PullMessage, ReceiveBatch + AckBatch, the official SimpleConsumer,
SendBack, across a SIGKILL restart."""

from __future__ import annotations

import signal
import time

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2

from orbitmq.message_batch import BatchEntry, encode_message_batch
from orbitmq.message_const import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX as UNIQ
from orbitmq.proto import (
    admin_pb2,
    admin_pb2_grpc,
    consume_pb2,
    consume_pb2_grpc,
    pop_pb2,
    pop_pb2_grpc,
    produce_pb2,
    produce_pb2_grpc,
)
from orbitmq.record import iter_records
from tests.broker.v2client import METADATA, raw_client
from tests.pop.client_helpers import receive_until, simple_consumer

Code = definition_pb2.Code
T = "InnerBatchT"


def _entries(first: int, n: int) -> list[BatchEntry]:
    return [
        BatchEntry(i % 5, f"msg-{i:04d}".encode(), {UNIQ: f"ID{i:030d}", "TAGS": "ab"[i % 2]})
        for i in range(first, first + n)
    ]


def _create_topic(ch: grpc.Channel, topic: str, queue_type: str = "BatchCQ") -> None:
    config = admin_pb2.TopicConfig(
        topic_name=topic, read_queue_nums=1, write_queue_nums=1, perm=6, attributes={"queue.type": queue_type}
    )
    resp = admin_pb2_grpc.AdminStub(ch).CreateOrUpdateTopic(
        admin_pb2.CreateOrUpdateTopicRequest(config=config), timeout=10
    )
    assert resp.status.code == Code.OK, resp.status.message


def _send(ch: grpc.Channel, entries: list[BatchEntry]) -> produce_pb2.SendBatchResponse:
    req = produce_pb2.SendBatchRequest(topic=T, queue_id=0, messages=encode_message_batch(entries), count=len(entries))
    resp = produce_pb2_grpc.ProduceStub(ch).SendBatch(req, timeout=30)
    assert resp.status.code == Code.OK, resp.status.message
    return resp


def _pull(ch: grpc.Channel, offset: int, max_messages: int = 1000) -> consume_pb2.PullBatchResponse:
    req = consume_pb2.PullBatchRequest(group="G", topic=T, queue_id=0, offset=offset, max_messages=max_messages)
    return consume_pb2_grpc.ConsumeStub(ch).PullBatch(req, timeout=30)


def _fill(ch: grpc.Channel) -> list[BatchEntry]:
    sent: list[BatchEntry] = []
    for n, first in ((5, 0), (1, 100), (40, 200)):
        es = _entries(first, n)
        resp = _send(ch, es)
        assert resp.first_queue_offset == len(sent)
        assert len(resp.commitlog_offsets) == n and len(set(resp.commitlog_offsets)) == 1  # one record
        sent += es
    return sent


@pytest.mark.timeout(180)
def test_batch_topic_serves_messages_one_by_one(broker_factory) -> None:
    broker = broker_factory.broker(options={"flushDiskType": "SYNC_FLUSH"})
    with grpc.insecure_channel(broker.addr) as ch:
        _create_topic(ch, T)
        sent = _fill(ch)
        whole = _pull(ch, 0)
        assert whole.status.code == Code.OK and whole.count == 46 and whole.next_offset == 46
        records = list(iter_records(whole.records))
        assert [(r.flag, r.body, r.properties[UNIQ], r.queue_offset) for r in records] == [
            (e.flag, e.body, e.properties[UNIQ], i) for i, e in enumerate(sent)
        ]
        mid = _pull(ch, 3, max_messages=4)  # starts inside the first batch, ends inside the third
        assert [r.body for r in iter_records(mid.records)] == [e.body for e in sent[3:7]] and mid.next_offset == 7
        tagged = consume_pb2.PullBatchRequest(
            group="G", topic=T, queue_id=0, offset=0, max_messages=100, filter_type="TAG", filter_expression="b"
        )
        only_b = consume_pb2_grpc.ConsumeStub(ch).PullBatch(tagged, timeout=30)
        assert [r.body for r in iter_records(only_b.records)] == [e.body for e in sent if e.properties["TAGS"] == "b"]

    with raw_client(broker.addr) as c:  # v2 PullMessage, as the official client's PullConsumer speaks it
        got = c.pull("G", T, 0, 4, batch=10)
        assert [m.body for m in got.messages] == [e.body for e in sent[4:14]]
        assert [m.system_properties.message_id for m in got.messages] == [e.properties[UNIQ] for e in sent[4:14]]
        assert [m.system_properties.queue_offset for m in got.messages] == list(range(4, 14))

    broker.restart(signal.SIGKILL)  # SYNC_FLUSH: acknowledged batches survive a kill
    with grpc.insecure_channel(broker.addr) as ch:
        assert [r.body for r in iter_records(_pull(ch, 0).records)] == [e.body for e in sent]
        assert _send(ch, _entries(500, 3)).first_queue_offset == 46


@pytest.mark.timeout(180)
def test_receive_ack_and_redelivery_inside_batches(broker_factory) -> None:
    broker = broker_factory.broker(options={"minInvisibleTimeMillsForRecv": "100"})
    with grpc.insecure_channel(broker.addr) as ch:
        _create_topic(ch, T)
        sent = _fill(ch)
        stub = pop_pb2_grpc.PopStub(ch)
        req = pop_pb2.ReceiveBatchRequest(group="PopG", topic=T, queue_id=-1, batch_size=20, invisible_ms=2_000)
        first = stub.ReceiveBatch(req, metadata=METADATA, timeout=30)
        assert first.status.code == Code.OK and first.count == 20
        records = list(iter_records(first.records))
        assert [r.body for r in records] == [e.body for e in sent[:20]]
        # ack every other one; the rest come back after the invisible time with attempt 2
        acks = pop_pb2.AckBatchRequest(group="PopG", topic=T, receipt_handles=first.receipt_handles[::2])
        assert stub.AckBatch(acks, metadata=METADATA, timeout=10).status.code == Code.OK
        rest = stub.ReceiveBatch(
            pop_pb2.ReceiveBatchRequest(group="PopG", topic=T, queue_id=-1, batch_size=100, invisible_ms=60_000),
            metadata=METADATA,
            timeout=30,
        )
        assert [r.body for r in iter_records(rest.records)] == [e.body for e in sent[20:]]
        deadline = time.monotonic() + 30
        back: list[bytes] = []
        attempts: list[int] = []
        while len(back) < 10 and time.monotonic() < deadline:
            again = stub.ReceiveBatch(
                pop_pb2.ReceiveBatchRequest(
                    group="PopG", topic=T, queue_id=-1, batch_size=100, invisible_ms=60_000, long_polling_ms=1_000
                ),
                metadata=METADATA,
                timeout=30,
            )
            back += [r.body for r in iter_records(again.records)]
            attempts += list(again.delivery_attempts)
        assert sorted(back) == sorted(e.body for e in sent[1:20:2]) and set(attempts) == {2}

        # SendBack names the message of the batch by its queue offset; without it the broker cannot tell
        consume = consume_pb2_grpc.ConsumeStub(ch)
        r7 = records[7]
        back7 = consume.SendBack(
            consume_pb2.SendBackRequest(
                group="PullG", topic=T, commitlog_offset=r7.commitlog_offset, queue_offset=r7.queue_offset
            ),
            timeout=10,
        )
        assert back7.status.code == Code.OK and back7.destination == "%RETRY%PullG"
        vague = consume.SendBack(
            consume_pb2.SendBackRequest(group="PullG", topic=T, commitlog_offset=r7.commitlog_offset), timeout=10
        )
        assert vague.status.code == Code.MESSAGE_NOT_FOUND and "queue_offset" in vague.status.message


@pytest.mark.timeout(180)
def test_official_simple_consumer_reads_a_batch_topic(broker_factory) -> None:
    broker = broker_factory.broker()
    with grpc.insecure_channel(broker.addr) as ch:
        _create_topic(ch, T)
        sent = _fill(ch)
    with simple_consumer(broker.addr, "SimpleG", T) as consumer:
        got = receive_until(consumer, len(sent), invisible_s=30, timeout=60, batch=32)
        assert sorted(m.body for m in got) == sorted(e.body for e in sent)
        assert {m.message_id for m in got} == {e.properties[UNIQ] for e in sent}
        for m in got:
            consumer.ack(m)


def test_simple_topic_keeps_a_record_per_message(broker_factory) -> None:
    broker = broker_factory.broker()
    with grpc.insecure_channel(broker.addr) as ch:
        _create_topic(ch, T, "SimpleCQ")
        resp = _send(ch, _entries(0, 4))
        assert len(set(resp.commitlog_offsets)) == 4
