"""``Consume/PullBatch``: stored records in one response, decodable with ``orbitmq.record``; filters, long
polling, offsets and bad input behave as for v2 PullMessage."""

from __future__ import annotations

import threading
import time

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2

from orbitmq.proto import consume_pb2, consume_pb2_grpc
from orbitmq.record import RecordFormatError, iter_records
from tests.broker.v2client import message, raw_client

OK = definition_pb2.Code.OK


def _pull(stub, topic: str, offset: int, **kw) -> consume_pb2.PullBatchResponse:
    req = consume_pb2.PullBatchRequest(group="BatchG", topic=topic, queue_id=0, offset=offset, **kw)
    return stub.PullBatch(req, timeout=30)


@pytest.mark.timeout(120)
def test_pull_batch_returns_records_as_stored(broker_factory):
    broker = broker_factory.broker(options={"defaultTopicQueueNums": "1"})
    with raw_client(broker.addr) as c, grpc.insecure_channel(broker.addr) as ch:
        sent = [message("BatchT", f"body-{i}".encode(), tag="A" if i % 2 else "B", keys=[f"k{i}"]) for i in range(300)]
        assert c.send(*sent[:150]).status.code == OK
        assert c.send(*sent[150:]).status.code == OK
        stub = consume_pb2_grpc.ConsumeStub(ch)

        first = _pull(stub, "BatchT", 0, max_messages=200)
        assert first.status.code == OK and first.count == 200 and first.next_offset == 200
        records = list(iter_records(first.records))
        assert [r.body for r in records] == [f"body-{i}".encode() for i in range(200)]
        assert [r.queue_offset for r in records] == list(range(200))
        assert records[3].properties["TAGS"] == "A" and records[3].properties["KEYS"] == "k3"
        assert records[0].topic == "BatchT" and records[0].store_timestamp > 0
        assert (first.min_offset, first.max_offset) == (0, 300)

        rest = _pull(stub, "BatchT", 200)
        assert rest.count == 100 and rest.next_offset == 300

        tagged = _pull(stub, "BatchT", 0, filter_type="TAG", filter_expression="A", max_messages=1000)
        assert [r.body for r in iter_records(tagged.records)] == [f"body-{i}".encode() for i in range(1, 300, 2)]

        small = _pull(stub, "BatchT", 0, max_bytes=1)
        assert small.count == 1  # at least one record, however small the budget

        empty = _pull(stub, "BatchT", 300)
        assert empty.status.code == definition_pb2.Code.MESSAGE_NOT_FOUND and empty.next_offset == 300

        def later() -> None:
            time.sleep(0.5)
            assert c.send(message("BatchT", b"late")).status.code == OK

        t = threading.Thread(target=later)
        t0 = time.monotonic()
        t.start()
        polled = _pull(stub, "BatchT", 300, long_polling_ms=10_000)
        t.join(timeout=10)
        assert polled.count == 1 and time.monotonic() - t0 < 8
        assert [r.body for r in iter_records(polled.records)] == [b"late"]


@pytest.mark.timeout(120)
def test_pull_batch_bad_input(broker):
    with raw_client(broker.addr) as c, grpc.insecure_channel(broker.addr) as ch:
        assert c.send(message("BatchBad")).status.code == OK
        stub = consume_pb2_grpc.ConsumeStub(ch)
        assert _pull(stub, "BatchBad", -1).status.code == definition_pb2.Code.ILLEGAL_OFFSET
        beyond = _pull(stub, "BatchBad", 99)
        assert beyond.status.code == definition_pb2.Code.ILLEGAL_OFFSET
        assert (beyond.min_offset, beyond.max_offset, beyond.next_offset) == (0, 1, 1)
        assert _pull(stub, "NoSuchBatchT", 0).status.code == definition_pb2.Code.TOPIC_NOT_FOUND
        bad_sql = _pull(stub, "BatchBad", 0, filter_type="SQL92", filter_expression="a >")
        assert bad_sql.status.code == definition_pb2.Code.ILLEGAL_FILTER_EXPRESSION
        unknown = _pull(stub, "BatchBad", 0, filter_type="XPATH", filter_expression="/a")
        assert (
            unknown.status.code == definition_pb2.Code.ILLEGAL_FILTER_EXPRESSION and "XPATH" in unknown.status.message
        )
        bad_group = consume_pb2.PullBatchRequest(group="bad group!", topic="BatchBad", queue_id=0)
        assert stub.PullBatch(bad_group, timeout=10).status.code == definition_pb2.Code.ILLEGAL_CONSUMER_GROUP
        assert _pull(stub, "BatchBad", 0).count == 1  # still serving


def test_iter_records_rejects_junk():
    with pytest.raises(RecordFormatError):
        list(iter_records(b"\x00" * 200))
    with pytest.raises(RecordFormatError):
        list(iter_records(b"short"))


def test_iter_records_decodes_what_the_store_decodes():
    """Records of several topics and hosts, interleaved: the client's decoder (which decodes a topic or host once
    per run of equal ones) gives every field the store's own decoder gives."""
    from broker.store.codec import decode, encode
    from broker.store.message import MessageExtBrokerInner

    topics, hosts = ("Orders", "主题", "Orders2"), (("10.0.0.5", 4242), ("10.0.0.6", 4242), ("10.0.0.5", 1))
    records, offset = [], 0
    for i in range(30):
        msg = MessageExtBrokerInner(
            topics[i % 3 if i % 4 else 0],
            f"body-{i}".encode() * (1 + i % 5),
            i % 4,
            {"UNIQ_KEY": f"ID{i}", **({"TAGS": "TagA", "KEYS": "k1 k2", "color": "红"} if i % 2 else {})},
            flag=i,
            sys_flag=i % 3,
            born_timestamp=1_700_000_000_000 + i,
            born_host=hosts[i % 3],
            store_host=hosts[(i // 7) % 3],
            reconsume_times=i % 2,
        )
        raw = encode(msg, i, offset, 1_700_000_001_000 + i)
        records.append(raw)
        offset += len(raw)
    fields = (
        "topic", "body", "queue_id", "queue_offset", "commitlog_offset", "properties", "flag", "sys_flag",
        "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times", "store_size",
    )  # fmt: skip
    got = list(iter_records(memoryview(b"".join(records))))
    want = [decode(raw) for raw in records]
    assert [[getattr(r, f) for f in fields] for r in got] == [[getattr(m, f) for f in fields] for m in want]
