"""The replication wire format on ``haListenPort`` (RocketMQ's HAConnection framing, plus a hello).

A connection opens with a hello naming its kind: REPLICATE (the slave then reports its CommitLog end as 8 bytes,
again after every frame; the master sends frames of whole records) or METADATA (one JSON answer, then close).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

MAGIC = b"ORHA"
VERSION = 1
# magic, version, kind, the slave's CommitLog segment size, the epoch it knows (controller mode), its broker id
HELLO = struct.Struct(">4sBBQQq")
REPORT = struct.Struct(">Q")  # slave -> master: the slave's CommitLog end (what it has, byte for byte)
FRAME = struct.Struct(">QQIB")  # master -> slave: offset, master's CommitLog end, body length, flags
LENGTH = struct.Struct(">I")
FLAG_BLANK = 1  # the body is the blank marker ending a segment; the rest of that segment is zeros
MAX_METADATA_BYTES = 64 * 1024 * 1024


class ConnectionKind(IntEnum):
    REPLICATE = 1
    METADATA = 2


class ProtocolError(Exception):
    """The peer does not speak this protocol, or speaks it with settings that cannot work (segment sizes)."""


@dataclass(frozen=True, slots=True)
class Hello:
    kind: ConnectionKind
    segment_size: int
    epoch: int = 0
    broker_id: int = -1

    def encode(self) -> bytes:
        return HELLO.pack(MAGIC, VERSION, self.kind, self.segment_size, self.epoch, self.broker_id)

    @classmethod
    def decode(cls, data: bytes) -> Hello:
        magic, version, kind, segment_size, epoch, broker_id = HELLO.unpack(data)
        if magic != MAGIC or version != VERSION:
            raise ProtocolError(f"not an OrbitMQ replication hello (magic {magic!r}, version {version})")
        try:
            return cls(ConnectionKind(kind), segment_size, epoch, broker_id)
        except ValueError as exc:
            raise ProtocolError(f"unknown replication connection kind {kind}") from exc


@dataclass(frozen=True, slots=True)
class FrameHeader:
    offset: int
    master_max_offset: int
    length: int
    flags: int

    def encode(self) -> bytes:
        return FRAME.pack(self.offset, self.master_max_offset, self.length, self.flags)

    @classmethod
    def decode(cls, data: bytes) -> FrameHeader:
        return cls(*FRAME.unpack(data))

    @property
    def blank(self) -> bool:
        return bool(self.flags & FLAG_BLANK)


def encode_metadata(payload: dict[str, Any]) -> bytes:
    body = json.dumps(payload, separators=(",", ":")).encode()
    return LENGTH.pack(len(body)) + body


def metadata_length(header: bytes) -> int:
    (length,) = LENGTH.unpack(header)
    if length > MAX_METADATA_BYTES:
        raise ProtocolError(f"metadata of {length} bytes exceeds the limit of {MAX_METADATA_BYTES}")
    return length
