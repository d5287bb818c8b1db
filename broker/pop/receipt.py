"""Receipt handles: the opaque string a consumer echoes in Ack/ChangeInvisibleDuration/ForwardToDLQ.

It names the message (group, topic, queue, offset, commitlog offset) and the delivery it came from (a sequence).
"""

from __future__ import annotations

import binascii
import struct
from functools import lru_cache
from typing import NamedTuple

from common.errors import Code, MQError

HANDLE_VERSION = 1
_PREFIX = "OMQ1."
# version, queue_id, queue_offset, commitlog_offset, seq, pop_time_ms, invisible_ms, len(group), len(topic)
_HEADER = struct.Struct(">BiqqqqqHH")
MAX_HANDLE_LENGTH = 4096
# base64url (RFC 4648 §5) through binascii, as base64.urlsafe_b64encode/decode do, minus their per-call wrapping
_TO_URLSAFE = str.maketrans("+/", "-_")
_FROM_URLSAFE = str.maketrans("-_", "+/")


class ReceiptHandle(NamedTuple):  # a tuple: built per delivered and per acked message, cheaply
    """One delivery of one message; ``seq`` changes on every redelivery and invisible-time change."""

    group: str
    topic: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    seq: int
    pop_time_ms: int
    invisible_ms: int

    def encode(self) -> str:
        return encode_handle(*self)

    @property
    def visible_at_ms(self) -> int:
        return self.pop_time_ms + self.invisible_ms


def encode_handle(
    group: str,
    topic: str,
    queue_id: int,
    queue_offset: int,
    commitlog_offset: int,
    seq: int,
    pop_time_ms: int,
    invisible_ms: int,
) -> str:
    """The text of ``ReceiptHandle(...)`` (field order of the tuple)."""
    names, glen, tlen = _names(group, topic)
    raw = _HEADER.pack(
        HANDLE_VERSION, queue_id, queue_offset, commitlog_offset, seq, pop_time_ms, invisible_ms, glen, tlen
    )
    return _PREFIX + binascii.b2a_base64(raw + names, newline=False).decode("ascii").translate(_TO_URLSAFE).rstrip("=")


@lru_cache(maxsize=1024)
def _names(group: str, topic: str) -> tuple[bytes, int, int]:
    g, t = group.encode("utf-8"), topic.encode("utf-8")
    return g + t, len(g), len(t)


def _invalid(why: str) -> MQError:
    return MQError(Code.INVALID_RECEIPT_HANDLE, f"receipt_handle is not a handle issued by this broker: {why}")


def decode(text: str) -> ReceiptHandle:
    """Parse a handle; anything malformed is INVALID_RECEIPT_HANDLE with the reason, never another error."""
    if not text:
        raise _invalid("empty")
    if len(text) > MAX_HANDLE_LENGTH:
        raise _invalid(f"longer than {MAX_HANDLE_LENGTH} characters")
    if not text.startswith(_PREFIX):
        raise _invalid(f"missing the {_PREFIX!r} prefix")
    body = text[len(_PREFIX) :]
    try:
        raw = binascii.a2b_base64(body.translate(_FROM_URLSAFE) + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError) as exc:  # ValueError: not ASCII
        raise _invalid("not base64url") from exc
    if len(raw) < _HEADER.size:
        raise _invalid("too short")
    version, queue_id, queue_offset, cl_offset, seq, pop_time, invisible, glen, tlen = _HEADER.unpack_from(raw)
    if version != HANDLE_VERSION:
        raise _invalid(f"unknown version {version}")
    if len(raw) != _HEADER.size + glen + tlen:
        raise _invalid("length mismatch")
    try:
        group = raw[_HEADER.size : _HEADER.size + glen].decode("utf-8")
        topic = raw[_HEADER.size + glen :].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid("names are not UTF-8") from exc
    if not group or not topic or queue_id < 0 or queue_offset < 0 or cl_offset < 0 or seq < 0:
        raise _invalid("field out of range")
    return ReceiptHandle(group, topic, queue_id, queue_offset, cl_offset, seq, pop_time, invisible)
