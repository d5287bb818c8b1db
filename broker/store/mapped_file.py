"""Fixed-size memory-mapped segment files (``MappedFile``) and their ordered queue (``MappedFileQueue``).

Segments are named by their 20-digit start offset; the next one is allocated ahead of need, and the pages a writer
is about to fill are read into the page cache a window ahead of it.
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)
WARM_CHUNK = 1024 * 1024  # bytes read per call when warming a segment
# Bytes kept warm ahead of the write position: the next window is read once the writer is half-way into this one.
# Warming a whole 1 GiB segment at once cost a core for about a second right after a fresh broker's first append.
WARM_WINDOW = 64 * 1024 * 1024


def segment_name(offset: int) -> str:
    return f"{offset:020d}"


class DiskFullError(OSError):
    """No room for a new segment: writing through its map would crash the process (SIGBUS), so it is not made."""


class MappedFile:
    """One segment: a file of ``size`` bytes mapped shared; writes go through the map, flushes use fdatasync."""

    def __init__(self, path: Path, size: int) -> None:
        self.path = path
        self.size = size
        self.start_offset = int(path.name)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self.fd).st_size != size:
            # A new segment, or one truncated by a crash/operator: extend to full size with zeros, its blocks
            # reserved now. A sparse file on a full disk maps fine and kills the process at the first write.
            self._reserve()
        self.mm = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.view = memoryview(self.mm)
        self.wrote_position = 0
        self.flushed_position = 0
        self.warmed_to = 0  # bytes from the start that warm() has read into the page cache
        self._closed = False

    def _reserve(self) -> None:
        try:
            os.posix_fallocate(self.fd, 0, self.size)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                os.close(self.fd)
                self.path.unlink(missing_ok=True)
                raise DiskFullError(
                    exc.errno, f"no room for a {self.size}-byte segment on the disk of {self.path.parent}"
                ) from exc
            # a file system without fallocate (EOPNOTSUPP, EINVAL): the free-space check is the guard there
            log.warning("segment preallocation unsupported", extra={"path": str(self.path), "error": str(exc)})
            os.ftruncate(self.fd, self.size)

    @property
    def end_offset(self) -> int:
        return self.start_offset + self.size

    def remaining(self) -> int:
        return self.size - self.wrote_position

    def is_full(self) -> bool:
        return self.wrote_position >= self.size

    def warm(self, upto: int | None = None, start: int = 0) -> None:
        """Allocate the segment's disk blocks and read its pages from ``start`` (or where warming stopped, if later)
        up to ``upto`` (the end by default) into the page cache, ahead of the writer.

        posix_fallocate reserves the blocks; reading the file once brings its pages into the cache without
        dirtying them, so pre-touching never starts a writeback storm and the writer's first touch of a page is a
        minor fault. Both calls release the GIL: the broker's threads run while the kernel does the work (faulting
        the pages in through the map instead, ``madvise(MADV_POPULATE_READ)``, holds the GIL for each call, and
        in a fresh broker that cost the event loop 27% of its GIL time for seconds). Without it, each first write
        to a page faults it in on the writer's thread: 4.5 ms of CPU per 2 MB append on ext4, 0.34 warm
        (docs/storage.md).
        """
        end = self.size if upto is None else min(upto, self.size)
        begin = max(start, self.warmed_to)
        if begin >= end:
            return
        if self.warmed_to == 0:
            try:
                os.posix_fallocate(self.fd, 0, self.size)
            except OSError as exc:  # e.g. a filesystem without fallocate: writes still work, only slower at first
                log.warning("segment preallocation failed", extra={"path": str(self.path), "error": str(exc)})
        buf = bytearray(min(WARM_CHUNK, end - begin))
        try:
            for pos in range(begin, end, len(buf)):
                os.preadv(self.fd, [buf], pos)
        except OSError as exc:  # only a head start is lost: the writer faults the pages in itself
            log.warning("segment warm-up failed", extra={"path": str(self.path), "error": str(exc)})
        self.warmed_to = max(self.warmed_to, end)

    def flush(self) -> int:
        """Make everything written so far durable; runs outside the append lock (fdatasync drops the GIL)."""
        target = self.wrote_position
        if target > self.flushed_position and not self._closed:
            os.fdatasync(self.fd)
            self.flushed_position = target
        return self.flushed_position

    def mtime(self) -> float:
        return os.stat(self.path).st_mtime

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.view.release()
            self.mm.close()
        except BufferError:
            # A reader still holds a slice of this segment; the map goes away when the last slice does.
            log.warning("segment still in use at close", extra={"path": str(self.path)})
        os.close(self.fd)

    def destroy(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class MappedFileQueue:
    """The ordered segments of one log; the last one is written, a spare is prepared in the background."""

    def __init__(self, directory: Path, file_size: int, warm: bool = False, warm_window: int = WARM_WINDOW) -> None:
        self.dir = directory
        self.file_size = file_size
        self.warm_enabled = warm
        self.warm_window = warm_window
        self.files: list[MappedFile] = []
        self._spare: MappedFile | None = None
        self._spare_lock = threading.Lock()
        self._allocator: threading.Thread | None = None  # prepares the next segment (and its first window)
        self._warmer: threading.Thread | None = None  # warms the next window of the segment being written

    def load(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        names = sorted(p for p in self.dir.iterdir() if p.name.isdigit() and len(p.name) == 20)
        self.files = [MappedFile(p, self.file_size) for p in names]
        for mf in self.files:
            # Until recovery says otherwise, every loaded segment counts as fully written and flushed.
            mf.wrote_position = mf.flushed_position = self.file_size

    @property
    def min_offset(self) -> int:
        return self.files[0].start_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        if not self.files:
            return 0
        last = self.files[-1]
        return last.start_offset + last.wrote_position

    def last(self) -> MappedFile | None:
        return self.files[-1] if self.files else None

    def segment_start(self, offset: int) -> int:
        """The start offset of the segment that holds (or would hold) ``offset``."""
        return offset - offset % self.file_size

    def find(self, offset: int) -> MappedFile | None:
        if not self.files or offset < self.files[0].start_offset:
            return None
        idx = (offset - self.files[0].start_offset) // self.file_size
        if 0 <= idx < len(self.files) and self.files[idx].start_offset <= offset < self.files[idx].end_offset:
            return self.files[idx]
        for mf in self.files:  # segments are contiguous; this only runs if a gap was left by an operator
            if mf.start_offset <= offset < mf.end_offset:
                return mf
        return None

    def get_last_or_create(self, start_offset: int = 0) -> MappedFile:
        last = self.last()
        if last is not None and not last.is_full():
            return last
        offset = last.end_offset if last is not None else start_offset - start_offset % self.file_size
        if self._allocator is not None:
            self._allocator.join()  # the spare for this offset is normally long ready; never map a file twice
        mf = self._take_spare(offset) or MappedFile(self.dir / segment_name(offset), self.file_size)
        self.files.append(mf)
        self._prepare_spare(offset + self.file_size)
        return mf

    def prepare_first(self, start_offset: int = 0) -> None:
        """On an empty log, prepare (and warm) the first segment in the background as every later one is, so a
        new store's first segment is not written page fault by page fault; the first append waits for it."""
        if not self.files and self._allocator is None:
            self._prepare_spare(start_offset - start_offset % self.file_size)

    def _take_spare(self, offset: int) -> MappedFile | None:
        with self._spare_lock:
            spare, self._spare = self._spare, None
        if spare is not None and spare.start_offset == offset:
            return spare
        if spare is not None:
            in_use = any(f.path == spare.path for f in self.files)
            spare.close() if in_use else spare.destroy()
        return None

    def _prepare_spare(self, offset: int) -> None:
        if not self.warm_enabled:
            return

        def allocate() -> None:
            try:
                mf = MappedFile(self.dir / segment_name(offset), self.file_size)
            except DiskFullError as exc:  # no spare: the writer meets the same error when it needs the segment
                log.warning("next segment not prepared", extra={"error": str(exc)})
                return
            mf.warm(self.warm_window)
            with self._spare_lock:
                if self._spare is None:
                    self._spare = mf
                    return
            mf.close()

        self._allocator = threading.Thread(target=allocate, name="AllocateMappedFileService", daemon=True)
        self._allocator.start()

    def warm_ahead(self, mf: MappedFile) -> None:
        """After the writer appended to ``mf`` (under its lock): once it is half-way into the warm window, a
        background thread warms the next one, from the write position on. At most one runs; a cheap check
        otherwise, made once per append."""
        if not self.warm_enabled or mf.warmed_to >= mf.size or mf.wrote_position + self.warm_window // 2 < mf.warmed_to:
            return
        warmer = self._warmer
        if warmer is not None and warmer.is_alive():
            return
        self._warmer = threading.Thread(
            target=mf.warm,
            args=(mf.wrote_position + self.warm_window, mf.wrote_position),
            name="AllocateMappedFileService",
            daemon=True,
        )
        self._warmer.start()

    def truncate(self, offset: int, zero: bool = True) -> None:
        """Drop everything at or after ``offset``: zero the tail of its segment, delete later segments.

        ``zero=False`` is for a tail known to be zeros already (after a clean stop): zeroing the rest of a
        1 GiB segment would dirty every page of it and make each restart cost a segment's worth of writes.
        """
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.end_offset <= offset:
                keep.append(mf)
            elif mf.start_offset <= offset:
                pos = offset - mf.start_offset
                if zero:
                    mf.view[pos:] = bytes(mf.size - pos)
                    os.fdatasync(mf.fd)
                mf.wrote_position = mf.flushed_position = pos
                keep.append(mf)
            else:
                mf.destroy()
        self.files = keep

    def delete_first(self, predicate: Callable[[MappedFile], bool], keep_last: bool = True) -> list[MappedFile]:
        """Delete leading segments while ``predicate`` holds; never the segment being written."""
        deleted: list[MappedFile] = []
        limit = len(self.files) - 1 if keep_last else len(self.files)
        while len(deleted) < limit and predicate(self.files[len(deleted)]):
            deleted.append(self.files[len(deleted)])
        for mf in deleted:
            mf.destroy()
        self.files = self.files[len(deleted) :]
        return deleted

    def unflushed_bytes(self) -> int:
        """Bytes written to the page cache and not yet flushed to disk (rocketmq_storage_flush_behind_bytes)."""
        return sum(max(0, mf.wrote_position - mf.flushed_position) for mf in list(self.files))

    def flush(self) -> int:
        """Flush every segment with unflushed bytes; returns the flushed end offset."""
        for mf in list(self.files):
            if mf.flushed_position < mf.wrote_position:
                mf.flush()
        last = self.last()
        return last.start_offset + last.flushed_position if last else 0

    def shutdown(self) -> None:
        for thread in (self._allocator, self._warmer):
            if thread is not None:
                thread.join(timeout=30)
        with self._spare_lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            spare.destroy()
        for mf in self.files:
            mf.close()
        self.files = []

    def wait_spare_ready(self, timeout: float = 5.0) -> None:
        """For tests and benchmarks: wait until the background allocation and warming finished."""
        deadline = time.monotonic() + timeout
        for thread in (self._allocator, self._warmer):
            while thread is not None and thread.is_alive() and time.monotonic() < deadline:
                thread.join(timeout=0.05)
