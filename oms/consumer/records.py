"""Stored CommitLog records (from ``Consume/PullBatch``) as ``BytesMessage``s, headers mapped as on v2 delivery.

Compressed bodies (sys flag bit 0x1, zlib or gzip) come back as the producer sent them.
"""

from __future__ import annotations

import gzip
import socket
import zlib
from collections.abc import Iterable, Iterator
from typing import Any

from oms.errors import OMSRuntimeException
from oms.keys import BuiltinKeys, NonStandardKeys
from oms.keyvalue import KeyValue
from oms.message import BytesMessage
from orbitmq import message_const as mc
from orbitmq.errors import Code
from orbitmq.record import (
    HEADER,
    HEADER_SIZE,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE,
    PROPS_LEN,
    RecordView,
    decode_properties,
)

COMPRESSED_FLAG = 0x1
# a record as decode_records keeps it: header fields, topic, stored body, raw properties, record size
_Packed = tuple[tuple[Any, ...], str, bytes, bytes, int]
# Properties the broker keeps for itself; v2 delivery hides them from user properties too.
HIDDEN_PROPERTIES = mc.SYSTEM_PROPERTY_KEYS | {mc.PROPERTY_DLQ_ORIGIN_TOPIC, mc.PROPERTY_DLQ_ORIGIN_MESSAGE_ID}


def decompress(body: bytes) -> bytes:
    """A compressed body: gzip when it has gzip's magic, else zlib (RocketMQ compresses with zlib)."""
    if body[:2] == b"\x1f\x8b":
        return gzip.decompress(body)
    return zlib.decompress(body)


class StoredMessage(BytesMessage):
    """A ``BytesMessage`` decoded from a stored record, its headers built on first use.

    A batched pull decodes thousands of records per call and most readers look at the body and an offset or two;
    building ~12 string headers per record up front made ``pull()`` four times slower than decoding alone. Until
    someone touches the header maps (``sys_headers()``, ``user_headers()``, a setter, ``repr``), the conveniences
    below answer from the record; afterwards the maps are the truth, as for any other message. The user headers can
    be built alone (the record stays for the sys headers), and a receive's receipt waits in ``_receipt`` for them.
    """

    __slots__ = ("_packed", "_receipt", "_record")

    def __init__(self, record: RecordView | None, body: bytes, packed: _Packed | None = None) -> None:
        # the base class's _sys/_user slots stay unset until __getattr__ builds them
        self._body = body
        self._record: RecordView | None = record
        self._packed: _Packed | None = packed
        self._receipt: tuple[str, int] | None = None  # (receipt handle, redelivered number) not in _sys yet

    def set_receipt(self, handle: str, redelivered: int) -> None:
        """The receipt handle and redelivery count a receive gave this message (sys headers ``RECEIPT_HANDLE`` and
        ``REDELIVERED_NUMBER``), kept aside until the sys headers are built: a Celery worker reads the handle and
        the user headers of every task and never the rest."""
        if self._view() is None:  # the headers are built: they are the truth
            self._sys.set_trusted(BuiltinKeys.RECEIPT_HANDLE, handle)
            self._sys.set_trusted(BuiltinKeys.REDELIVERED_NUMBER, str(redelivered))
        else:
            self._receipt = (handle, redelivered)

    def _view(self) -> RecordView | None:
        """The record while the header maps are not built (decoded from its packed form on first need)."""
        record = self._record
        if record is None and self._packed is not None:
            record = self._record = _unpack(self._packed)
            self._packed = None
        return record

    def __getattr__(self, name: str) -> Any:
        # Only reached while a slot is unset: the header maps before their first use. The user headers alone keep
        # the record (the sys headers may follow); the sys headers end it.
        if name in ("_sys", "_user"):
            record = self._view()
            if record is not None:
                if name == "_user":
                    self._user = KeyValue._trusted(_user_properties(record))
                    return self._user
                self._materialize(record)
                return self._sys
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _materialize(self, record: RecordView) -> None:
        props = record.properties
        sys_h: dict[str, str] = {BuiltinKeys.DESTINATION: record.topic}
        sys_h[BuiltinKeys.MESSAGE_ID] = _message_id(record)
        tag = props.get(mc.PROPERTY_TAGS)
        if tag:
            sys_h[NonStandardKeys.TAGS] = tag
        keys = _keys(props)
        if keys:
            sys_h[BuiltinKeys.SEARCH_KEYS] = ",".join(keys)
        group = props.get(mc.PROPERTY_MESSAGE_GROUP)
        if group:
            sys_h[BuiltinKeys.STREAM_KEY] = group
        deliver = props.get(mc.PROPERTY_TIMER_DELIVER_MS)
        if deliver and deliver.isdigit():
            sys_h[BuiltinKeys.START_TIME] = deliver
        sys_h[BuiltinKeys.BORN_TIMESTAMP] = str(record.born_timestamp)
        sys_h[BuiltinKeys.BORN_HOST] = record.born_host[0]
        sys_h[BuiltinKeys.STORE_TIMESTAMP] = str(record.store_timestamp)
        sys_h[BuiltinKeys.STORE_HOST] = f"{record.store_host[0]}:{record.store_host[1]}"
        sys_h[BuiltinKeys.QUEUE_ID] = str(record.queue_id)
        sys_h[BuiltinKeys.QUEUE_OFFSET] = str(record.queue_offset)
        sys_h[BuiltinKeys.REDELIVERED_NUMBER] = str(record.reconsume_times)
        if self._receipt is not None:
            handle, redelivered = self._receipt
            sys_h[BuiltinKeys.RECEIPT_HANDLE] = handle
            sys_h[BuiltinKeys.REDELIVERED_NUMBER] = str(redelivered)
            self._receipt = None
        self._sys = KeyValue._trusted(sys_h)
        self._user  # noqa: B018 - built here from the record (still held) unless read before: those are kept
        self._record = None

    # -- answers from the record while the headers are not built --------------------------------------------

    @property
    def destination(self) -> str | None:
        record = self._view()
        return record.topic if record is not None else super().destination

    @destination.setter
    def destination(self, topic: str) -> None:
        self._sys[BuiltinKeys.DESTINATION] = topic

    @property
    def message_id(self) -> str | None:
        record = self._view()
        return _message_id(record) if record is not None else super().message_id

    @property
    def tags(self) -> str | None:
        record = self._view()
        return (record.properties.get(mc.PROPERTY_TAGS) or None) if record is not None else super().tags

    @tags.setter
    def tags(self, tag: str) -> None:
        self._sys[NonStandardKeys.TAGS] = tag

    @property
    def keys(self) -> list[str]:
        record = self._view()
        return list(dict.fromkeys(_keys(record.properties))) if record is not None else super().keys

    @keys.setter
    def keys(self, keys: Iterable[str]) -> None:
        self._sys[BuiltinKeys.SEARCH_KEYS] = ",".join(keys)

    @property
    def born_timestamp(self) -> int | None:
        record = self._view()
        return record.born_timestamp if record is not None else super().born_timestamp

    @property
    def store_timestamp(self) -> int | None:
        record = self._view()
        return record.store_timestamp if record is not None else super().store_timestamp

    @property
    def receipt_handle(self) -> str | None:
        receipt = self._receipt
        return receipt[0] if receipt is not None else super().receipt_handle

    @property
    def reconsume_times(self) -> int:
        receipt = self._receipt
        if receipt is not None:
            return receipt[1]
        record = self._view()
        return record.reconsume_times if record is not None else super().reconsume_times

    @property
    def queue_id(self) -> int | None:
        if self._packed is not None:
            return int(self._packed[0][3])
        record = self._view()
        return record.queue_id if record is not None else super().queue_id

    @property
    def queue_offset(self) -> int | None:
        if self._packed is not None:
            return int(self._packed[0][5])
        record = self._view()
        return record.queue_offset if record is not None else super().queue_offset


def _user_properties(record: RecordView) -> dict[str, str]:
    # property names come off the wire: an empty name is dropped, as KeyValue refuses it
    return {k: v for k, v in record.properties.items() if k and k not in HIDDEN_PROPERTIES}


def _message_id(record: RecordView) -> str:
    return record.properties.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or f"{record.commitlog_offset}"


def _keys(props: dict[str, str]) -> list[str]:
    return [k for k in props.get(mc.PROPERTY_KEYS, "").split(mc.KEY_SEPARATOR) if k]


def record_to_message(record: RecordView) -> StoredMessage:
    body = record.body
    if record.sys_flag & COMPRESSED_FLAG:
        try:
            body = decompress(body)
        except (OSError, zlib.error) as exc:
            raise OMSRuntimeException(
                Code.MESSAGE_CORRUPTED,
                f"message at {record.topic}:{record.queue_id}@{record.queue_offset} is flagged compressed but "
                f"does not decompress: {exc}",
            ) from exc
    return StoredMessage(record, body)


def _unpack(packed: _Packed) -> RecordView:
    """What ``iter_records`` makes of a record, from the pieces ``decode_records`` kept."""
    h, topic, body, raw_props, size = packed
    return RecordView(
        topic,
        body,
        h[3],
        h[5],
        h[6],
        decode_properties(raw_props),
        h[4],
        h[7],
        h[8],
        (socket.inet_ntoa(h[9]), h[10]),
        h[11],
        (socket.inet_ntoa(h[12]), h[13]),
        h[14],
        size,
    )


def _body_of(topic: str, h: tuple[Any, ...], body: bytes) -> bytes:
    try:
        return decompress(body)
    except (OSError, zlib.error) as exc:
        raise OMSRuntimeException(
            Code.MESSAGE_CORRUPTED,
            f"message at {topic}:{h[3]}@{h[5]} is flagged compressed but does not decompress: {exc}",
        ) from exc


def iter_frames(raw: bytes) -> Iterator[_Packed]:
    """The records of a ``Consume/PullBatch`` answer as packed pieces, framing checked as ``iter_records`` checks
    it: header tuple, topic, stored body, raw properties, record size. Both decoders below build on it."""
    # slicing the bytes themselves: one allocation per field (a memoryview slice costs a second object)
    buf = raw if isinstance(raw, bytes) else bytes(raw)
    pos, end = 0, len(buf)
    unpack = HEADER.unpack_from
    last_topic_raw, last_topic = b"", ""
    while pos < end:
        if end - pos < MIN_RECORD_SIZE:
            raise _corrupted(f"{end - pos} trailing bytes at {pos} are not a record")
        h = unpack(buf, pos)
        size = h[0]
        if h[1] != MESSAGE_MAGIC_CODE or size < MIN_RECORD_SIZE + h[16] or pos + size > end or h[16] < 0:
            raise _corrupted(f"no record at {pos} (size {size}, magic {h[1]:#x}, body {h[16]} bytes)")
        p = pos + HEADER_SIZE
        body = buf[p : p + h[16]]
        p += h[16]
        tlen = buf[p]
        # a pull reads one topic: decode its name once
        if tlen != len(last_topic_raw) or not buf.startswith(last_topic_raw, p + 1):
            topic_raw = buf[p + 1 : p + 1 + tlen]
            try:
                last_topic_raw, last_topic = topic_raw, topic_raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _corrupted(f"topic of the record at {pos}: {exc}") from exc
        p += 1 + tlen
        (plen,) = PROPS_LEN.unpack_from(buf, p)
        yield (h, last_topic, body, buf[p + 2 : p + 2 + plen], size)
        pos += size


def stored_body(packed: _Packed) -> bytes:
    """The body as the producer sent it (a compressed one decompressed)."""
    h, topic, body = packed[0], packed[1], packed[2]
    return _body_of(topic, h, body) if h[7] & COMPRESSED_FLAG else body


def decode_records(raw: bytes) -> list[BytesMessage]:
    """``Consume/PullBatch`` records as messages.

    Each record keeps its header tuple and raw properties; the ``RecordView`` (properties dict, host strings) is
    built when something needs it. Thousands of live objects per pull made the garbage collector run several
    times per batch (py-spy: the decode lines twice as slow as in a loop that drops each record at once).
    """
    return [StoredMessage(None, stored_body(packed), packed) for packed in iter_frames(raw)]


def _corrupted(what: str) -> OMSRuntimeException:
    return OMSRuntimeException(Code.MESSAGE_CORRUPTED, f"PullBatch records do not decode: {what}")
