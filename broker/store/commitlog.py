"""CommitLog: every message of every topic appended to one log of fixed-size mmap'd segments.

Appends happen under one lock (the single writer); flushing happens outside it.
"""

from __future__ import annotations

from collections.abc import Iterator

from broker.store import codec
from broker.store.codec import RecordInfo, ScanStatus
from broker.store.config import CLEAN_START_CHECK_BYTES, MessageStoreConfig
from broker.store.mapped_file import MappedFile, MappedFileQueue
from broker.store.message import MessageExt
from broker.store.verify import CorruptRecordError, Quarantine, VerifiedRanges, record_crc_ok
from orbitmq.record import MESSAGE_MAGIC_CODE, OFF_STORE_TIMESTAMP


class ReplicaError(Exception):
    """Replicated bytes that do not continue this CommitLog (the connection is reset and resumes from its end)."""


class CommitLog:
    def __init__(self, config: MessageStoreConfig) -> None:
        self.config = config
        self.files = MappedFileQueue(config.commitlog_dir, config.mappedFileSizeCommitLog, config.warmMapedFileEnable)
        self.verified = VerifiedRanges()
        self.quarantine = Quarantine(config.root / "quarantine")

    def load(self) -> None:
        self.files.load()

    @property
    def min_offset(self) -> int:
        return self.files.min_offset

    @property
    def max_offset(self) -> int:
        return self.files.max_offset

    def set_end(self, offset: int, zero_tail: bool = True) -> None:
        """After recovery: ``offset`` is the end of the last valid record; everything after it is dropped.

        ``zero_tail=False`` after a clean stop, when nothing was ever written past ``offset``."""
        self.files.truncate(offset, zero=zero_tail)
        for mf in self.files.files:
            if mf.end_offset <= offset:
                mf.wrote_position = mf.flushed_position = mf.size

    def append_batch(self, batch: codec.AppendBatch) -> OSError | None:
        """Write the records of ``batch`` in order; the caller holds the put lock.

        Records are encoded per segment into one buffer and copied into the map once. On return the batch's
        per-message lists cover the messages gone through (a prefix of the batch); the error that stopped the
        rest, if any, is returned. The encoder refuses records larger than an empty segment's room.
        """
        limit = self.files.file_size - codec.BLANK.size
        i, n = 0, len(batch.msgs)
        try:
            while i < n:
                mf = self.files.get_last_or_create()
                start = mf.wrote_position
                data, i = codec.encode_run(batch, i, mf.start_offset + start, limit - start)
                if not data and start == 0 and i < n:
                    raise codec.RecordError(f"message {i} does not fit an empty segment")
                pos = start + len(data)
                if data:
                    mf.view[start:pos] = data
                    mf.wrote_position = pos
                    self.verified.add(mf.start_offset + start, mf.start_offset + pos)
                    self.files.warm_ahead(mf)
                if i < n:
                    # The next record does not fit: leave the blank marker, continue in the next segment.
                    codec.write_blank(mf.view, pos, mf.size - pos)
                    mf.wrote_position = mf.size
        except OSError as exc:
            return exc
        return None

    def flush(self) -> int:
        return self.files.flush()

    def read(self, phys_offset: int, size: int | None = None) -> MessageExt | None:
        if phys_offset < self.min_offset or phys_offset >= self.max_offset:
            return None
        mf = self.files.find(phys_offset)
        if mf is None:
            return None
        pos = phys_offset - mf.start_offset
        info = codec.check_record(mf.view, pos, mf.wrote_position) if size is None else None
        if info is not None and info.status is not ScanStatus.OK:
            return None
        try:
            if size is not None:
                self.check(phys_offset, size, mf.view, pos)
            return codec.decode(mf.view, pos)
        except (codec.RecordError, IndexError, UnicodeDecodeError, ValueError):
            # ValueError: retention closed this segment while we were reading it; the record is gone
            return None

    def check(self, phys_offset: int, size: int, buf: bytes | memoryview, pos: int) -> None:
        """Raise ``CorruptRecordError`` (reported once) unless the record of ``size`` bytes at ``pos`` of ``buf``
        (CommitLog offset ``phys_offset``) is known good or passes its CRC now."""
        end = phys_offset + size
        if size > 0 and self.verified.covers(phys_offset, end):
            return
        if size <= 0 or not record_crc_ok(buf, pos, size):
            error = CorruptRecordError(phys_offset, size, "CRC mismatch" if size > 0 else "lost in recovery")
            self.quarantine.report(error, buf[pos : pos + size] if size > 0 else None)
            raise error
        self.verified.add(phys_offset, end)

    def read_raw(self, phys_offset: int, length: int) -> bytes | None:
        """``length`` stored bytes from ``phys_offset`` (whole records of one segment), or None if gone."""
        if phys_offset < self.min_offset or phys_offset + length > self.max_offset:
            return None
        mf = self.files.find(phys_offset)
        if mf is None or phys_offset + length > mf.end_offset:
            return None
        pos = phys_offset - mf.start_offset
        try:
            return bytes(mf.view[pos : pos + length])
        except ValueError:  # retention closed this segment while we were reading it
            return None

    # ------------------------------------------------------------------ replication (broker/ha)
    def read_replica_chunk(self, offset: int, max_bytes: int) -> tuple[bytes, bool] | None:
        """Whole records from ``offset`` (a record boundary) for a slave, at most ``max_bytes`` unless the first
        record alone is larger; ``(marker, True)`` when ``offset`` holds the blank marker that ends its segment.

        None when nothing is written there yet or the segment is gone; ReplicaError when ``offset`` is no record."""
        mf = self.files.find(offset)
        if mf is None:
            return None
        pos = end = offset - mf.start_offset
        limit = mf.wrote_position
        try:
            view = mf.view
            while end + codec.BLANK.size <= limit:
                size, magic = codec.BLANK.unpack_from(view, end)
                if magic == codec.BLANK_MAGIC_CODE:
                    if end == pos:
                        return bytes(view[pos : pos + codec.BLANK.size]), True
                    break
                if magic != codec.MESSAGE_MAGIC_CODE or size < codec.MIN_RECORD_SIZE:
                    raise ReplicaError(f"no record at commitlog offset {mf.start_offset + end}")
                if end + size > limit or (end > pos and end + size - pos > max_bytes):
                    break
                end += size
            return (bytes(view[pos:end]), False) if end > pos else None
        except ValueError:  # retention closed this segment while we were reading it
            return None

    def append_replica(self, offset: int, data: bytes, blank: bool) -> None:
        """Slave: write ``data`` (whole records as the master stored them) at ``offset``, which must be the end.

        ``blank``: ``data`` is the master's end-of-segment marker; the rest of the segment stays zeros, as there."""
        if self.files.files and offset != self.max_offset:
            raise ReplicaError(f"replica data at offset {offset}, but the commitlog ends at {self.max_offset}")
        if not self.files.files and offset % self.files.file_size:
            raise ReplicaError(f"an empty commitlog starts at a segment boundary, not at {offset}")
        mf = self.files.get_last_or_create(offset)
        pos = offset - mf.start_offset
        if pos + len(data) > mf.size:
            raise ReplicaError(f"replica data at offset {offset} crosses the segment end {mf.end_offset}")
        mf.view[pos : pos + len(data)] = data
        mf.wrote_position = mf.size if blank else pos + len(data)

    def store_timestamp(self, phys_offset: int) -> int:
        mf = self.files.find(phys_offset)
        if mf is None:
            return -1
        return int.from_bytes(mf.view[phys_offset - mf.start_offset + OFF_STORE_TIMESTAMP :][:8], "big")

    def scan(self, start: int) -> Iterator[RecordInfo]:
        """Yield verified records from ``start`` (a record boundary) until the end.

        A bad record yields a CORRUPT item at its offset whose ``resume_at`` is the next valid record (magic code,
        sane size and CRC), where the scan goes on; with no valid record after it (a torn tail) ``resume_at`` is
        -1 and the scan stops. The last item has status END or CORRUPT, ``physical_offset`` = where data stops.
        """
        offset = max(start, self.min_offset)
        while True:
            mf = self.files.find(offset)
            if mf is None:
                yield RecordInfo(ScanStatus.END, 0, physical_offset=offset)
                return
            pos = offset - mf.start_offset
            info = codec.check_record(mf.view, pos, mf.size)
            if info.status is ScanStatus.OK:
                yield info
                offset += info.size
            elif info.status is ScanStatus.BLANK:
                offset = mf.end_offset
            elif info.status is ScanStatus.END and not self._valid_after(mf, pos):
                yield RecordInfo(info.status, 0, physical_offset=offset)
                return
            else:  # damaged, or zeros with records after them (bytes overwritten): look for the next record
                resume = self.next_valid(offset)
                yield RecordInfo(ScanStatus.CORRUPT, 0, physical_offset=offset, resume_at=resume)
                if resume < 0:
                    return
                offset = resume

    def _valid_after(self, mf: MappedFile, pos: int) -> bool:
        """Whether zeros at ``pos`` of ``mf`` hide later records (an overwritten stretch, not the end of data).

        Looked for within ``CLEAN_START_CHECK_BYTES`` and at the next segment's start: the end of data is
        followed by zeros up to the segment end, and reading a whole empty 1 GiB segment would slow every start.
        """
        magic = MESSAGE_MAGIC_CODE.to_bytes(4, "big")
        limit = min(mf.size, pos + CLEAN_START_CHECK_BYTES)
        found = mf.mm.find(magic, pos + 5, limit)
        while found >= 0:
            if codec.check_record(mf.view, found - 4, mf.size).status is ScanStatus.OK:
                return True
            found = mf.mm.find(magic, found + 1, limit)
        after = self.files.find(mf.end_offset)
        return after is not None and codec.check_record(after.view, 0, after.size).status is ScanStatus.OK

    def next_valid(self, offset: int) -> int:
        """The CommitLog offset of the first valid record (or blank marker) after ``offset``, -1 if none."""
        magic = MESSAGE_MAGIC_CODE.to_bytes(4, "big")
        mf = self.files.find(offset)
        while mf is not None:
            pos = offset - mf.start_offset
            found = mf.mm.find(magic, pos + 5)
            while found >= 0:
                candidate = found - 4
                if codec.check_record(mf.view, candidate, mf.size).status is ScanStatus.OK:
                    return mf.start_offset + candidate
                found = mf.mm.find(magic, found + 1)
            # records never span segments: the next segment starts with a record when it holds any
            offset = mf.end_offset
            mf = self.files.find(offset)
            if mf is not None and codec.check_record(mf.view, 0, mf.size).status is ScanStatus.OK:
                return offset
        return -1

    def shutdown(self) -> None:
        self.files.shutdown()
