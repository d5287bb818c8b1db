"""Receipt-handle codec: round trips for any field values; garbage is INVALID_RECEIPT_HANDLE, never a crash."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.pop.receipt import ReceiptHandle, ack_keys_for, decode, decode_for, encode_handles
from orbitmq.errors import Code, MQError

i64 = st.integers(min_value=0, max_value=2**63 - 1)


@settings(deadline=None)
@given(
    group=st.text(min_size=1, max_size=80),
    topic=st.text(min_size=1, max_size=80),
    queue_id=st.integers(min_value=0, max_value=2**31 - 1),
    offset=i64,
    cl=i64,
    seq=i64,
    pop_time=i64,
    invisible=i64,
)
def test_round_trip(group, topic, queue_id, offset, cl, seq, pop_time, invisible):
    h = ReceiptHandle(group, topic, queue_id, offset, cl, seq, pop_time, invisible)
    text = h.encode()
    assert text.isprintable() and " " not in text
    assert decode(text) == h


@settings(deadline=None)
@given(st.text(max_size=300))
def test_garbage_text_is_invalid_receipt_handle(text):
    with pytest.raises(MQError) as err:
        decode(text)
    assert err.value.code == Code.INVALID_RECEIPT_HANDLE


@settings(deadline=None)
@given(st.binary(max_size=200), st.sampled_from(["OMQ1.", "OMQ2."]))
def test_garbage_after_prefix_is_invalid_receipt_handle(raw, prefix):
    import base64

    encoded = base64.urlsafe_b64encode(raw) if prefix == "OMQ1." else base64.b64encode(raw)
    text = prefix + encoded.decode()
    try:
        h = decode(text)
    except MQError as err:
        assert err.code == Code.INVALID_RECEIPT_HANDLE
    else:
        assert h.encode().startswith("OMQ2.")


def _v1(h: ReceiptHandle) -> str:
    """A handle as brokers before version 2 wrote it (urlsafe base64 of a 49-byte header and the names)."""
    import base64
    import struct

    g, t = h.group.encode(), h.topic.encode()
    raw = struct.pack(">BiqqqqqHH", 1, *h[2:], len(g), len(t)) + g + t
    return "OMQ1." + base64.urlsafe_b64encode(raw).decode().rstrip("=")


@settings(deadline=None)
@given(group=st.text(min_size=1, max_size=40), topic=st.text(min_size=1, max_size=40), offset=i64, seq=i64)
def test_version_1_handles_still_decode(group, topic, offset, seq):
    h = ReceiptHandle(group, topic, 3, offset, 77, seq, 1_700_000_000_000, 30_000)
    assert decode(_v1(h)) == h
    assert decode_for([_v1(h)], group, topic) == [h]


@settings(deadline=None, max_examples=50)
@given(
    rows=st.lists(st.tuples(st.integers(0, 2**31 - 1), i64, i64, i64, i64, i64), min_size=1, max_size=40),
    group=st.text(min_size=1, max_size=40),
    topic=st.text(min_size=1, max_size=40),
)
def test_bulk_encode_and_decode_match_one_by_one(rows, group, topic):
    handles = [ReceiptHandle(group, topic, *row) for row in rows]
    texts = encode_handles(group, topic, rows)
    assert texts == [h.encode() for h in handles]
    assert decode_for(texts, group, topic) == handles


@settings(deadline=None, max_examples=50)
@given(
    rows=st.lists(st.tuples(st.integers(0, 2**31 - 1), i64, i64, i64, i64, i64), min_size=1, max_size=40),
    group=st.text(min_size=1, max_size=40),
    topic=st.text(min_size=1, max_size=40),
)
def test_ack_keys_are_the_queue_offset_and_seq_decode_for_finds(rows, group, topic):
    texts = encode_handles(group, topic, rows)
    assert ack_keys_for(texts, group, topic) == [
        (h.queue_id, h.queue_offset, h.seq) for h in decode_for(texts, group, topic)
    ]
    assert ack_keys_for(texts, group + "x", topic) is None


def test_ack_keys_need_every_handle_well_formed_for_the_group_and_topic():
    """One handle that ``decode_for`` would not decode to a handle of the group and topic: no keys at all (the
    caller checks one by one); and no handle outside [0, 2**63) gets through as keys."""
    good = [ReceiptHandle("g", "t", 1, i, 10 + i, 5, 1000, 2000).encode() for i in range(4)]
    other_topic = ReceiptHandle("g", "u", 1, 9, 9, 9, 9, 9).encode()
    damaged = good[1][:10] + "*" + good[1][11:]
    padded = good[2][:70] + "==" + good[2][72:]
    v1 = _v1(ReceiptHandle("g", "t", 1, 7, 17, 5, 1000, 2000))
    for bad in (other_topic, damaged, padded, "garbage", v1, ""):
        assert ack_keys_for([*good[:2], bad, *good[2:]], "g", "t") is None
    assert ack_keys_for([], "g", "t") is None
    for field in range(4):  # queue_id, queue_offset, commitlog_offset, seq
        values = [1, 2, 3, 4]
        values[field] = -1
        negative = encode_handles("g", "t", [(*values, 1000, 2000)])
        assert isinstance(decode_for(negative, "g", "t")[0], MQError)
        assert ack_keys_for(negative, "g", "t") is None
    assert ack_keys_for(good, "g", "t") == [(1, i, 5) for i in range(4)]


def test_decode_for_refuses_each_bad_handle_with_its_reason():
    good = [ReceiptHandle("g", "t", 1, i, 10 + i, 5, 1000, 2000) for i in range(4)]
    texts = [h.encode() for h in good]
    other_topic = ReceiptHandle("g", "u", 1, 9, 9, 9, 9, 9).encode()
    damaged = texts[1][:10] + "*" + texts[1][11:]  # same length and suffix, not base64
    padded = texts[2][:70] + "==" + texts[2][72:]  # padding inside the header characters
    out = decode_for([texts[0], other_topic, damaged, padded, "garbage", texts[3]], "g", "t")
    assert out[0] == good[0] and out[5] == good[3]
    assert isinstance(out[1], MQError) and "not group 'g' topic 't'" in out[1].message
    for bad in out[2:5]:
        assert isinstance(bad, MQError) and bad.code == Code.INVALID_RECEIPT_HANDLE


def test_truncated_handle_is_rejected_with_reason():
    text = ReceiptHandle("g", "t", 1, 2, 3, 4, 5, 6).encode()
    with pytest.raises(MQError, match=r"length mismatch|too short|base64"):
        decode(text[:-3])
    with pytest.raises(MQError, match="prefix"):
        decode("1 2 3 4 5 6 broker 0 0")
