"""RocketMQ's MessageBatch layout: the messages of one ``Produce/SendBatch`` request, encoded back to back.

Each message: total size (4), magic code 0 (4), body CRC32 (4), flag (4), body length (4), body, properties length
(2), properties (``name\\x01value\\x02``, as in CommitLog records). Producers encode, the broker decodes and checks.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from orbitmq.errors import Code, MQError
from orbitmq.limits import MAX_PROPERTIES_SIZE
from orbitmq.record import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, encode_properties

if TYPE_CHECKING:
    from orbitmq.validation import PlainShapes

BATCH_MAGIC_CODE = 0
ENTRY_HEAD = struct.Struct(">iiIii")  # total size, magic, body CRC, flag, body length
PROPS_LEN = struct.Struct(">H")
MIN_ENTRY_SIZE = ENTRY_HEAD.size + PROPS_LEN.size
MAX_PROPERTIES_BYTES = 0xFFFF


@dataclass(slots=True)  # not frozen: the broker builds one per message of every batch, frozen __init__ is slower
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
    if items.pop():
        raise MQError(Code.MESSAGE_CORRUPTED, f"message {index} of the batch: properties do not end with \\x02")
    try:
        out = dict([item.split(NAME_VALUE_SEPARATOR, 1) for item in items])
    except ValueError:  # an item without a separator
        out = {}
    if len(out) != len(items):
        for item in items:
            name, sep, _ = item.partition(NAME_VALUE_SEPARATOR)
            if not sep or name in out:
                break
        raise MQError(Code.MESSAGE_CORRUPTED, f"message {index} of the batch: malformed or repeated property {name!r}")
    return out


def _damage(payload: bytes, pos: int, index: int) -> MQError:
    """Why the entry at ``pos`` does not frame (the slow path of ``decode_message_batch``)."""
    end = len(payload)
    if end - pos < MIN_ENTRY_SIZE:
        return MQError(Code.MESSAGE_CORRUPTED, f"message {index} of the batch is truncated")
    total, magic, _, _, body_len = ENTRY_HEAD.unpack_from(payload, pos)
    if magic != BATCH_MAGIC_CODE:
        return MQError(Code.MESSAGE_CORRUPTED, f"message {index} of the batch: magic code {magic}, expected 0")
    if body_len < 0 or total < MIN_ENTRY_SIZE + body_len:
        return MQError(
            Code.MESSAGE_CORRUPTED,
            f"message {index} of the batch: total size {total} cannot hold a body of {body_len} bytes",
        )
    return MQError(
        Code.MESSAGE_CORRUPTED,
        f"message {index} of the batch is truncated: total size {total}, {end - pos} bytes left",
    )


def decode_message_batch(
    payload: bytes, expected_count: int, max_count: int, *, crc_optional: bool = False
) -> list[BatchEntry]:
    """Decode and check a MessageBatch; any damage raises MESSAGE_CORRUPTED naming the message and the field.

    ``crc_optional``: a body CRC of 0 means none was computed (RocketMQ 4 clients' batches carry 0), others are
    still checked."""
    if expected_count <= 0:
        raise MQError(Code.MESSAGE_CORRUPTED, f"count is {expected_count}: a batch carries at least one message")
    if expected_count > max_count:
        raise MQError(Code.MESSAGE_CORRUPTED, f"batch has {expected_count} messages, the limit is {max_count}")
    payload = bytes(payload)  # slices of bytes are one copy each
    entries: list[BatchEntry] = []
    add = entries.append
    unpack = ENTRY_HEAD.unpack_from
    props_len = PROPS_LEN.unpack_from
    crc32 = zlib.crc32
    head, min_size = ENTRY_HEAD.size, MIN_ENTRY_SIZE
    pos, end, i = 0, len(payload), 0
    while pos < end:
        if i == expected_count:
            raise MQError(Code.MESSAGE_CORRUPTED, f"messages holds more than count={expected_count} messages")
        if end - pos < min_size:
            raise _damage(payload, pos, i)
        total, magic, body_crc, flag, body_len = unpack(payload, pos)
        nxt = pos + total
        if magic or body_len < 0 or total < min_size + body_len or nxt > end:
            raise _damage(payload, pos, i)
        b1 = pos + head + body_len
        body = payload[pos + head : b1]
        if crc32(body) != body_crc and not (crc_optional and body_crc == 0):
            raise MQError(Code.MESSAGE_CORRUPTED, f"message {i} of the batch: body CRC mismatch")
        (plen,) = props_len(payload, b1)
        if min_size + body_len + plen != total:
            raise MQError(Code.MESSAGE_CORRUPTED, f"message {i} of the batch: properties length {plen} does not fit")
        raw = payload[b1 + PROPS_LEN.size : nxt]
        add(BatchEntry(flag, body, _properties(raw, i), raw))
        pos = nxt
        i += 1
    if i != expected_count:
        raise MQError(Code.MESSAGE_CORRUPTED, f"messages holds {i} messages, count says {expected_count}")
    return entries


@dataclass(frozen=True, slots=True)
class ScannedBatch:
    """What ``scan_message_batch`` found: where each message's entry starts, its tag and keys (None without) and its
    message id (ASCII, as the pattern allows), and the bodies' total size."""

    positions: list[int]
    tags: list[bytes | None]
    keys: list[bytes | None]  # as stored: the keys joined by spaces
    unique_keys: list[bytes]
    body_bytes: int


def scan_message_batch(
    payload: bytes, expected_count: int, max_count: int, max_body: int, plain: PlainShapes
) -> ScannedBatch | None:
    """The fast check of a batch whose messages all have properties of a plain shape (``plain.full`` matches them
    whole, its groups are user properties, tag, keys, id, id, tag; ``plain.id_only`` the id alone, tried first):
    framing, count, body CRC, body size 1..``max_body``, properties. None as soon as anything differs;
    ``decode_message_batch`` and the full checks then say what (or accept it)."""
    if not 0 < expected_count <= max_count:
        return None
    positions: list[int] = []
    tags: list[bytes | None] = []
    keys: list[bytes | None] = []
    ids: list[bytes] = []
    add_pos, add_tag, add_keys, add_id = positions.append, tags.append, keys.append, ids.append
    unpack = ENTRY_HEAD.unpack_from
    props_len = PROPS_LEN.unpack_from
    crc32 = zlib.crc32
    fullmatch, id_only = plain.full.fullmatch, plain.id_only.fullmatch
    head, min_size = ENTRY_HEAD.size, MIN_ENTRY_SIZE
    pos, end, body_bytes = 0, len(payload), 0
    while pos < end:
        if end - pos < min_size:
            return None
        total, magic, body_crc, _, body_len = unpack(payload, pos)
        nxt = pos + total
        if magic or not 0 < body_len <= max_body or total < min_size + body_len or nxt > end:
            return None
        b1 = pos + head + body_len
        if crc32(payload[pos + head : b1]) != body_crc or min_size + body_len + props_len(payload, b1)[0] != total:
            return None
        only = id_only(payload, b1 + 2, nxt)
        if only is not None:
            add_tag(None)
            add_keys(None)
            add_id(only.group(1))
        else:
            match = fullmatch(payload, b1 + 2, nxt)
            if match is None:
                return None
            user, tag_first, keys_first, id_first, id_second, tag_second = match.groups()
            if user is not None and not _user_properties_fit(user, tag_first, keys_first):
                return None
            add_tag(tag_first or tag_second)
            add_keys(keys_first)
            add_id(id_first or id_second)
        add_pos(pos)
        body_bytes += body_len
        pos = nxt
    if len(tags) != expected_count:
        return None
    return ScannedBatch(positions, tags, keys, ids, body_bytes)


def _user_properties_fit(user: bytes, tag: bytes | None, keys: bytes | None) -> bool:
    """What the plain pattern cannot check of matched user properties: no name twice, and the size the full
    checks count (names and values, the tag, the keys without their separators) within ``MAX_PROPERTIES_SIZE``."""
    items = user.count(b"\x02")
    size = len(user) - 2 * items
    if tag is not None:
        size += len(tag)
    if keys is not None:
        size += len(keys) - keys.count(b" ")
    if size > MAX_PROPERTIES_SIZE:
        return False
    if items == 1:
        return True
    return len({item.partition(b"\x01")[0] for item in user.split(b"\x02")[:-1]}) == items


def entry_at(payload: bytes, pos: int, index: int) -> BatchEntry:
    """The message whose entry starts at ``pos`` of a payload already checked (``scan_message_batch``)."""
    total, _, _, flag, body_len = ENTRY_HEAD.unpack_from(payload, pos)
    b1 = pos + ENTRY_HEAD.size + body_len
    raw = payload[b1 + PROPS_LEN.size : pos + total]
    return BatchEntry(flag, payload[pos + ENTRY_HEAD.size : b1], _properties(raw, index), raw)
