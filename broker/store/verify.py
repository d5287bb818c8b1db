"""Record integrity on the read paths: which CommitLog ranges passed their CRC check in this process, and what a
record that fails it becomes (an error naming it, a count, a log line and a copy in the quarantine directory).

Appends mark what they write as verified (the CRC was computed from those very bytes), so live traffic is never
checked twice; records read from disk are checked once, at their first read.
"""

from __future__ import annotations

import bisect
import logging
import threading
import zlib
from dataclasses import dataclass
from pathlib import Path

from orbitmq.record import TRAILER

log = logging.getLogger("broker.store")


class CorruptRecordError(Exception):
    """The record at ``phys_offset`` fails its CRC (or does not frame): it is never served."""

    def __init__(self, phys_offset: int, size: int, why: str) -> None:
        super().__init__(f"commitlog record at offset {phys_offset} ({size} bytes) is corrupt: {why}")
        self.phys_offset = phys_offset
        self.size = size
        self.why = why


def record_crc_ok(buf: bytes | memoryview, pos: int, size: int) -> bool:
    """Whether the record of ``size`` bytes at ``pos`` matches the CRC32 of its trailer."""
    if size < TRAILER.size or pos + size > len(buf):
        return False
    end = pos + size - TRAILER.size
    return zlib.crc32(buf[pos:end]) == int.from_bytes(buf[end : end + TRAILER.size], "big")


class VerifiedRanges:
    """Merged, sorted CommitLog ranges ``[start, end)`` whose records are known good in this process."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._lock = threading.Lock()  # appends (the put thread) and reads (the loop, scans) meet here

    def covers(self, start: int, end: int) -> bool:
        with self._lock:
            i = bisect.bisect_right(self._starts, start) - 1
            return i >= 0 and self._ends[i] >= end

    def add(self, start: int, end: int) -> None:
        if end <= start:
            return
        with self._lock:
            starts, ends = self._starts, self._ends
            if ends and ends[-1] == start:  # the common case: an append right after the last one
                ends[-1] = end
                return
            i = bisect.bisect_left(starts, start)
            if i > 0 and ends[i - 1] >= start:  # overlaps or touches the range before
                i -= 1
                start = starts[i]
            j = i
            while j < len(starts) and starts[j] <= end:  # swallow the ranges it reaches
                end = max(end, ends[j])
                j += 1
            starts[i:j] = [start]
            ends[i:j] = [end]


@dataclass
class Quarantine:
    """Reports corrupt records once each: an error log line, a count, and a copy of the bytes for forensics."""

    directory: Path
    count: int = 0

    def __post_init__(self) -> None:
        self._seen: set[int] = set()
        self._lock = threading.Lock()

    def report(self, error: CorruptRecordError, data: bytes | memoryview | None) -> None:
        with self._lock:
            if error.phys_offset in self._seen:
                return
            self._seen.add(error.phys_offset)
            self.count += 1
        log.error(
            "corrupt commitlog record skipped",
            extra={"commitlog_offset": error.phys_offset, "size": error.size, "why": error.why},
        )
        if data is None:
            return
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            (self.directory / f"{error.phys_offset:020d}-{error.size}.bin").write_bytes(bytes(data))
        except OSError as exc:  # the report stands without the copy (a full or read-only disk)
            log.error("quarantine copy not written", extra={"commitlog_offset": error.phys_offset, "error": str(exc)})
