"""Record codec: round trips and damage detection (property-based)."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from broker.store import codec
from broker.store.codec import ScanStatus
from broker.store.consume_queue import ENTRY as CQ_ENTRY
from broker.store.message import MessageExtBrokerInner, java_string_hash
from orbitmq.record import decode_properties, encode_properties

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
    assume(torn != raw)  # the cut-off bytes were zeros already (e.g. a CRC ending in 0x00): nothing was torn
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
    st.integers(0, 2048),
    st.booleans(),
)
@settings(max_examples=150, deadline=None)
def test_encode_run_is_the_records_back_to_back(
    msgs: list[MessageExtBrokerInner],
    phys: int,
    store_ts: int,
    room: int,
    first_offset: int,
    max_body: int,
    raw_properties: bool,
) -> None:
    """The store's one-pass encoder writes what ``encode`` writes, stops at ``room``, numbers each queue, and
    leaves out (without a queue offset) every message over ``max_body``."""
    store_host = ("192.168.0.1", 10911)
    for m in msgs:
        m.store_host = store_host
    raws = [encode_properties(m.properties) if m.properties else None for m in msgs] if raw_properties else None
    batch = codec.AppendBatch(
        msgs, raws, store_ts, store_host, lambda key: first_offset + key[1], max_body=max_body, max_record=1 << 30
    )
    data, end = codec.encode_run(batch, 0, phys, room)
    expected = b""
    next_offsets: dict[tuple[str, int], int] = {}
    stop = len(msgs)
    for i, m in enumerate(msgs):
        if len(m.body) > max_body:
            assert f"maxMessageSize is {max_body}" in str(batch.refused[i])
            continue
        if len(expected) + codec.prepare(m).size > room:
            stop = i
            break
        key = (m.topic, m.queue_id)
        qo = next_offsets.get(key, first_offset + m.queue_id)
        next_offsets[key] = qo + 1
        expected += codec.encode(m, qo, phys + len(expected), store_ts)
    assert data == expected
    assert end == stop == len(batch.written) == len(batch.queue_offsets) == len(batch.sizes)
    assert set(batch.refused) == {i for i in range(end) if len(msgs[i].body) > max_body}
    pos = 0
    for i in range(end):
        if i in batch.refused:
            assert (batch.written[i], batch.queue_offsets[i]) == (-1, -1)
            continue
        info = codec.check_record(data, pos, len(data))
        assert info.status is ScanStatus.OK
        assert (info.queue_offset, info.physical_offset, info.size) == (
            batch.queue_offsets[i],
            batch.written[i],
            batch.sizes[i],
        )
        assert batch.written[i] == phys + pos
        assert codec.decode(data, pos).body == msgs[i].body
        pos += info.size
    entries = sum(len(e) for _, e in batch.cq.values())
    assert entries == end - len(batch.refused)
    for (topic, qid), (first, queue_entries) in batch.cq.items():
        assert first == first_offset + qid
        assert [CQ_ENTRY.unpack(e)[0] for e in queue_entries] == [
            batch.written[i]
            for i in range(end)
            if (msgs[i].topic, msgs[i].queue_id) == (topic, qid) and i not in batch.refused
        ]


def test_encode_run_refuses_oversized_properties_and_topics_by_name() -> None:
    big = {"k": "v" * 40_000}
    msgs = [
        MessageExtBrokerInner("T", b"a", 0),
        MessageExtBrokerInner("T", b"b", 0, big),
        MessageExtBrokerInner("x" * 300, b"c", 0),
        MessageExtBrokerInner("T", b"d", 0),
    ]
    batch = codec.AppendBatch(msgs, None, 0, ("127.0.0.1", 1), lambda key: 0, max_body=1024, max_record=1 << 20)
    data, end = codec.encode_run(batch, 0, 0, 1 << 20)
    assert end == 4 and sorted(batch.refused) == [1, 2]
    assert isinstance(batch.refused[1], codec.PropertiesTooLarge) and "the limit is" in str(batch.refused[1])
    assert "topic is 300 bytes, the limit is 255" in str(batch.refused[2])
    assert batch.queue_offsets == [0, -1, -1, 1]  # refused messages take no queue offset
    assert [codec.decode(data, p - batch.written[0]).body for p in (batch.written[0], batch.written[3])] == [b"a", b"d"]


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
