"""ConsumeQueue: per (topic, queue id) array of 20-byte entries (commitlog offset, size, tag hash code).

Logical offset N lives at byte N*20 across the queue's segment files, so reads are array lookups.
"""

from __future__ import annotations

import struct
from pathlib import Path

from broker.store.config import CQ_UNIT_SIZE
from broker.store.mapped_file import MappedFile, MappedFileQueue

ENTRY = struct.Struct(">qiq")
assert ENTRY.size == CQ_UNIT_SIZE


class ConsumeQueue:
    def __init__(self, root: Path, topic: str, queue_id: int, file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size - file_size % CQ_UNIT_SIZE
        self.files = MappedFileQueue(root / topic / str(queue_id), self.file_size)
        self.min_logic_offset = 0
        self.max_phys_offset = -1  # end (offset + size) of the last dispatched record

    # -- loading -----------------------------------------------------------------------------------
    def load(self) -> None:
        self.files.load()
        last = self.files.last()
        if last is not None:
            last.wrote_position = last.flushed_position = self._written_bytes(last.view)
            if last.wrote_position == 0 and len(self.files.files) > 1:
                prev = self.files.files[-2]
                prev.wrote_position = prev.flushed_position = self._written_bytes(prev.view)
        first = self.files.files[0] if self.files.files else None
        self.min_logic_offset = first.start_offset // CQ_UNIT_SIZE if first else 0
        tail = self.get(self.max_offset - 1) if self.max_offset > self.min_logic_offset else None
        self.max_phys_offset = tail[0] + tail[1] if tail else -1

    def _written_bytes(self, view: memoryview) -> int:
        """Entries are written in order; binary search for the first empty (size 0) entry."""
        lo, hi = 0, len(view) // CQ_UNIT_SIZE
        while lo < hi:
            mid = (lo + hi) // 2
            if ENTRY.unpack_from(view, mid * CQ_UNIT_SIZE)[1] > 0:
                lo = mid + 1
            else:
                hi = mid
        return lo * CQ_UNIT_SIZE

    # -- offsets -----------------------------------------------------------------------------------
    @property
    def max_offset(self) -> int:
        """The next logical offset to be written (RocketMQ's maxOffsetInQueue)."""
        return self.files.max_offset // CQ_UNIT_SIZE

    @property
    def min_offset(self) -> int:
        return max(self.min_logic_offset, self.files.min_offset // CQ_UNIT_SIZE)

    # -- write -------------------------------------------------------------------------------------
    def put(self, queue_offset: int, phys_offset: int, size: int, tags_code: int) -> None:
        pos = queue_offset * CQ_UNIT_SIZE
        if not self.files.files:
            self.min_logic_offset = queue_offset
        mf = self.files.get_last_or_create(pos)
        if pos < mf.start_offset + mf.wrote_position:
            existing = self.files.find(pos)
            if existing is None:
                return
            mf = existing
        elif pos >= mf.end_offset:
            return  # a gap: cannot happen with in-order dispatch
        rel = pos - mf.start_offset
        ENTRY.pack_into(mf.view, rel, phys_offset, size, tags_code)
        if rel + CQ_UNIT_SIZE > mf.wrote_position:
            mf.wrote_position = rel + CQ_UNIT_SIZE
        end = phys_offset + size
        if end > self.max_phys_offset:
            self.max_phys_offset = end

    def fill_holes(self, queue_offset: int, phys_offset: int) -> None:
        """Recovery lost the records of this queue between its end and ``queue_offset`` in damaged bytes at
        ``phys_offset``: their entries point there with size 0, which reads answer as corrupt."""
        if self.files.files:
            for offset in range(self.max_offset, queue_offset):
                self.put(offset, phys_offset, 0, 0)

    def put_batch(self, queue_offset: int, entries: list[bytes]) -> None:
        """Append consecutive packed entries from ``queue_offset``, with one copy when they fit the current segment."""
        pos = queue_offset * CQ_UNIT_SIZE
        last = self.files.last()
        if (
            last is None
            or pos != last.start_offset + last.wrote_position
            or last.wrote_position + len(entries) * CQ_UNIT_SIZE > last.size
        ):
            for i, packed in enumerate(entries):
                self.put(queue_offset + i, *ENTRY.unpack(packed))
            return
        rel = last.wrote_position
        end = rel + len(entries) * CQ_UNIT_SIZE
        last.view[rel:end] = b"".join(entries)
        last.wrote_position = end
        phys, size, _ = ENTRY.unpack(entries[-1])
        if phys + size > self.max_phys_offset:
            self.max_phys_offset = phys + size

    # -- read --------------------------------------------------------------------------------------
    def get(self, offset: int) -> tuple[int, int, int] | None:
        if offset < self.min_offset or offset >= self.max_offset:
            return None
        pos = offset * CQ_UNIT_SIZE
        mf = self.files.find(pos)
        if mf is None:
            return None
        phys, size, tags = ENTRY.unpack_from(mf.view, pos - mf.start_offset)
        return phys, size, tags

    def entries(self, offset: int, max_count: int) -> list[tuple[int, int, int]]:
        """Up to ``max_count`` entries from ``offset``, never crossing a segment boundary in one call."""
        end = min(self.max_offset, offset + max_count)
        if offset < self.min_offset or offset >= end:
            return []
        pos = offset * CQ_UNIT_SIZE
        mf = self.files.find(pos)
        if mf is None:
            return []
        rel = pos - mf.start_offset
        stop = min(rel + (end - offset) * CQ_UNIT_SIZE, mf.wrote_position)
        return list(ENTRY.iter_unpack(mf.view[rel:stop]))

    # -- recovery and retention ---------------------------------------------------------------------
    def truncate_from_phys(self, phys_offset: int) -> None:
        """Remove entries pointing at or beyond ``phys_offset`` (they will be re-dispatched or are gone)."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            entry = self.get(mid)
            if entry is not None and entry[0] < phys_offset:
                lo = mid + 1
            else:
                hi = mid
        if lo < self.max_offset:
            self.files.truncate(lo * CQ_UNIT_SIZE)
        tail = self.get(self.max_offset - 1) if self.max_offset > self.min_offset else None
        self.max_phys_offset = tail[0] + tail[1] if tail else -1

    def delete_expired(self, min_commitlog_offset: int) -> None:
        """Drop segments wholly before ``min_commitlog_offset`` and move the min offset up past dead entries."""

        def dead(mf: MappedFile) -> bool:
            if mf.wrote_position < CQ_UNIT_SIZE:
                return False
            phys = ENTRY.unpack_from(mf.view, mf.wrote_position - CQ_UNIT_SIZE)[0]
            return bool(phys < min_commitlog_offset)

        self.files.delete_first(dead, keep_last=True)
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:  # entries are in commitlog order: binary search the first live one
            mid = (lo + hi) // 2
            entry = self.get(mid)
            if entry is not None and entry[0] < min_commitlog_offset:
                lo = mid + 1
            else:
                hi = mid
        self.min_logic_offset = lo

    def flush(self) -> None:
        self.files.flush()

    def destroy(self) -> None:
        for mf in list(self.files.files):
            mf.destroy()
        self.files.files = []

    def shutdown(self) -> None:
        self.files.shutdown()
