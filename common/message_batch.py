"""RocketMQ's MessageBatch layout: the messages of one ``Produce/SendBatch`` request, encoded back to back.

Each message: total size (4), magic code 0 (4), body CRC32 (4), flag (4), body length (4), body, properties length
(2), properties (``name\\x01value\\x02``, as in CommitLog records). Producers encode, the broker decodes and checks.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from common.errors import Code, MQError
from common.record import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, encode_properties

BATCH_MAGIC_CODE = 0
ENTRY_HEAD = struct.Struct(">iiIii")  # total size, magic, body CRC, flag, body length
PROPS_LEN = struct.Struct(">H")
MIN_ENTRY_SIZE = ENTRY_HEAD.size + PROPS_LEN.size
MAX_PROPERTIES_BYTES = 0xFFFF


@dataclass(frozen=True, slots=True)
class BatchEntry:
    """One decoded message of a batch."""

    flag: int
    body: bytes
    properties: dict[str, str]
    # The properties as they were on the wire (decoded entries only): exactly ``encode_properties(properties)``.
    raw_properties: bytes = field(default=b"", compare=False, repr=False)


def encode_message_batch(messages: Iterable[BatchEntry]) -> bytes:
    """The messages as one MessageBatch payload."""
    parts: list[bytes] = []
    pack = ENTRY_HEAD.pack
    for m in messages:
        body, flag = m.body, m.flag
        raw = encode_properties(m.properties)
        if len(raw) > MAX_PROPERTIES_BYTES:
            raise MQError(
                Code.MESSAGE_PROPERTIES_TOO_LARGE,
                f"properties are {len(raw)} bytes, the limit of the batch layout is {MAX_PROPERTIES_BYTES}",
            )
        total = MIN_ENTRY_SIZE + len(body) + len(raw)
        parts.append(pack(total, BATCH_MAGIC_CODE, zlib.crc32(body), flag, len(body)))
        parts.append(body)
        parts.append(PROPS_LEN.pack(len(raw)))
        parts.append(raw)
    return b"".join(parts)


def _properties(raw: bytes, index: int) -> dict[str, str]:
    """Strict: every item is ``name\\x01value``, no name twice (a lenient parse could store what nobody sent)."""
    if not raw:
        return {}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MQError(Code.MESSAGE_CORRUPTED, f"message {index} of the batch: properties are not UTF-8") from exc
    items = text.split(PROPERTY_SEPARATOR)
    if items[-1]:
        raise MQError(Code.MESSAGE_CORRUPTED, f"message {index} of the batch: properties do not end with \\x02")
    out: dict[str, str] = {}
    for item in items[:-1]:
        name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
        if not sep or name in out:
            raise MQError(
                Code.MESSAGE_CORRUPTED, f"message {index} of the batch: malformed or repeated property {name!r}"
            )
        out[name] = value
    return out


def decode_message_batch(payload: bytes, expected_count: int, max_count: int) -> list[BatchEntry]:
    """Decode and check a MessageBatch; any damage raises MESSAGE_CORRUPTED naming the message and the field."""
    if expected_count <= 0:
        raise MQError(Code.MESSAGE_CORRUPTED, f"count is {expected_count}: a batch carries at least one message")
    if expected_count > max_count:
        raise MQError(Code.MESSAGE_CORRUPTED, f"batch has {expected_count} messages, the limit is {max_count}")
    entries: list[BatchEntry] = []
    add = entries.append
    unpack = ENTRY_HEAD.unpack_from
    crc32 = zlib.crc32
    head = ENTRY_HEAD.size
    pos, end = 0, len(payload)
    view = memoryview(payload)
    while pos < end:
        i = len(entries)
        if i == expected_count:
            raise MQError(Code.MESSAGE_CORRUPTED, f"messages holds more than count={expected_count} messages")
        if end - pos < MIN_ENTRY_SIZE:
            raise MQError(Code.MESSAGE_CORRUPTED, f"message {i} of the batch is truncated")
        total, magic, body_crc, flag, body_len = unpack(payload, pos)
        if magic != BATCH_MAGIC_CODE:
            raise MQError(Code.MESSAGE_CORRUPTED, f"message {i} of the batch: magic code {magic}, expected 0")
        if body_len < 0 or total < MIN_ENTRY_SIZE + body_len:
            raise MQError(
                Code.MESSAGE_CORRUPTED,
                f"message {i} of the batch: total size {total} cannot hold a body of {body_len} bytes",
            )
        if pos + total > end:
            raise MQError(
                Code.MESSAGE_CORRUPTED,
                f"message {i} of the batch is truncated: total size {total}, {end - pos} bytes left",
            )
        b0 = pos + head
        b1 = b0 + body_len
        body = bytes(view[b0:b1])
        if crc32(body) != body_crc:
            raise MQError(Code.MESSAGE_CORRUPTED, f"message {i} of the batch: body CRC mismatch")
        (props_len,) = PROPS_LEN.unpack_from(payload, b1)
        if MIN_ENTRY_SIZE + body_len + props_len != total:
            raise MQError(
                Code.MESSAGE_CORRUPTED, f"message {i} of the batch: properties length {props_len} does not fit"
            )
        p0 = b1 + PROPS_LEN.size
        raw = bytes(view[p0 : p0 + props_len])
        add(BatchEntry(flag, body, _properties(raw, i), raw))
        pos += total
    if len(entries) != expected_count:
        raise MQError(Code.MESSAGE_CORRUPTED, f"messages holds {len(entries)} messages, count says {expected_count}")
    return entries
