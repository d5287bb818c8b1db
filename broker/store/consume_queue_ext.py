"""ConsumeQueueExt: per (topic, queue id) fixed-size units holding a message's filter bitmap (Bloom bits).

Unit N describes ConsumeQueue entry N: commitlog offset + 1 (8 bytes; 0 = no unit), then the bitmap. A unit
is trusted only when its commitlog offset equals the entry's, so a unit left over from before a crash can
never vouch for a different message; a missing or stale unit just means "evaluate the message".
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import NamedTuple

from broker.store.mapped_file import MappedFile, segment_name

_PHYS = struct.Struct(">q")


class CqExtUnit(NamedTuple):
    commitlog_offset: int
    bitmap: bytes


class ConsumeQueueExt:
    def __init__(self, root: Path, topic: str, queue_id: int, bitmap_bytes: int, units_per_file: int) -> None:
        # One directory per bitmap size: units of another geometry are never read with the wrong stride.
        self.dir = root / f"bits{bitmap_bytes * 8}" / topic / str(queue_id)
        self.bitmap_bytes = bitmap_bytes
        self.unit_size = (_PHYS.size + bitmap_bytes + 7) // 8 * 8
        self.units_per_file = units_per_file
        self.file_size = self.unit_size * units_per_file
        self._files: dict[int, MappedFile] = {}  # file start byte offset -> file

    def load(self) -> None:
        if not self.dir.exists():
            return
        for p in sorted(self.dir.iterdir()):
            if p.name.isdigit() and len(p.name) == 20:
                mf = MappedFile(p, self.file_size)
                mf.wrote_position = mf.flushed_position = self.file_size
                self._files[mf.start_offset] = mf

    def _file(self, offset: int, create: bool) -> tuple[MappedFile | None, int]:
        pos = offset * self.unit_size
        start = pos - pos % self.file_size
        mf = self._files.get(start)
        if mf is None and create:
            self.dir.mkdir(parents=True, exist_ok=True)
            mf = MappedFile(self.dir / segment_name(start), self.file_size)
            mf.wrote_position = self.file_size
            self._files[start] = mf
        return mf, pos - start

    def put(self, offset: int, commitlog_offset: int, bitmap: bytes | bytearray) -> None:
        mf, rel = self._file(offset, create=True)
        assert mf is not None
        view = mf.view
        view[rel + _PHYS.size : rel + _PHYS.size + self.bitmap_bytes] = bytes(bitmap[: self.bitmap_bytes]).ljust(
            self.bitmap_bytes, b"\x00"
        )
        # The offset goes in last: a reader never pairs a valid offset with a half-written bitmap.
        _PHYS.pack_into(view, rel, commitlog_offset + 1)
        mf.flushed_position = 0

    def get(self, offset: int, commitlog_offset: int) -> CqExtUnit | None:
        """The unit of entry ``offset`` if it describes the message at ``commitlog_offset``."""
        mf, rel = self._file(offset, create=False)
        if mf is None:
            return None
        view = mf.view
        if _PHYS.unpack_from(view, rel)[0] != commitlog_offset + 1:
            return None
        return CqExtUnit(commitlog_offset, bytes(view[rel + _PHYS.size : rel + _PHYS.size + self.bitmap_bytes]))

    def delete_before(self, min_offset: int) -> None:
        """Drop files whose units all describe entries below ``min_offset`` (retention)."""
        limit = min_offset * self.unit_size
        for start in [s for s in self._files if s + self.file_size <= limit]:
            self._files.pop(start).destroy()

    def flush(self) -> None:
        for mf in list(self._files.values()):
            if mf.flushed_position < mf.wrote_position:
                mf.flush()

    def shutdown(self) -> None:
        for mf in self._files.values():
            mf.close()
        self._files = {}
