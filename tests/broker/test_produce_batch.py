"""``Produce/SendBatch``: a MessageBatch is stored contiguously in one queue with its properties; every bad input
is refused with its code and a message naming the field, and nothing of a refused batch is stored."""

from __future__ import annotations

import struct

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rocketmq.grpc_protocol import definition_pb2

from broker.grpc.produce import validate_batch_message
from orbitmq.errors import MQError
from orbitmq.limits import MAX_PROPERTIES_SIZE, MAX_PROPERTY_COUNT
from orbitmq.message_batch import BatchEntry, decode_message_batch, encode_message_batch, scan_message_batch
from orbitmq.message_const import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX as UNIQ
from orbitmq.proto import admin_pb2, admin_pb2_grpc, consume_pb2, consume_pb2_grpc, produce_pb2, produce_pb2_grpc
from orbitmq.record import iter_records
from orbitmq.validation import PLAIN_BATCH_PROPERTIES

Code = definition_pb2.Code


def _entry(i: int, body: bytes | None = None, **props: str) -> BatchEntry:
    return BatchEntry(i % 7, body if body is not None else f"body-{i}".encode(), {UNIQ: f"ID{i:030d}", **props})


def _send(stub, topic: str, entries: list[BatchEntry], queue_id: int = -1, count: int | None = None, **kw):
    req = produce_pb2.SendBatchRequest(
        topic=topic,
        queue_id=queue_id,
        messages=kw.pop("raw", None) or encode_message_batch(entries),
        count=len(entries) if count is None else count,
        **kw,
    )
    return stub.SendBatch(req, timeout=30)


def _stored(ch, topic: str, queue_id: int) -> list:
    stub = consume_pb2_grpc.ConsumeStub(ch)
    resp = stub.PullBatch(
        consume_pb2.PullBatchRequest(group="G", topic=topic, queue_id=queue_id, offset=0, max_messages=5000),
        timeout=30,
    )
    return list(iter_records(resp.records)) if resp.status.code == Code.OK else []


names = st.text(alphabet=st.characters(min_codepoint=48, max_codepoint=0x2FF), min_size=1, max_size=12)


@given(
    st.lists(st.tuples(st.integers(0, 2**31 - 1), st.binary(max_size=300), st.dictionaries(names, names, max_size=4)))
)
@settings(max_examples=60, deadline=None)
def test_message_batch_round_trip(items: list[tuple[int, bytes, dict[str, str]]]) -> None:
    entries = [BatchEntry(flag, body, props) for flag, body, props in items]
    if not entries:
        return
    assert decode_message_batch(encode_message_batch(entries), len(entries), 10_000) == entries


def _plain_props(uniq: str, tag: str | None, keys: str | None, oms_order: bool, user: dict[str, str]) -> dict[str, str]:
    """Properties in oms's order (user properties, tag, keys, id) or with the id first."""
    head = {k: v for k, v in (("TAGS", tag), ("KEYS", keys)) if v is not None}
    return {**user, **head, UNIQ: uniq} if oms_order else {UNIQ: uniq, **head, **user}


# user property names and values with what the checks refuse: reserved names, blanks, control characters, and
# non-ASCII (accepted by the checks, left to them by the scan)
_user_text = st.sampled_from(["", " ", "DELAY", "TAGS", "a", "b ", "x\x01", "é", "k\x7f"]) | st.text(
    alphabet="ab \x02\x1f~é", max_size=4
)
_plain = st.builds(
    _plain_props,
    st.text(alphabet="AZaz09-_ \x03|", min_size=0, max_size=6),
    st.none() | st.text(alphabet="ab|} \x01\x7f", min_size=0, max_size=4),
    st.none() | st.text(alphabet="ab| \x03\x7f\xe9", min_size=0, max_size=6),
    st.booleans(),
    st.dictionaries(_user_text, _user_text, max_size=3),
)


@given(st.lists(st.tuples(st.binary(max_size=20), _plain), min_size=1, max_size=6), st.integers(0, 3))
@settings(max_examples=300, deadline=None)
def test_plain_batch_scan_accepts_only_what_the_full_checks_accept(items, damage) -> None:
    """``scan_message_batch`` (BatchCQ's fast path) says yes only to batches the full decode and checks accept,
    with the same tags; what it refuses goes through them."""
    entries = [BatchEntry(0, body, props) for body, props in items]
    payload = encode_message_batch(entries)
    if damage == 1:
        payload = payload[:-1]
    elif damage == 2:
        payload = payload[:9] + bytes([payload[9] ^ 1]) + payload[10:]  # the first message's body CRC
    scanned = scan_message_batch(payload, len(entries), 1024, 8, PLAIN_BATCH_PROPERTIES)
    if scanned is None:
        return
    decoded = decode_message_batch(payload, len(entries), 1024)
    for i, entry in enumerate(decoded):
        validate_batch_message(entry, i, 8)
    assert [t.decode() if t is not None else None for t in scanned.tags] == [e.properties.get("TAGS") for e in decoded]
    assert [k.decode() if k is not None else None for k in scanned.keys] == [e.properties.get("KEYS") for e in decoded]
    assert [u.decode() for u in scanned.unique_keys] == [e.properties[UNIQ] for e in decoded]
    assert scanned.body_bytes == sum(len(e.body) for e in decoded)


_ID_BYTES = st.binary(max_size=140) | st.text(alphabet="AZaz09-_ \x01\x02|é", max_size=130).map(str.encode)


@given(st.binary(max_size=40) | _ID_BYTES.map(lambda raw: b"UNIQ_KEY\x01" + raw + b"\x02"))
@settings(max_examples=400, deadline=None)
def test_the_id_only_shape_is_a_match_of_the_full_pattern(block: bytes) -> None:
    """The scan tries ``id_only`` first: whatever it takes, the full pattern takes too, as the id alone."""
    only = PLAIN_BATCH_PROPERTIES.id_only.fullmatch(block)
    full = PLAIN_BATCH_PROPERTIES.full.fullmatch(block)
    if only is None:
        return
    assert full is not None
    user, tag_first, keys_first, id_first, id_second, tag_second = full.groups()
    assert (user, tag_first, keys_first, tag_second) == (None, None, None, None)
    assert only.group(1) == (id_first or id_second)


def test_plain_batch_scan_takes_user_properties_and_leaves_the_rest_to_the_checks() -> None:
    def scan(*props: dict[str, str]) -> object:
        entries = [BatchEntry(0, b"x", {**p, UNIQ: f"ID{i}"}) for i, p in enumerate(props)]
        return scan_message_batch(encode_message_batch(entries), len(entries), 1024, 100, PLAIN_BATCH_PROPERTIES)

    scanned = scan({"__idem": "q:0:1:7"}, {"a": "1", "b": "", "c d": "e f"}, {})
    assert scanned is not None and scanned.unique_keys == [b"ID0", b"ID1", b"ID2"]
    assert scan({f"k{i}": "v" for i in range(MAX_PROPERTY_COUNT)}) is not None
    for refused in (
        {f"k{i}": "v" for i in range(MAX_PROPERTY_COUNT + 1)},  # count
        {"k": "v" * MAX_PROPERTIES_SIZE},  # size
        {"DELAY": "3"},  # reserved
        {"名": "v"},  # non-ASCII: the checks decide
    ):
        assert scan(refused) is None
    # a name given twice (only a crafted payload can): the full decode refuses it, so the scan must not take it
    raw = encode_message_batch([BatchEntry(0, b"x", {"a": "1", "b": "2", UNIQ: "ID"})]).replace(b"b\x012", b"a\x012")
    assert scan_message_batch(raw, 1, 1024, 100, PLAIN_BATCH_PROPERTIES) is None
    with pytest.raises(MQError, match="repeated property 'a'"):
        decode_message_batch(raw, 1, 1024)


def test_plain_batch_scan_takes_plain_batches() -> None:
    plain = [BatchEntry(0, b"x", {UNIQ: f"ID{i}", **({"TAGS": "TagA"} if i % 2 else {})}) for i in range(5)]
    plain.append(BatchEntry(0, b"y", {"TAGS": "TagB", "KEYS": "order-1 user|7", UNIQ: "ID5"}))  # oms's order
    scanned = scan_message_batch(encode_message_batch(plain), 6, 1024, 100, PLAIN_BATCH_PROPERTIES)
    assert scanned is not None and scanned.tags == [None, b"TagA", None, b"TagA", None, b"TagB"]
    assert scanned.keys == [None] * 5 + [b"order-1 user|7"] and scanned.unique_keys[5] == b"ID5"
    assert scanned.body_bytes == 6


def test_damaged_batches_are_refused_naming_the_message() -> None:
    good = encode_message_batch([_entry(0), _entry(1)])
    cases = {
        "truncated": good[:-3],
        "magic code": good[:4] + struct.pack(">i", 7) + good[8:],
        "body CRC": good[:8] + struct.pack(">I", 1) + good[12:],
        "cannot hold": struct.pack(">i", 25) + good[4:],
    }
    for expected, raw in cases.items():
        with pytest.raises(MQError) as err:
            decode_message_batch(raw, 2, 100)
        assert err.value.code == Code.MESSAGE_CORRUPTED and expected in err.value.message
    with pytest.raises(MQError, match="count says 3"):
        decode_message_batch(good, 3, 100)
    with pytest.raises(MQError, match="more than count=1"):
        decode_message_batch(good, 1, 100)
    with pytest.raises(MQError, match="limit is 1"):
        decode_message_batch(good, 2, 1)
    props_broken = encode_message_batch([BatchEntry(0, b"x", {"a": "b"})]).replace(b"a\x01b\x02", b"ab\x02\x02")
    with pytest.raises(MQError, match="malformed"):
        decode_message_batch(props_broken, 1, 100)


@pytest.mark.timeout(120)
def test_send_batch_stores_one_contiguous_run_with_properties(broker_factory):
    broker = broker_factory.broker(options={"defaultTopicQueueNums": "2"})
    with grpc.insecure_channel(broker.addr) as ch:
        stub = produce_pb2_grpc.ProduceStub(ch)
        first = [_entry(i, TAGS="TagA", KEYS=f"k{i} other{i}", color="red") for i in range(100)]
        r1 = _send(stub, "SendBatchT", first, queue_id=1, born_timestamp_ms=1_700_000_000_000)
        assert r1.status.code == Code.OK, r1.status
        assert (r1.queue_id, r1.first_queue_offset, len(r1.commitlog_offsets)) == (1, 0, 100)
        assert list(r1.commitlog_offsets) == sorted(r1.commitlog_offsets)
        second = [_entry(100 + i) for i in range(50)]
        r2 = _send(stub, "SendBatchT", second, queue_id=1)
        assert (r2.status.code, r2.first_queue_offset) == (Code.OK, 100)

        records = _stored(ch, "SendBatchT", 1)
        assert [r.body for r in records] == [e.body for e in first + second]
        assert [r.queue_offset for r in records] == list(range(150))
        assert [r.commitlog_offset for r in records[:100]] == list(r1.commitlog_offsets)
        assert records[5].properties == {
            UNIQ: "ID" + "5".zfill(30),
            "TAGS": "TagA",
            "KEYS": "k5 other5",
            "color": "red",
        }
        assert records[5].flag == 5 and records[5].born_timestamp == 1_700_000_000_000

        # Round robin when the producer leaves the queue to the broker: both queues get batches.
        used = {_send(stub, "SendBatchRR", [_entry(i)]).queue_id for i in range(4)}
        assert used == {0, 1}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("queue_type", ["SimpleCQ", "BatchCQ"])
def test_bad_batches_get_their_code_and_store_nothing(broker_factory, queue_type):
    broker = broker_factory.broker(options={"defaultTopicQueueNums": "1", "maxMessageSize": "8192"})
    with grpc.insecure_channel(broker.addr) as ch:
        stub = produce_pb2_grpc.ProduceStub(ch)
        if queue_type == "BatchCQ":  # the fast check of plain batches must refuse exactly what the full one does
            cfg = admin_pb2.TopicConfig(
                topic_name="BadBatchT", read_queue_nums=1, write_queue_nums=1, attributes={"queue.type": queue_type}
            )
            admin = admin_pb2_grpc.AdminStub(ch)
            assert (
                admin.CreateOrUpdateTopic(admin_pb2.CreateOrUpdateTopicRequest(config=cfg), timeout=10).status.code
                == Code.OK
            )
        assert _send(stub, "BadBatchT", [_entry(0)]).status.code == Code.OK
        ok = _entry(1)
        cases = [
            ([ok, BatchEntry(0, b"", {UNIQ: "X1"})], {}, Code.MESSAGE_BODY_EMPTY, "message 1"),
            ([ok, _entry(2, b"x" * 9000)], {}, Code.MESSAGE_BODY_TOO_LARGE, "limit is 8192"),
            ([ok, BatchEntry(0, b"x", {})], {}, Code.ILLEGAL_MESSAGE_ID, "UNIQ_KEY"),
            ([ok, _entry(2, DELAY="3")], {}, Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "'DELAY' is reserved"),
            ([ok, _entry(2, TAGS="a|b")], {}, Code.ILLEGAL_MESSAGE_TAG, "contains '|'"),
            ([ok, _entry(2, KEYS="a \x03")], {}, Code.ILLEGAL_MESSAGE_KEY, "control"),
            ([ok, _entry(2, **{f"p{i}": "v" for i in range(200)})], {}, Code.MESSAGE_PROPERTIES_TOO_LARGE, "limit"),
            ([ok], {"count": 2}, Code.MESSAGE_CORRUPTED, "count says 2"),
            ([ok], {"raw": encode_message_batch([ok])[:-1]}, Code.MESSAGE_CORRUPTED, "message 0"),
            ([ok], {"queue_id": 5}, Code.BAD_REQUEST, "queue_id 5 is outside [0, 1)"),
        ]
        for entries, kw, code, text in cases:
            resp = _send(stub, "BadBatchT", entries, **kw)
            assert resp.status.code == code and text in resp.status.message, (text, resp.status)
        too_many = _send(stub, "BadBatchT", [_entry(i) for i in range(1025)])
        assert too_many.status.code == Code.MESSAGE_CORRUPTED and "limit is 1024" in too_many.status.message
        too_big = [_entry(i, b"y" * 8000) for i in range(600)]  # 4.8 MB of bodies, each under maxMessageSize
        resp = _send(stub, "BadBatchT", too_big)
        assert resp.status.code == Code.MESSAGE_BODY_TOO_LARGE and "4194304" in resp.status.message
        bad_topic = _send(stub, "bad topic!", [ok])
        assert bad_topic.status.code == Code.ILLEGAL_TOPIC and "bad topic!" in bad_topic.status.message
        # Nothing of the refused batches was stored; the broker still serves.
        assert [r.body for r in _stored(ch, "BadBatchT", 0)] == [b"body-0"]
        assert _send(stub, "BadBatchT", [ok]).status.code == Code.OK


@pytest.mark.timeout(120)
def test_unknown_read_only_and_fifo_topics_are_refused(broker_factory):
    broker = broker_factory.broker(options={"autoCreateTopicEnable": "false"})
    with grpc.insecure_channel(broker.addr) as ch:
        stub = produce_pb2_grpc.ProduceStub(ch)
        resp = _send(stub, "NoSuchTopic", [_entry(0)])
        assert resp.status.code == Code.TOPIC_NOT_FOUND and "NoSuchTopic" in resp.status.message
        admin = admin_pb2_grpc.AdminStub(ch)
        for name, perm, message_type in (("ReadOnlyT", 4, "NORMAL"), ("FifoOnlyT", 6, "FIFO")):
            cfg = admin_pb2.TopicConfig(
                topic_name=name, read_queue_nums=1, write_queue_nums=1, perm=perm, message_type=message_type
            )
            assert (
                admin.CreateOrUpdateTopic(admin_pb2.CreateOrUpdateTopicRequest(config=cfg), timeout=10).status.code
                == Code.OK
            )
        read_only = _send(stub, "ReadOnlyT", [_entry(0)])
        assert read_only.status.code == Code.FORBIDDEN and "not writeable" in read_only.status.message
        fifo = _send(stub, "FifoOnlyT", [_entry(0)])
        assert fifo.status.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE and "accepts FIFO" in fifo.status.message


@pytest.mark.timeout(120)
def test_plain_batches_with_keys_are_queryable_at_once(broker_factory):
    """A batch in oms's plain shape (tag, keys, id) takes the payload-straight path on a default topic; its keys and
    ids are indexed as the general path indexes them, readable by the next request (read-your-writes)."""
    broker = broker_factory.broker(options={"defaultTopicQueueNums": "1"})
    with grpc.insecure_channel(broker.addr) as ch:
        stub = produce_pb2_grpc.ProduceStub(ch)
        admin = admin_pb2_grpc.AdminStub(ch)
        batch = [
            BatchEntry(0, f"plain-{i}".encode(), {"TAGS": "TagP", "KEYS": f"order-{i} shared", UNIQ: f"PK{i:04d}"})
            for i in range(300)
        ]
        resp = _send(stub, "PlainKeysT", batch)
        assert resp.status.code == Code.OK and len(resp.commitlog_offsets) == 300
        by_key = admin.QueryMessageByKey(
            admin_pb2.QueryMessageByKeyRequest(topic="PlainKeysT", key="order-123"), timeout=10
        )
        assert [m.body for m in by_key.messages] == [b"plain-123"]
        by_id = admin.QueryMessageById(
            admin_pb2.QueryMessageByIdRequest(msg_id="PK0299", topic="PlainKeysT"), timeout=10
        )
        assert [m.body for m in by_id.messages] == [b"plain-299"]
        records = _stored(ch, "PlainKeysT", 0)
        assert [r.body for r in records] == [e.body for e in batch]
        assert records[7].properties == {"TAGS": "TagP", "KEYS": "order-7 shared", UNIQ: "PK0007"}
