"""Receipt handles: the opaque string a consumer echoes in Ack/ChangeInvisibleDuration/ForwardToDLQ.

It names the message (group, topic, queue, offset, commitlog offset) and the delivery it came from (a sequence).
Text: ``OMQ2.`` + base64 of a 51-byte header + base64 of the group and topic names.
"""

from __future__ import annotations

import binascii
import re
import struct
from collections.abc import Iterable, Sequence
from functools import lru_cache
from itertools import repeat
from operator import itemgetter
from typing import NamedTuple

from orbitmq.errors import Code, MQError

HANDLE_VERSION = 2
_PREFIX = "OMQ2."
# version, queue_id, queue_offset, commitlog_offset, seq, pop_time_ms, invisible_ms, len(group), len(topic), 2 pad
# bytes: 51 bytes, a multiple of 3, so the header is exactly 68 base64 characters and the base64 of the names
# that follow is the same for every handle of a group and topic (cached on encode, compared whole on ack).
_HEADER = struct.Struct(">BiqqqqqHHxx")
_HEADER_CHARS = _HEADER.size // 3 * 4
_HEADER_TEXT = re.compile(f".{{{_HEADER_CHARS}}}")  # one header's base64 characters
MAX_HANDLE_LENGTH = 4096
# Version 1 (before 2026-11-23): urlsafe base64 of a 49-byte header and the names. Still decoded, so that
# handles held by consumers across a broker upgrade can be acked.
_V1_PREFIX = "OMQ1."
_V1_HEADER = struct.Struct(">BiqqqqqHH")
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
    return _PREFIX + binascii.b2a_base64(raw, newline=False).decode("ascii") + names


def encode_handles(group: str, topic: str, rows: Sequence[tuple[int, int, int, int, int, int]]) -> list[str]:
    """The handles of one pop's deliveries: ``rows`` of (queue_id, queue_offset, commitlog_offset, seq, pop_time_ms,
    invisible_ms), all for ``group`` and ``topic`` (what ``encode_handle`` gives each)."""
    if not rows:
        return []
    queue_ids, offsets, commitlog_offsets, seqs, pop_times, invisibles = zip(*rows, strict=True)
    return encode_handle_columns(group, topic, queue_ids, offsets, commitlog_offsets, seqs, pop_times, invisibles)


def encode_handle_columns(
    group: str,
    topic: str,
    queue_ids: Iterable[int],
    queue_offsets: Iterable[int],
    commitlog_offsets: Iterable[int],
    seqs: Iterable[int],
    pop_times_ms: Iterable[int],
    invisibles_ms: Iterable[int],
) -> list[str]:
    """``encode_handles`` of columns (one per field, as long as each other): the headers packed by one ``map``, one
    base64 call for all, the texts cut and framed by a regex and a join (no Python call per handle)."""
    names, glen, tlen = _names(group, topic)
    raw = b"".join(
        map(
            _HEADER.pack,
            repeat(HANDLE_VERSION),
            queue_ids,
            queue_offsets,
            commitlog_offsets,
            seqs,
            pop_times_ms,
            invisibles_ms,
            repeat(glen),
            repeat(tlen),
        )
    )
    if not raw:
        return []
    chars = binascii.b2a_base64(raw, newline=False).decode("ascii")
    # base64 never yields "\0": it can split what names + "\0" + prefix joined, one header's characters each.
    return (_PREFIX + (names + "\0" + _PREFIX).join(_HEADER_TEXT.findall(chars)) + names).split("\0")


@lru_cache(maxsize=1024)
def _names(group: str, topic: str) -> tuple[str, int, int]:
    """The base64 of the names part of a handle, and the names' lengths in bytes."""
    g, t = group.encode("utf-8"), topic.encode("utf-8")
    return binascii.b2a_base64(g + t, newline=False).decode("ascii"), len(g), len(t)


def _invalid(why: str) -> MQError:
    return MQError(Code.INVALID_RECEIPT_HANDLE, f"receipt_handle is not a handle issued by this broker: {why}")


def check_scope(handle: ReceiptHandle, group: str, topic: str) -> None:
    """A handle is only valid for the group and topic it was issued for."""
    if handle.group != group or handle.topic != topic:
        raise MQError(
            Code.INVALID_RECEIPT_HANDLE,
            f"receipt handle was issued for group {handle.group!r} topic {handle.topic!r}, "
            f"not group {group!r} topic {topic!r}",
        )


def decode(text: str) -> ReceiptHandle:
    """Parse a handle; anything malformed is INVALID_RECEIPT_HANDLE with the reason, never another error."""
    if not text:
        raise _invalid("empty")
    if len(text) > MAX_HANDLE_LENGTH:
        raise _invalid(f"longer than {MAX_HANDLE_LENGTH} characters")
    if text.startswith(_PREFIX):
        body, header, version_wanted = text[len(_PREFIX) :], _HEADER, HANDLE_VERSION
    elif text.startswith(_V1_PREFIX):
        body, header, version_wanted = text[len(_V1_PREFIX) :].translate(_FROM_URLSAFE), _V1_HEADER, 1
        body += "=" * (-len(body) % 4)
    else:
        raise _invalid(f"missing the {_PREFIX!r} prefix")
    try:
        raw = binascii.a2b_base64(body, strict_mode=True)
    except (binascii.Error, ValueError) as exc:  # ValueError: not ASCII
        raise _invalid("not base64") from exc
    if len(raw) < header.size:
        raise _invalid("too short")
    version, queue_id, queue_offset, cl_offset, seq, pop_time, invisible, glen, tlen = header.unpack_from(raw)
    if version != version_wanted:
        raise _invalid(f"unknown version {version}")
    if len(raw) != header.size + glen + tlen:
        raise _invalid("length mismatch")
    try:
        group = raw[header.size : header.size + glen].decode("utf-8")
        topic = raw[header.size + glen :].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _invalid("names are not UTF-8") from exc
    if not group or not topic or queue_id < 0 or queue_offset < 0 or cl_offset < 0 or seq < 0:
        raise _invalid("field out of range")
    return ReceiptHandle(group, topic, queue_id, queue_offset, cl_offset, seq, pop_time, invisible)


def decode_for(texts: Sequence[str], group: str, topic: str) -> list[ReceiptHandle | MQError]:
    """``decode`` + ``check_scope`` of each handle of an ack for ``group`` and ``topic``, in order: the handle, or
    why it is refused. The handles issued for them (all of them, normally) are decoded with one base64 call."""
    names, glen, tlen = _names(group, topic)
    head = len(_PREFIX)
    tail = head + _HEADER_CHARS
    size = tail + len(names)
    out: list[ReceiptHandle | MQError] = []
    chosen: list[int] = []  # issued for this group and topic by their look; the others take the slow path
    for i, text in enumerate(texts):
        if len(text) == size and text.startswith(_PREFIX) and text.endswith(names):
            chosen.append(i)
            out.append(_PLACEHOLDER)
        else:
            out.append(_slow(text, group, topic))
    if not chosen:
        return out
    try:
        raw = binascii.a2b_base64("".join([texts[i][head:tail] for i in chosen]), strict_mode=True)
    except (binascii.Error, ValueError):  # one of them is damaged: find which, one by one
        raw = b""
    if len(raw) != _HEADER.size * len(chosen):  # (padding inside one of them shortens the rest)
        for i in chosen:
            out[i] = _slow(texts[i], group, topic)
        return out
    for i, fields in zip(chosen, _HEADER.iter_unpack(raw), strict=True):
        version, queue_id, queue_offset, cl_offset, seq, pop_time, invisible, g, t = fields
        if version != HANDLE_VERSION or g != glen or t != tlen or min(queue_id, queue_offset, cl_offset, seq) < 0:
            out[i] = _slow(texts[i], group, topic)
        else:
            out[i] = ReceiptHandle(group, topic, queue_id, queue_offset, cl_offset, seq, pop_time, invisible)
    return out


_PLACEHOLDER = _invalid("not decoded")
# What an ack needs of a version 2 header (queue_id, queue_offset, seq), and what every header of one group and
# topic shares (version, len(group), len(topic)); both skip the rest of the 51 bytes.
_ACK_FIELDS = struct.Struct(">xiq8xq22x")
_SHARED_FIELDS = struct.Struct(">B44xHH2x")
# The first byte of queue_id, queue_offset, commitlog_offset and seq: big-endian, so a negative one has bit 7 set.
_SIGN_BYTES = (1, 5, 13, 21)


def ack_keys_for(texts: Sequence[str], group: str, topic: str) -> list[tuple[int, int, int]] | None:
    """(queue_id, queue_offset, seq) of each handle, in order, when every one is a well-formed version 2 handle
    issued for ``group`` and ``topic`` (what an ack normally carries); None when any is not, and the caller then
    takes ``decode_for`` to learn which and why. Accepts exactly what ``decode_for`` decodes to a handle of that
    group and topic, checked column by column in C (no object per handle)."""
    names, glen, tlen = _names(group, topic)
    head = len(_PREFIX)
    tail = head + _HEADER_CHARS
    n = len(texts)
    if (
        not n
        or set(map(len, texts)) != {tail + len(names)}
        or not all(map(str.startswith, texts, repeat(_PREFIX)))
        or not all(map(str.endswith, texts, repeat(names)))
    ):
        return None
    try:
        raw = binascii.a2b_base64("".join(map(itemgetter(slice(head, tail)), texts)), strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    size = _HEADER.size
    if (
        len(raw) != size * n
        or set(_SHARED_FIELDS.iter_unpack(raw)) != {(HANDLE_VERSION, glen, tlen)}
        or max(b"".join(raw[i::size] for i in _SIGN_BYTES)) >= 0x80
    ):
        return None
    return list(_ACK_FIELDS.iter_unpack(raw))


def _slow(text: str, group: str, topic: str) -> ReceiptHandle | MQError:
    try:
        handle = decode(text)
        check_scope(handle, group, topic)
    except MQError as exc:
        return exc
    return handle
