"""``Pop/ReceiveBatch``: receive/ack with the popped records in one answer; handles ack with v2 AckMessage, the
invisible time, redelivery with attempt + 1, filters, long polling and bad input behave as for v2 ReceiveMessage."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from orbitmq.message_const import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX as UNIQ
from orbitmq.proto import pop_pb2, pop_pb2_grpc
from orbitmq.record import iter_records
from tests.broker.v2client import METADATA, message, raw_client

Code = definition_pb2.Code


def _receive(stub, topic: str, group: str = "PopBatchG", **kw) -> pop_pb2.ReceiveBatchResponse:
    kw.setdefault("invisible_ms", 30_000)
    req = pop_pb2.ReceiveBatchRequest(group=group, topic=topic, queue_id=-1, **kw)
    return stub.ReceiveBatch(req, metadata=METADATA, timeout=30)


def _ack(ch, topic: str, resp: pop_pb2.ReceiveBatchResponse, group: str = "PopBatchG", twice: bool = False):
    records = list(iter_records(resp.records))
    entries = [
        service_pb2.AckMessageEntry(message_id=r.properties[UNIQ], receipt_handle=h)
        for r, h in zip(records, resp.receipt_handles, strict=True)
    ]
    if twice:
        entries.append(entries[0])
    req = service_pb2.AckMessageRequest(
        group=definition_pb2.Resource(name=group), topic=definition_pb2.Resource(name=topic), entries=entries
    )
    return service_pb2_grpc.MessagingServiceStub(ch).AckMessage(req, metadata=METADATA, timeout=10)


@pytest.mark.timeout(120)
def test_receive_batch_ack_and_redelivery(broker_factory):
    broker = broker_factory.broker(options={"defaultTopicQueueNums": "2"})
    with raw_client(broker.addr) as c, grpc.insecure_channel(broker.addr) as ch:
        sent = [message("PopBatchT", f"m{i}".encode(), tag="A" if i % 2 else "B") for i in range(40)]
        assert c.send(*sent).status.code == Code.OK
        stub = pop_pb2_grpc.PopStub(ch)

        first = _receive(stub, "PopBatchT", batch_size=32)
        assert first.status.code == Code.OK and first.count == 32 == len(first.receipt_handles)
        assert list(first.delivery_attempts) == [1] * 32 and first.invisible_ms == 30_000
        bodies = [r.body for r in iter_records(first.records)]
        rest = _receive(stub, "PopBatchT", batch_size=32)
        bodies += [r.body for r in iter_records(rest.records)]
        assert sorted(bodies) == sorted(m.body for m in sent)  # each once, none twice while invisible
        assert _receive(stub, "PopBatchT").status.code == Code.MESSAGE_NOT_FOUND

        acked = _ack(ch, "PopBatchT", first, twice=True)
        codes = [e.status.code for e in acked.entries]
        assert codes[:32] == [Code.OK] * 32 and codes[32] == Code.INVALID_RECEIPT_HANDLE  # the duplicate
        assert "twice" in acked.entries[32].status.message

        # ``rest`` is not acked: nacked with ChangeInvisibleDuration (as the official client's PushConsumer does), its
        # messages come back with attempt 2 and fresh handles.
        v2 = service_pb2_grpc.MessagingServiceStub(ch)
        for r, h in zip(iter_records(rest.records), rest.receipt_handles, strict=True):
            nack = service_pb2.ChangeInvisibleDurationRequest(
                group=definition_pb2.Resource(name="PopBatchG"),
                topic=definition_pb2.Resource(name="PopBatchT"),
                receipt_handle=h,
                message_id=r.properties[UNIQ],
            )
            nack.invisible_duration.FromMilliseconds(200)
            assert v2.ChangeInvisibleDuration(nack, metadata=METADATA, timeout=10).status.code == Code.OK
        time.sleep(0.5)
        again = _receive(stub, "PopBatchT", batch_size=32)
        assert again.status.code == Code.OK and again.count == rest.count and set(again.delivery_attempts) == {2}
        assert _ack(ch, "PopBatchT", again).status.code == Code.OK
        assert _receive(stub, "PopBatchT").status.code == Code.MESSAGE_NOT_FOUND

        tagged = _receive(stub, "PopBatchT", group="PopBatchTagG", filter_type="TAG", filter_expression="A")
        assert {r.properties["TAGS"] for r in iter_records(tagged.records)} == {"A"}


@pytest.mark.timeout(120)
def test_receive_batch_long_polls_and_refuses_bad_input(broker_factory):
    broker = broker_factory.broker(options={"defaultTopicQueueNums": "1"})
    with raw_client(broker.addr) as c, grpc.insecure_channel(broker.addr) as ch:
        assert c.send(message("PopWaitT", b"first")).status.code == Code.OK
        stub = pop_pb2_grpc.PopStub(ch)
        assert _ack(ch, "PopWaitT", _receive(stub, "PopWaitT")).status.code == Code.OK

        def later() -> None:
            time.sleep(0.5)
            c.send(message("PopWaitT", b"late"))

        t = threading.Thread(target=later)
        t0 = time.monotonic()
        t.start()
        got = _receive(stub, "PopWaitT", long_polling_ms=10_000)
        t.join(10)
        assert got.status.code == Code.OK and [r.body for r in iter_records(got.records)] == [b"late"]
        assert time.monotonic() - t0 < 8  # woken by the arrival, not by the polling time

        bad = [
            ({"topic": "NoSuchPopT"}, Code.TOPIC_NOT_FOUND, "NoSuchPopT"),
            ({"topic": "PopWaitT", "invisible_ms": 10}, Code.ILLEGAL_INVISIBLE_TIME, "invisible_duration 10 ms"),
            ({"topic": "PopWaitT", "invisible_ms": -1}, Code.BAD_REQUEST, "invisible_ms (-1)"),
            ({"topic": "PopWaitT", "batch_size": -3}, Code.BAD_REQUEST, "batch_size -3"),
            (
                {"topic": "PopWaitT", "filter_type": "SQL92", "filter_expression": "a >"},
                Code.ILLEGAL_FILTER_EXPRESSION,
                "",
            ),
            ({"topic": "PopWaitT", "group": "bad group!"}, Code.ILLEGAL_CONSUMER_GROUP, "bad group!"),
        ]
        for kw, code, text in bad:
            topic = kw.pop("topic")
            resp = _receive(stub, topic, **kw)
            assert resp.status.code == code and text in resp.status.message, (kw, resp.status)
        assert _receive(stub, "PopWaitT").status.code == Code.MESSAGE_NOT_FOUND  # still serving, nothing lost


@pytest.mark.timeout(120)
def test_batch_caps_come_from_the_broker_config(broker_factory):
    """``maxReceiveBatchSize`` caps ReceiveBatch, ``maxPopBatchSize`` caps v2 ReceiveMessage and is the default size:
    pop keys reach the pop service from the broker's config like every other key."""
    options = {"defaultTopicQueueNums": "1", "maxPopBatchSize": "5", "maxReceiveBatchSize": "60"}
    broker = broker_factory.broker(options=options)
    with raw_client(broker.addr) as c, grpc.insecure_channel(broker.addr) as ch:
        for k in range(2):
            sent = [message("PopCapT", f"m{k}-{i}".encode()) for i in range(50)]
            assert c.send(*sent).status.code == Code.OK
        stub = pop_pb2_grpc.PopStub(ch)
        big = _receive(stub, "PopCapT", batch_size=100)
        assert big.status.code == Code.OK and big.count == 60 == len(list(iter_records(big.records)))
        assert _receive(stub, "PopCapT").count == 5  # batch_size 0: maxPopBatchSize
        req = service_pb2.ReceiveMessageRequest(
            group=definition_pb2.Resource(name="PopBatchG"),
            message_queue=definition_pb2.MessageQueue(topic=definition_pb2.Resource(name="PopCapT"), id=-1),
            batch_size=32,
        )
        req.invisible_duration.FromMilliseconds(30_000)
        req.long_polling_timeout.FromMilliseconds(0)
        v2 = service_pb2_grpc.MessagingServiceStub(ch)
        got = [r for r in v2.ReceiveMessage(req, metadata=METADATA, timeout=10) if r.WhichOneof("content") == "message"]
        assert len(got) == 5


@pytest.mark.timeout(120)
def test_ack_batch_acks_handles_and_names_the_ones_it_could_not(broker_factory):
    broker = broker_factory.broker(options={"defaultTopicQueueNums": "1", "minInvisibleTimeMillsForRecv": "100"})
    with raw_client(broker.addr) as c, grpc.insecure_channel(broker.addr) as ch:
        assert c.send(*[message("PopAckT", f"a{i}".encode()) for i in range(10)]).status.code == Code.OK
        stub = pop_pb2_grpc.PopStub(ch)
        got = _receive(stub, "PopAckT", batch_size=10, invisible_ms=500)
        handles = list(got.receipt_handles)
        assert got.count == 10

        def ack(hs: list[str], group: str = "PopBatchG") -> pop_pb2.AckBatchResponse:
            req = pop_pb2.AckBatchRequest(group=group, topic="PopAckT", receipt_handles=hs)
            return stub.AckBatch(req, metadata=METADATA, timeout=10)

        mixed = ack([*handles[:6], "OMQ1.garbage", handles[0]])
        assert mixed.status.code == Code.MULTIPLE_RESULTS and "2 of 8" in mixed.status.message
        assert [(f.index, f.status.code) for f in mixed.failures] == [
            (6, Code.INVALID_RECEIPT_HANDLE),
            (7, Code.INVALID_RECEIPT_HANDLE),
        ]
        assert "twice" in mixed.failures[1].status.message
        again = ack(handles[:6])  # already acked: every one refused alike
        assert again.status.code == Code.INVALID_RECEIPT_HANDLE and len(again.failures) == 6
        other_group = ack(handles[6:], group="OtherPopG")
        assert other_group.status.code == Code.INVALID_RECEIPT_HANDLE
        assert ack([]).status.code == Code.BAD_REQUEST
        assert "receipt_handles" in ack([]).status.message
        time.sleep(0.8)  # past the invisible time: only the 4 never acked come back
        back = _receive(stub, "PopAckT", batch_size=10)
        assert sorted(r.body for r in iter_records(back.records)) == [b"a6", b"a7", b"a8", b"a9"]
        assert set(back.delivery_attempts) == {2}
        assert ack(list(back.receipt_handles)).status.code == Code.OK
        assert _receive(stub, "PopAckT").status.code == Code.MESSAGE_NOT_FOUND
