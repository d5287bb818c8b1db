"""Record codec: round trips and damage detection (property-based)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.store import codec
from broker.store.codec import ScanStatus
from broker.store.message import MessageExtBrokerInner, java_string_hash
from common.record import decode_properties, encode_properties

names = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=0x2FF, exclude_characters="\x01\x02"),
    min_size=1,
    max_size=20,
)
messages = st.builds(
    MessageExtBrokerInner,
    topic=st.text(alphabet="abcXYZ%_-0123456789", min_size=1, max_size=60),
    body=st.binary(max_size=2048),
    queue_id=st.integers(0, 1023),
    properties=st.dictionaries(names, names, max_size=8),
    flag=st.integers(-(2**31), 2**31 - 1),
    sys_flag=st.integers(0, 255),
    born_timestamp=st.integers(0, 2**62),
    born_host=st.tuples(st.sampled_from(["127.0.0.1", "10.1.2.3"]), st.integers(0, 65535)),
    store_host=st.tuples(st.sampled_from(["192.168.0.1"]), st.integers(0, 65535)),
    reconsume_times=st.integers(0, 100),
    prepared_transaction_offset=st.integers(0, 2**62),
)


@given(messages, st.integers(0, 2**40), st.integers(0, 2**40), st.integers(0, 2**42))
@settings(max_examples=200, deadline=None)
def test_round_trip(msg: MessageExtBrokerInner, queue_offset: int, phys: int, store_ts: int) -> None:
    raw = codec.encode(msg, queue_offset, phys, store_ts)
    info = codec.check_record(raw, 0, len(raw))
    assert info.status is ScanStatus.OK and info.size == len(raw)
    assert (info.topic, info.queue_id, info.queue_offset, info.physical_offset) == (
        msg.topic,
        msg.queue_id,
        queue_offset,
        phys,
    )
    out = codec.decode(raw)
    assert out.body == msg.body and out.properties == msg.properties and out.topic == msg.topic
    assert (out.flag, out.sys_flag, out.born_timestamp, out.born_host, out.store_host) == (
        msg.flag,
        msg.sys_flag,
        msg.born_timestamp,
        msg.born_host,
        msg.store_host,
    )
    assert (out.reconsume_times, out.prepared_transaction_offset, out.store_timestamp) == (
        msg.reconsume_times,
        msg.prepared_transaction_offset,
        store_ts,
    )


@given(messages, st.data())
@settings(max_examples=200, deadline=None)
def test_any_flipped_byte_is_detected(msg: MessageExtBrokerInner, data: st.DataObject) -> None:
    raw = bytearray(codec.encode(msg, 1, 2, 3))
    pos = data.draw(st.integers(0, len(raw) - 1))
    raw[pos] ^= data.draw(st.integers(1, 255))
    assert codec.check_record(raw, 0, len(raw)).status is not ScanStatus.OK


@given(messages, st.data())
@settings(max_examples=100, deadline=None)
def test_torn_record_is_detected(msg: MessageExtBrokerInner, data: st.DataObject) -> None:
    raw = codec.encode(msg, 1, 2, 3)
    cut = data.draw(st.integers(1, len(raw) - 1))
    torn = raw[:cut] + bytes(len(raw) - cut)
    assert codec.check_record(torn, 0, len(torn)).status is not ScanStatus.OK


@given(st.dictionaries(names, names, max_size=10))
def test_properties_round_trip(props: dict[str, str]) -> None:
    assert decode_properties(encode_properties(props)) == props


def test_java_string_hash_matches_java() -> None:
    # Values of "".hashCode() in Java.
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert java_string_hash("中文") == 20013 * 31 + 25991


def test_oversized_properties_are_refused() -> None:
    msg = MessageExtBrokerInner("T", b"x", properties={"k": "v" * 40000})
    try:
        codec.prepare(msg)
    except codec.RecordError as exc:
        assert "32767" in str(exc)
    else:
        raise AssertionError("oversized properties were accepted")


@given(
    st.lists(messages, min_size=1, max_size=6),
    st.integers(0, 2**40),
    st.integers(0, 2**42),
    st.integers(0, 3000),
    st.integers(0, 2**40),
)
@settings(max_examples=100, deadline=None)
def test_encode_run_is_the_records_back_to_back(
    msgs: list[MessageExtBrokerInner], phys: int, store_ts: int, room: int, first_offset: int
) -> None:
    """The store's one-pass encoder writes what ``encode`` writes, stops at ``room``, numbers each queue."""
    store_host = ("192.168.0.1", 10911)
    for m in msgs:
        m.store_host = store_host
    encs = [codec.prepare(m) for m in msgs]
    batch = codec.AppendBatch(msgs, encs, store_ts, store_host, queue_max=lambda key: first_offset + key[1])
    data, end = codec.encode_run(batch, 0, phys, room)
    expected = b""
    next_offsets: dict[tuple[str, int], int] = {}
    for m, enc in zip(msgs, encs, strict=True):
        if len(expected) + enc.size > room:
            break
        key = (m.topic, m.queue_id)
        qo = next_offsets.get(key, first_offset + m.queue_id)
        next_offsets[key] = qo + 1
        expected += codec.encode(m, qo, phys + len(expected), store_ts)
    assert data == expected
    assert end == len(batch.written) == len(batch.queue_offsets)
    pos = 0
    for i in range(end):
        info = codec.check_record(data, pos, len(data))
        assert info.status is ScanStatus.OK
        assert (info.queue_offset, info.physical_offset) == (batch.queue_offsets[i], batch.written[i])
        assert batch.written[i] == phys + pos
        assert codec.decode(data, pos).body == msgs[i].body
        pos += info.size
    entries = sum(len(e) for _, e in batch.cq.values())
    assert entries == end
    for (topic, qid), (first, queue_entries) in batch.cq.items():
        assert first == first_offset + qid
        assert [p for p, _, _ in queue_entries] == [
            batch.written[i] for i in range(end) if (msgs[i].topic, msgs[i].queue_id) == (topic, qid)
        ]


def test_explicit_tags_code_wins_over_the_tag_hash() -> None:
    with_tag = MessageExtBrokerInner("T", b"x", 0, {"TAGS": "a"})
    assert codec.prepare(with_tag).tags_code == java_string_hash("a")
    with_tag.tags_code = 42
    assert codec.prepare(with_tag).tags_code == 42
    assert codec.prepare(MessageExtBrokerInner("T", b"x", 0, {}, tags_code=7)).tags_code == 7
    assert codec.prepare(MessageExtBrokerInner("T", b"x", 0)).tags_code == 0


def _reference_java_hash(s: str) -> int:
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@given(st.text(max_size=1200))
def test_java_string_hash_equals_the_character_loop(s: str) -> None:
    # Long texts cross the 512-unit chunks of the power table; non-BMP characters count as two units.
    assert java_string_hash(s) == _reference_java_hash(s)
