"""The CommitLog record layout (``docs/storage.md``), shared by the broker that writes records and by clients
of the batched pull (``orbitmq.consume.Consume/PullBatch``), which receive records exactly as stored.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass

MESSAGE_MAGIC_CODE = 0x0B17A001
BLANK_MAGIC_CODE = 0x0B17A0FF

# total, magic, bodyCRC, queueId, flag, queueOffset, physicalOffset, sysFlag, bornTs, bornIP, bornPort,
# storeTs, storeIP, storePort, reconsumeTimes, preparedTxOffset, bodyLength
HEADER = struct.Struct(">iIIiiqqiq4sIq4sIiqi")
HEADER_SIZE = HEADER.size  # 88
TRAILER = struct.Struct(">I")  # CRC32 of every byte of the record before it
TOPIC_LEN = struct.Struct(">B")
PROPS_LEN = struct.Struct(">H")
BLANK = struct.Struct(">iI")
MIN_RECORD_SIZE = HEADER_SIZE + TOPIC_LEN.size + PROPS_LEN.size + TRAILER.size
MAX_TOPIC_BYTES = 255
MAX_PROPERTIES_BYTES = 32767

OFF_QUEUE_OFFSET = 20
OFF_PHYSICAL_OFFSET = 28
OFF_SYS_FLAG = 36
OFF_STORE_TIMESTAMP = 56

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


def encode_properties(properties: dict[str, str]) -> bytes:
    if not properties:
        return b""
    # joins in C: this runs for every message a client batches and every record the broker encodes
    return (PROPERTY_SEPARATOR.join(map(NAME_VALUE_SEPARATOR.join, properties.items())) + PROPERTY_SEPARATOR).encode()


def decode_properties(raw: bytes | bytearray | memoryview) -> dict[str, str]:
    if not raw:
        return {}
    result: dict[str, str] = {}
    for item in bytes(raw).decode("utf-8").split(PROPERTY_SEPARATOR):
        if item:
            name, _, value = item.partition(NAME_VALUE_SEPARATOR)
            result[name] = value
    return result


class RecordFormatError(ValueError):
    """Bytes that are not a sequence of whole CommitLog records."""


@dataclass(slots=True)
class RecordView:
    """One record decoded on the client side of a batched pull."""

    topic: str
    body: bytes
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    properties: dict[str, str]
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    store_size: int


def iter_records(buf: bytes | memoryview) -> Iterator[RecordView]:
    """Decode records laid end to end (no blank markers between them); raises ``RecordFormatError`` on junk."""
    # slices of bytes: one object per field (a memoryview slice is one more); an answer's records share their
    # topic and hosts, so each is decoded once
    data = buf if isinstance(buf, bytes) else bytes(buf)
    pos, end = 0, len(data)
    unpack = HEADER.unpack_from
    props_len = PROPS_LEN.unpack_from
    inet_ntoa = socket.inet_ntoa
    last_topic_raw, topic = b"", ""
    hosts: dict[tuple[bytes, int], tuple[str, int]] = {}
    while pos < end:
        if end - pos < MIN_RECORD_SIZE:
            raise RecordFormatError(f"{end - pos} trailing bytes at {pos} are not a record")
        h = unpack(data, pos)
        size = h[0]
        if h[1] != MESSAGE_MAGIC_CODE or size < MIN_RECORD_SIZE or pos + size > end:
            raise RecordFormatError(f"no record at {pos} (size {size}, magic {h[1]:#x})")
        p = pos + HEADER_SIZE
        body = data[p : p + h[16]]
        p += h[16]
        tlen = data[p]
        if tlen != len(last_topic_raw) or not data.startswith(last_topic_raw, p + 1):
            last_topic_raw = data[p + 1 : p + 1 + tlen]
            topic = last_topic_raw.decode("utf-8")
        p += 1 + tlen
        (plen,) = props_len(data, p)
        born = hosts.get(key := (h[9], h[10]))
        if born is None:
            born = hosts[key] = (inet_ntoa(h[9]), h[10])
        stored = hosts.get(key := (h[12], h[13]))
        if stored is None:
            stored = hosts[key] = (inet_ntoa(h[12]), h[13])
        yield RecordView(
            topic,
            body,
            h[3],
            h[5],
            h[6],
            decode_properties(data[p + 2 : p + 2 + plen]),
            h[4],
            h[7],
            h[8],
            born,
            h[11],
            stored,
            h[14],
            size,
        )
        pos += size
