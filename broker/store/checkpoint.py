"""StoreCheckpoint: the offsets below which commitlog, consume queues and index are known durable.

Written atomically (tmp + fsync + rename) with a CRC, so a torn checkpoint is never believed.
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

_FORMAT = struct.Struct(">Iqqqq")  # magic, commitlog, consume queue, index, timestamp (ms)
_CRC = struct.Struct(">I")
MAGIC = 0x0B17C4EC


@dataclass
class StoreCheckpoint:
    commitlog_offset: int = 0  # record boundary; everything before it is flushed
    consume_queue_offset: int = 0  # record boundary; consume queue entries before it are flushed
    index_offset: int = 0  # record boundary; index entries before it are flushed
    timestamp: int = 0

    def save(self, path: Path) -> None:
        data = _FORMAT.pack(MAGIC, self.commitlog_offset, self.consume_queue_offset, self.index_offset, self.timestamp)
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            f.write(data + _CRC.pack(zlib.crc32(data)))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path) -> StoreCheckpoint | None:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        if len(raw) != _FORMAT.size + _CRC.size:
            return None
        data = raw[: _FORMAT.size]
        if _CRC.unpack(raw[_FORMAT.size :])[0] != zlib.crc32(data):
            return None
        magic, cl, cq, idx, ts = _FORMAT.unpack(data)
        return cls(cl, cq, idx, ts) if magic == MAGIC else None
