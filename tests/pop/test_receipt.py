"""Receipt-handle codec: round trips for any field values; garbage is INVALID_RECEIPT_HANDLE, never a crash."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.pop.receipt import ReceiptHandle, decode
from common.errors import Code, MQError

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
@given(st.binary(max_size=200))
def test_garbage_after_prefix_is_invalid_receipt_handle(raw):
    import base64

    text = "OMQ1." + base64.urlsafe_b64encode(raw).decode()
    try:
        h = decode(text)
    except MQError as err:
        assert err.code == Code.INVALID_RECEIPT_HANDLE
    else:
        assert h.encode().startswith("OMQ1.")


def test_truncated_handle_is_rejected_with_reason():
    text = ReceiptHandle("g", "t", 1, 2, 3, 4, 5, 6).encode()
    with pytest.raises(MQError, match=r"length mismatch|too short|base64"):
        decode(text[:-3])
    with pytest.raises(MQError, match="prefix"):
        decode("1 2 3 4 5 6 broker 0 0")
