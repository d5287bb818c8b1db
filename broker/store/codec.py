"""The CommitLog record codec: one fixed header, variable body/topic/properties, a whole-record CRC.

``docs/storage.md`` gives the byte layout; this module is the only code that knows it.
"""

from __future__ import annotations

import logging
import socket
import struct
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from itertools import accumulate
from typing import NamedTuple

from broker.store.consume_queue import ENTRY as CQ_ENTRY
from broker.store.message import (
    INNER_BATCH_FLAG,
    NEED_UNWRAP_FLAG,
    MessageExt,
    MessageExtBrokerInner,
    tags_hash_code,
)
from broker.store.plain_batch import ColumnBatch, PlainBatch
from orbitmq.message_batch import ENTRY_HEAD as INNER_HEAD
from orbitmq.message_batch import MIN_ENTRY_SIZE as INNER_MIN_SIZE
from orbitmq.message_batch import PROPS_LEN as INNER_PROPS_LEN
from orbitmq.message_const import PROPERTY_KEYS as KEYS
from orbitmq.message_const import PROPERTY_TAGS as TAGS
from orbitmq.message_const import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX as UNIQ_KEY

# The layout itself lives in orbitmq/record.py: clients of the batched pull decode the same bytes.
from orbitmq.record import (
    BLANK,
    BLANK_MAGIC_CODE,
    HEADER,
    HEADER_SIZE,
    MAX_PROPERTIES_BYTES,
    MAX_TOPIC_BYTES,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE,
    OFF_SYS_FLAG,
    PROPS_LEN,
    TOPIC_LEN,
    TRAILER,
    decode_properties,
    encode_properties,
)

log = logging.getLogger(__name__)


class RecordError(ValueError):
    """A record that cannot be stored (too large fields); carries the field name and limit."""


class ScanStatus(Enum):
    OK = "ok"
    BLANK = "blank"  # end-of-segment marker: continue at the next segment
    END = "end"  # zeros: nothing was ever written here
    CORRUPT = "corrupt"  # torn or damaged record


@dataclass(frozen=True)
class RecordInfo:
    """What recovery and dispatch need from one record without building a MessageExt."""

    status: ScanStatus
    size: int
    topic: str = ""
    queue_id: int = 0
    queue_offset: int = 0
    physical_offset: int = 0
    store_timestamp: int = 0
    tags_code: int = 0
    keys: tuple[str, ...] = ()
    unique_key: str | None = None
    inner_tags_codes: tuple[int, ...] = ()  # an inner batch: one ConsumeQueue entry per message, these tags
    # CORRUPT from a salvaging scan: where the next valid record starts (the scan goes on there); -1: none, a
    # torn tail
    resume_at: int = -1


@lru_cache(maxsize=1024)
def _ip(host: str) -> bytes:
    try:
        return socket.inet_aton(host)
    except OSError:
        return b"\x00\x00\x00\x00"


class Encoded(NamedTuple):
    """A message encoded except for its offsets and store timestamp, which are patched at append."""

    size: int
    tags_code: int
    tail: bytes  # topic length, topic, properties length, properties: the bytes between body and CRC


@lru_cache(maxsize=4096)
def _topic_prefix(topic: str) -> bytes:
    raw = topic.encode("utf-8")
    if len(raw) > MAX_TOPIC_BYTES:
        raise RecordError(f"topic is {len(raw)} bytes, the limit is {MAX_TOPIC_BYTES}")
    return TOPIC_LEN.pack(len(raw)) + raw


@lru_cache(maxsize=4096)
def _bare_tail(topic: str) -> bytes:
    """The tail of a record without properties: topic length, topic, zero properties length."""
    return _topic_prefix(topic) + PROPS_LEN.pack(0)


def prepare(msg: MessageExtBrokerInner, encoded_properties: bytes | None = None) -> Encoded:
    """Size, tag hash and tail of ``msg``; ``encoded_properties``, when given, must be ``msg.properties`` encoded
    (a batch sent in the MessageBatch layout carries them so: the broker checked they decode to the dict)."""
    properties = msg.properties
    if not properties:
        tail = _bare_tail(msg.topic)
        tags_code = msg.tags_code or 0
        return Encoded(HEADER_SIZE + len(msg.body) + len(tail) + TRAILER.size, tags_code, tail)
    props = encode_properties(properties) if encoded_properties is None else encoded_properties
    if len(props) > MAX_PROPERTIES_BYTES:
        raise PropertiesTooLarge(f"properties are {len(props)} bytes, the limit is {MAX_PROPERTIES_BYTES}")
    tail = _topic_prefix(msg.topic) + PROPS_LEN.pack(len(props)) + props
    explicit = msg.tags_code
    tags_code = tags_hash_code(properties.get(TAGS)) if explicit is None else explicit
    return Encoded(HEADER_SIZE + len(msg.body) + len(tail) + TRAILER.size, tags_code, tail)


class PropertiesTooLarge(RecordError):
    """The encoded properties pass ``MAX_PROPERTIES_BYTES`` (the store answers PROPERTIES_SIZE_EXCEEDED)."""


@dataclass
class AppendBatch:
    """One put's records on their way into the CommitLog, and what the append assigned to each.

    ``raws[i]``, when given, is ``msgs[i].properties`` already encoded. The encoder checks each record against
    ``max_body`` / ``max_record`` and fills, per message in order, ``written`` (physical offset, -1 when refused),
    ``sizes`` and ``queue_offsets``; ``refused`` maps a refused message's index to why; ``cq`` holds per queue
    the first queue offset and the packed ConsumeQueue entries.
    """

    # a PlainBatch / ColumnBatch: records straight from its payload / columns (encode_plain_run / encode_column_run)
    msgs: Sequence[MessageExtBrokerInner]
    raws: Sequence[bytes | None] | None
    store_timestamp: int
    store_host: tuple[str, int]
    queue_max: Callable[[tuple[str, int]], int]  # next offset of a queue the batch has not touched yet
    max_body: int
    max_record: int
    written: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    refused: dict[int, RecordError] = field(default_factory=dict)
    keyed: list[int] = field(default_factory=list)  # written messages with KEYS or a unique key: for the index
    cq: dict[tuple[str, int], tuple[int, list[bytes]]] = field(default_factory=dict)
    written_bytes: int = 0
    # per topic, queue id -> the same (first, entries) as in ``cq``: the loop looks queues up without a key tuple
    _by_topic: dict[str, dict[int, tuple[int, list[bytes]]]] = field(default_factory=dict)

    def refuse(self, index: int, why: RecordError) -> None:
        self.refused[index] = why
        self.written.append(-1)
        self.sizes.append(0)
        self.queue_offsets.append(-1)


def _refusal(msg: MessageExtBrokerInner, raw: bytes | None, batch: AppendBatch) -> RecordError:
    """Why ``msg`` cannot be stored, naming the field and the limit (the slow path of ``encode_run``)."""
    if len(msg.body) > batch.max_body:
        return RecordError(f"body is {len(msg.body)} bytes, maxMessageSize is {batch.max_body}")
    try:
        enc = prepare(msg, raw)
    except RecordError as exc:  # PropertiesTooLarge among them
        return exc
    return RecordError(
        f"record of {enc.size} bytes does not fit a commitlog segment of {batch.max_record + BLANK.size} bytes"
    )


def encode_run(batch: AppendBatch, start: int, phys: int, room: int) -> tuple[bytes, int]:
    """Encode records of ``batch`` from index ``start`` back to back while they fit in ``room`` bytes.

    ``phys`` is the physical offset of the first one. Returns the bytes (one copy into the map) and the index
    of the first message left for the next segment. This loop is the hot path of every put, so it does all
    per-record work (checks, tail, queue offset, header, CRCs, ConsumeQueue entry) in one pass over plain locals.
    """
    if type(batch.msgs) is PlainBatch:
        return encode_plain_run(batch, batch.msgs, start, phys, room)
    if type(batch.msgs) is ColumnBatch:
        return encode_column_run(batch, batch.msgs, start, phys, room)
    parts: list[bytes] = []
    add = parts.append
    pack = HEADER.pack
    entry = CQ_ENTRY.pack
    crc32 = zlib.crc32
    magic = MESSAGE_MAGIC_CODE
    store_ts = batch.store_timestamp
    store_ip, store_port = _ip(batch.store_host[0]), batch.store_host[1]
    msgs, raws = batch.msgs, batch.raws
    max_body, max_record = batch.max_body, batch.max_record
    cq, by_topic, queue_max = batch.cq, batch._by_topic, batch.queue_max
    add_written, add_size, add_qo = batch.written.append, batch.sizes.append, batch.queue_offsets.append
    add_keyed = batch.keyed.append
    fixed = HEADER_SIZE + TRAILER.size
    first, end = phys, phys + room
    last_topic: str | None = None
    last_born_host, born_ip = "", b""
    per_queue: dict[int, tuple[int, list[bytes]]] = {}
    bare = b""
    stop = n = len(msgs)
    for i in range(start, n):
        msg = msgs[i]
        topic = msg.topic
        if topic is not last_topic:
            try:
                bare = _bare_tail(topic)
            except RecordError as exc:
                batch.refuse(i, exc)
                continue
            last_topic = topic
            per_queue = by_topic.setdefault(topic, {})
        properties = msg.properties
        body = msg.body
        body_len = len(body)
        if properties:
            raw = raws[i] if raws is not None else None
            props = encode_properties(properties) if raw is None else raw
            if len(props) > MAX_PROPERTIES_BYTES:
                why = f"properties are {len(props)} bytes, the limit is {MAX_PROPERTIES_BYTES}"
                batch.refuse(i, PropertiesTooLarge(why))
                continue
            tail = _topic_prefix(topic) + PROPS_LEN.pack(len(props)) + props
            tags_code = msg.tags_code
            if tags_code is None:
                tags_code = tags_hash_code(properties.get(TAGS))
            is_keyed = KEYS in properties or UNIQ_KEY in properties
        else:
            tail = bare
            tags_code = msg.tags_code or 0
            is_keyed = False
        size = fixed + body_len + len(tail)
        if size > max_record or body_len > max_body:
            batch.refuse(i, _refusal(msg, raws[i] if raws is not None else None, batch))
            continue
        if phys + size > end:
            stop = i
            break
        inner = msg.inner_tags_codes
        if is_keyed:
            add_keyed(i)
        queue_id = msg.queue_id
        slot = per_queue.get(queue_id)
        if slot is None:
            key = (topic, queue_id)
            slot = cq[key] = per_queue[queue_id] = (queue_max(key), [])
        queue_first, entries = slot
        queue_offset = queue_first + len(entries)
        born = msg.born_host
        if born[0] != last_born_host:
            last_born_host, born_ip = born[0], _ip(born[0])
        record = (
            pack(
                size,
                magic,
                crc32(body),
                queue_id,
                msg.flag,
                queue_offset,
                phys,
                msg.sys_flag,
                msg.born_timestamp,
                born_ip,
                born[1],
                store_ts,
                store_ip,
                store_port,
                msg.reconsume_times,
                msg.prepared_transaction_offset,
                body_len,
            )
            + body
            + tail
        )
        add(record)
        add(crc32(record).to_bytes(4, "big"))
        if inner is None:
            entries.append(entry(phys, size, tags_code))
        else:  # one entry per message of the batch: readers address them like any other
            entries.extend([entry(phys, size, code) for code in inner])
        add_written(phys)
        add_size(size)
        add_qo(queue_offset)
        phys += size
    batch.written_bytes += phys - first
    return b"".join(parts), stop


def encode_plain_run(batch: AppendBatch, plain: PlainBatch, start: int, phys: int, room: int) -> tuple[bytes, int]:
    """``encode_run`` for a ``PlainBatch``: each record's body and properties are copied from the request's payload
    (the MessageBatch entry holds the properties length and bytes as a record does), its body CRC is the one the
    scan checked. The records are those ``encode_run`` makes of the decoded messages, byte for byte."""
    parts: list[bytes] = []
    add = parts.append
    pack = HEADER.pack
    unpack = INNER_HEAD.unpack_from
    crc32 = zlib.crc32
    magic = MESSAGE_MAGIC_CODE
    store_ts = batch.store_timestamp
    store_ip, store_port = _ip(batch.store_host[0]), batch.store_host[1]
    max_body, max_record = batch.max_body, batch.max_record
    topic, queue_id = plain.topic, plain.queue_id
    prefix = _prefix_or_refuse(batch, topic, start, len(plain))
    if prefix is None:
        return b"", len(plain)
    queue_first, entries = _queue_slot(batch, topic, queue_id)
    born_ts = plain.born_timestamp
    born_ip, born_port = _ip(plain.born_host[0]), plain.born_host[1]
    payload = plain.payload
    positions = plain.scanned.positions
    head = INNER_HEAD.size
    # record = header + body + topic prefix + (properties length + properties) + CRC; the entry's total size
    # counts its own head, the body and the properties length + properties
    fixed = HEADER_SIZE + TRAILER.size + len(prefix) - head
    first, end = phys, phys + room
    stop = n = len(positions)
    # the per-message lists are filled after the loop, one run of records at a time (a refusal ends a run)
    run_start, run_phys, run_qo = start, phys, queue_first + len(entries)
    sizes: list[int] = []
    add_size = sizes.append
    for i in range(start, n):
        pos = positions[i]
        total, _, body_crc, flag, body_len = unpack(payload, pos)
        size = fixed + total
        if size > max_record or body_len > max_body:
            _written_run(batch, plain.tags_codes, run_start, run_phys, run_qo, sizes, entries)
            batch.refuse(i, _refusal(plain[i], None, batch))
            run_start, run_phys, run_qo, sizes = i + 1, phys, queue_first + len(entries), []
            add_size = sizes.append
            continue
        if phys + size > end:
            stop = i
            break
        b1 = pos + head + body_len
        record = (
            pack(
                size,
                magic,
                body_crc,
                queue_id,
                flag,
                run_qo + len(sizes),
                phys,
                0,
                born_ts,
                born_ip,
                born_port,
                store_ts,
                store_ip,
                store_port,
                0,
                0,
                body_len,
            )
            + payload[pos + head : b1]
            + prefix
            + payload[b1 : pos + total]
        )
        add(record)
        add(crc32(record).to_bytes(4, "big"))
        add_size(size)
        phys += size
    _written_run(batch, plain.tags_codes, run_start, run_phys, run_qo, sizes, entries)
    batch.written_bytes += phys - first
    return b"".join(parts), stop


def _prefix_or_refuse(batch: AppendBatch, topic: str, start: int, n: int) -> bytes | None:
    """The record bytes naming ``topic``; None when the topic cannot be stored (messages ``start..n`` refused)."""
    try:
        return _topic_prefix(topic)
    except RecordError as exc:
        for i in range(start, n):
            batch.refuse(i, exc)
        return None


def _queue_slot(batch: AppendBatch, topic: str, queue_id: int) -> tuple[int, list[bytes]]:
    """The first queue offset and the ConsumeQueue entries of ``topic``/``queue_id`` in ``batch`` (made on first
    use; the entries list is filled in place)."""
    key = (topic, queue_id)
    slot = batch.cq.get(key)
    if slot is None:
        slot = batch.cq[key] = batch._by_topic.setdefault(topic, {})[queue_id] = (batch.queue_max(key), [])
    return slot


def _written_run(
    batch: AppendBatch,
    tags_codes: list[int],
    start: int,
    phys: int,
    queue_offset: int,
    sizes: list[int],
    entries: list[bytes],
) -> None:
    """The per-message lists of a run of ``len(sizes)`` records from message ``start`` on, written back to back from
    ``phys`` on with consecutive queue offsets (``encode_plain_run``, ``encode_column_run``)."""
    if not sizes:
        return
    n = len(sizes)
    written = list(accumulate(sizes[:-1], initial=phys))
    batch.written.extend(written)
    batch.sizes.extend(sizes)
    batch.queue_offsets.extend(range(queue_offset, queue_offset + n))
    batch.keyed.extend(range(start, start + n))  # every plain message has an id: the index takes it
    entries.extend(map(CQ_ENTRY.pack, written, sizes, tags_codes[start : start + n]))


def encode_column_run(batch: AppendBatch, cols: ColumnBatch, start: int, phys: int, room: int) -> tuple[bytes, int]:
    """``encode_run`` for a ``ColumnBatch``: each record from the columns' body, properties, system flag and born
    time and host. The records are those ``encode_run`` makes of the messages ``cols[i]`` builds, byte for byte."""
    parts: list[bytes] = []
    add = parts.append
    pack = HEADER.pack
    props_len = PROPS_LEN.pack
    crc32 = zlib.crc32
    magic = MESSAGE_MAGIC_CODE
    store_ts = batch.store_timestamp
    store_ip, store_port = _ip(batch.store_host[0]), batch.store_host[1]
    max_body, max_record = batch.max_body, batch.max_record
    topic, queue_id = cols.topic, cols.queue_id
    prefix = _prefix_or_refuse(batch, topic, start, len(cols))
    if prefix is None:
        return b"", len(cols)
    queue_first, entries = _queue_slot(batch, topic, queue_id)
    bodies, propss, sys_flags, borns, born_hosts = (
        cols.bodies, cols.properties, cols.sys_flags, cols.born_timestamps, cols.born_hosts
    )  # fmt: skip
    codes = cols.tags_codes
    last_born_host: tuple[str, int] | None = None
    born_ip, born_port = b"", 0
    fixed = HEADER_SIZE + TRAILER.size + len(prefix) + PROPS_LEN.size
    first, end = phys, phys + room
    stop = n = len(bodies)
    # the per-message lists are filled after the loop, one run of records at a time (a refusal ends a run)
    run_start, run_phys, run_qo = start, phys, queue_first + len(entries)
    sizes: list[int] = []
    add_size = sizes.append
    for i in range(start, n):
        body = bodies[i]
        props = propss[i]
        body_len = len(body)
        size = fixed + body_len + len(props)
        if size > max_record or body_len > max_body or len(props) > MAX_PROPERTIES_BYTES:
            _written_run(batch, codes, run_start, run_phys, run_qo, sizes, entries)
            batch.refuse(i, _refusal(cols[i], None, batch))
            run_start, run_phys, run_qo, sizes = i + 1, phys, queue_first + len(entries), []
            add_size = sizes.append
            continue
        if phys + size > end:
            stop = i
            break
        born = born_hosts[i]
        if born is not last_born_host:
            last_born_host, born_ip, born_port = born, _ip(born[0]), born[1]
        record = (
            pack(
                size,
                magic,
                crc32(body),
                queue_id,
                0,
                run_qo + len(sizes),
                phys,
                sys_flags[i],
                borns[i],
                born_ip,
                born_port,
                store_ts,
                store_ip,
                store_port,
                0,
                0,
                body_len,
            )
            + body
            + prefix
            + props_len(len(props))
            + props
        )
        add(record)
        add(crc32(record).to_bytes(4, "big"))
        add_size(size)
        phys += size
    _written_run(batch, codes, run_start, run_phys, run_qo, sizes, entries)
    batch.written_bytes += phys - first
    return b"".join(parts), stop


def write_record(
    buf: memoryview | bytearray,
    pos: int,
    msg: MessageExtBrokerInner,
    enc: Encoded,
    queue_offset: int,
    physical_offset: int,
    store_timestamp: int,
) -> None:
    """Encode ``msg`` into ``buf`` at ``pos`` (``enc.size`` bytes)."""
    body = msg.body
    HEADER.pack_into(
        buf,
        pos,
        enc.size,
        MESSAGE_MAGIC_CODE,
        zlib.crc32(body),
        msg.queue_id,
        msg.flag,
        queue_offset,
        physical_offset,
        msg.sys_flag,
        msg.born_timestamp,
        _ip(msg.born_host[0]),
        msg.born_host[1],
        store_timestamp,
        _ip(msg.store_host[0]),
        msg.store_host[1],
        msg.reconsume_times,
        msg.prepared_transaction_offset,
        len(body),
    )
    p = pos + HEADER_SIZE
    end_body = p + len(body)
    buf[p:end_body] = body
    p = end_body + len(enc.tail)
    buf[end_body:p] = enc.tail
    TRAILER.pack_into(buf, p, zlib.crc32(buf[pos:p]))


def write_blank(buf: memoryview | bytearray, pos: int, size: int) -> None:
    """Mark the rest of a segment unused; readers skip to the next segment."""
    BLANK.pack_into(buf, pos, size, BLANK_MAGIC_CODE)


def encode(msg: MessageExtBrokerInner, queue_offset: int = 0, physical_offset: int = 0, store_ts: int = 0) -> bytes:
    enc = prepare(msg)
    buf = bytearray(enc.size)
    write_record(buf, 0, msg, enc, queue_offset, physical_offset, store_ts)
    return bytes(buf)


def check_record(buf: memoryview | bytes | bytearray, pos: int, limit: int) -> RecordInfo:
    """Validate the record at ``pos`` (size, magic, CRC) without decoding it fully; ``limit`` bounds the read."""
    if pos + 8 > limit:
        return RecordInfo(ScanStatus.END if pos >= limit else ScanStatus.CORRUPT, 0)
    size, magic = BLANK.unpack_from(buf, pos)
    if size == 0 and magic == 0:
        return RecordInfo(ScanStatus.END, 0)
    if magic == BLANK_MAGIC_CODE:
        return RecordInfo(ScanStatus.BLANK, size) if pos + size == limit else RecordInfo(ScanStatus.CORRUPT, 0)
    if magic != MESSAGE_MAGIC_CODE or size < MIN_RECORD_SIZE or pos + size > limit:
        return RecordInfo(ScanStatus.CORRUPT, 0)
    end = pos + size - TRAILER.size
    (crc,) = TRAILER.unpack_from(buf, end)
    if zlib.crc32(buf[pos:end]) != crc:
        return RecordInfo(ScanStatus.CORRUPT, 0)
    h = HEADER.unpack_from(buf, pos)
    body_len = h[16]
    p = pos + HEADER_SIZE + body_len
    if p + 3 > end:
        return RecordInfo(ScanStatus.CORRUPT, 0)
    tlen = buf[p]
    topic = bytes(buf[p + 1 : p + 1 + tlen]).decode("utf-8", "replace")
    p += 1 + tlen
    (plen,) = PROPS_LEN.unpack_from(buf, p)
    if p + 2 + plen != end:
        return RecordInfo(ScanStatus.CORRUPT, 0)
    props = decode_properties(buf[p + 2 : p + 2 + plen])
    keys = tuple(k for k in props.get("KEYS", "").split(" ") if k)
    inner: tuple[int, ...] = ()
    if h[7] & INNER_BATCH_FLAG:
        body_at = pos + HEADER_SIZE
        try:  # the CRC holds, so a body that is no batch is our bug: keep the record (one entry), never truncate
            inner = tuple(
                tags_hash_code(decode_properties(raw).get(TAGS))
                for *_, raw in _inner_entries(bytes(buf[body_at : body_at + body_len]))
            )
        except RecordError as exc:
            log.error("inner-batch record with a body that is no batch", extra={"offset": h[6], "error": str(exc)})
    return RecordInfo(
        ScanStatus.OK,
        size,
        topic,
        h[3],
        h[5],
        h[6],
        h[11],
        tags_hash_code(props.get("TAGS")),
        keys,
        props.get("UNIQ_KEY"),
        inner,
    )


def decode(buf: memoryview | bytes | bytearray, pos: int = 0) -> MessageExt:
    """Decode a full record; the caller has located it through a ConsumeQueue entry or a scan."""
    h = HEADER.unpack_from(buf, pos)
    size, magic = h[0], h[1]
    if magic != MESSAGE_MAGIC_CODE:
        raise RecordError(f"no message at this position (magic {magic:#x})")
    body_len = h[16]
    p = pos + HEADER_SIZE
    body = bytes(buf[p : p + body_len])
    p += body_len
    tlen = buf[p]
    topic = bytes(buf[p + 1 : p + 1 + tlen]).decode("utf-8")
    p += 1 + tlen
    (plen,) = PROPS_LEN.unpack_from(buf, p)
    props = decode_properties(buf[p + 2 : p + 2 + plen])
    return MessageExt(
        topic=topic,
        body=body,
        queue_id=h[3],
        properties=props,
        flag=h[4],
        sys_flag=h[7],
        born_timestamp=h[8],
        born_host=(socket.inet_ntoa(h[9]), h[10]),
        store_timestamp=h[11],
        store_host=(socket.inet_ntoa(h[12]), h[13]),
        reconsume_times=h[14],
        prepared_transaction_offset=h[15],
        queue_offset=h[5],
        commitlog_offset=h[6],
        store_size=size,
        body_crc=h[2],
    )


# ---------------------------------------------------------------------- inner batches
# An inner-batch record (sys flag INNER_BATCH_FLAG) holds the messages of one SendBatch request as its body, in the
# MessageBatch layout (orbitmq/message_batch.py), and takes one queue offset per message from its own queue offset
# on. Readers never see it whole: every read path hands out its messages one by one (RocketMQ 5 leaves the
# unwrapping to the client; here it stays in the broker so that every consumer and protocol works unchanged).

_INNER_FLAGS = INNER_BATCH_FLAG | NEED_UNWRAP_FLAG


def _inner_entries(buf: bytes, pos: int = 0, end: int | None = None) -> list[tuple[int, int, bytes, bytes]]:
    """(flag, body CRC, body, raw properties) of each message of the inner-batch body ``buf[pos:end]``."""
    out: list[tuple[int, int, bytes, bytes]] = []
    add = out.append
    unpack = INNER_HEAD.unpack_from
    head, plen_size = INNER_HEAD.size, INNER_PROPS_LEN.size
    end = len(buf) if end is None else end
    while pos < end:
        if end - pos < INNER_MIN_SIZE:
            raise RecordError(f"inner batch: {end - pos} trailing bytes at {pos}")
        total, _, crc, flag, body_len = unpack(buf, pos)
        b1 = pos + head + body_len
        nxt = pos + total
        if body_len < 0 or total < INNER_MIN_SIZE + body_len or nxt > end:
            raise RecordError(f"inner batch: message at {pos} of {total} bytes does not fit")
        add((flag, crc, buf[pos + head : b1], buf[b1 + plen_size : nxt]))
        pos = nxt
    return out


def unwrap(outer: MessageExt) -> list[MessageExt]:
    """The messages of an inner-batch record, each with its queue offset (the record's + its index), the record's
    store metadata and its own flag, body and properties (RocketMQ's ``MessageDecoder.decodeMessage``)."""
    sys_flag = outer.sys_flag & ~_INNER_FLAGS
    fixed = HEADER_SIZE + TOPIC_LEN.size + len(outer.topic.encode("utf-8")) + PROPS_LEN.size + TRAILER.size
    return [
        MessageExt(
            topic=outer.topic,
            body=body,
            queue_id=outer.queue_id,
            properties=decode_properties(raw),
            flag=flag,
            sys_flag=sys_flag,
            born_timestamp=outer.born_timestamp,
            born_host=outer.born_host,
            store_timestamp=outer.store_timestamp,
            store_host=outer.store_host,
            reconsume_times=outer.reconsume_times,
            prepared_transaction_offset=outer.prepared_transaction_offset,
            queue_offset=outer.queue_offset + i,
            commitlog_offset=outer.commitlog_offset,
            store_size=fixed + len(body) + len(raw),
            body_crc=crc,
        )
        for i, (flag, crc, body, raw) in enumerate(_inner_entries(outer.body))
    ]


_RAW_HEAD = struct.Struct(">iIIiiq")  # the header fields up to the queue offset; the rest is the batch's
_RAW_HEAD_END = _RAW_HEAD.size  # 28: physical offset onwards, up to the body length, is the batch record's
_BODY_LEN = struct.Struct(">i")


def unwrap_raw(record: bytes) -> list[bytes]:
    """The messages of the inner-batch ``record`` as records of their own (what ``unwrap`` decodes), for the
    paths that answer with stored records (batched pull and receive)."""
    h = HEADER.unpack_from(record, 0)
    body_len = h[16]
    p = HEADER_SIZE + body_len
    topic_tail = record[p : p + TOPIC_LEN.size + record[p]]
    # physical offset .. prepared transaction offset: the batch's, with the two batch bits out of the sys flag
    middle = bytearray(record[_RAW_HEAD_END : HEADER_SIZE - _BODY_LEN.size])
    sys_flag_at = OFF_SYS_FLAG - _RAW_HEAD_END
    middle[sys_flag_at : sys_flag_at + 4] = (h[7] & ~_INNER_FLAGS).to_bytes(4, "big", signed=True)
    fixed = bytes(middle)
    queue_id, queue_offset = h[3], h[5]
    head_pack, len_pack, props_len, crc32 = _RAW_HEAD.pack, _BODY_LEN.pack, PROPS_LEN.pack, zlib.crc32
    join, magic = b"".join, MESSAGE_MAGIC_CODE
    overhead = HEADER_SIZE + len(topic_tail) + PROPS_LEN.size + TRAILER.size
    out: list[bytes] = []
    add = out.append
    for flag, crc, body, raw_props in _inner_entries(record, HEADER_SIZE, HEADER_SIZE + body_len):
        plen = len(raw_props)
        one = join(
            (
                head_pack(overhead + len(body) + plen, magic, crc, queue_id, flag, queue_offset),
                fixed,
                len_pack(len(body)),
                body,
                topic_tail,
                props_len(plen),
                raw_props,
            )
        )
        add(one + crc32(one).to_bytes(4, "big"))
        queue_offset += 1
    return out
