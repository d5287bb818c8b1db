"""Persistence of pop state: an append-only journal of state records plus a snapshot written at compaction.

Records are written with ``os.write`` before a request is answered (so they survive SIGKILL); a thread fsyncs.
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from pathlib import Path
from typing import Any

from broker.pop.state import PopState, Record
from orbitmq.logging import get_logger

log = get_logger("broker.pop.journal")

SNAPSHOT_NAME = "snapshot.json"
JOURNAL_PREFIX = "journal."


def _line(rec: Record) -> bytes:
    payload = json.dumps(rec, separators=(",", ":")).encode("utf-8")
    return b"%08x %s\n" % (zlib.crc32(payload), payload)


def _parse(line: bytes) -> Record | None:
    """One journal line, or None when it is torn or corrupt (a crash mid-write)."""
    if len(line) < 10 or line[8:9] != b" ":
        return None
    payload = line[9:]
    try:
        if int(line[:8], 16) != zlib.crc32(payload):
            return None
        rec = json.loads(payload)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) else None


class PopJournal:
    """Owns ``<dir>/snapshot.json`` and ``<dir>/journal.<generation>``; one writer (the broker loop)."""

    def __init__(self, directory: Path, *, fsync_interval_ms: int = 200, compact_bytes: int = 8 << 20) -> None:
        self.directory = directory
        self.fsync_interval_ms = fsync_interval_ms
        self.compact_bytes = compact_bytes
        self.generation = 0
        self.bytes_written = 0
        self.records_replayed = 0
        self._fd: int | None = None
        self._dirty = False
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- recovery ------------------------------------------------------------------------------------
    def _journal_path(self, generation: int) -> Path:
        return self.directory / f"{JOURNAL_PREFIX}{generation}"

    def recover(self, state: PopState) -> None:
        """Load the snapshot, replay its journal (truncating a torn tail), open the journal for appends."""
        self.directory.mkdir(parents=True, exist_ok=True)
        snap_path = self.directory / SNAPSHOT_NAME
        if snap_path.exists():
            snap: dict[str, Any] = json.loads(snap_path.read_text(encoding="utf-8"))
            self.generation = int(snap["gen"])
            state.load_snapshot(snap["state"])
        path = self._journal_path(self.generation)
        good = 0
        if path.exists():
            data = path.read_bytes()
            pos = 0
            while pos < len(data):
                end = data.find(b"\n", pos)
                if end < 0:
                    break
                rec = _parse(data[pos:end])
                if rec is None:
                    break
                state.apply(rec)
                self.records_replayed += 1
                pos = end + 1
            good = pos
            if good < len(data):
                log.warning("pop journal torn tail truncated", path=str(path), kept=good, dropped=len(data) - good)
        self._remove_stale()
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        os.ftruncate(self._fd, good)
        os.lseek(self._fd, good, os.SEEK_SET)
        self.bytes_written = good

    def _remove_stale(self) -> None:
        for p in self.directory.glob(f"{JOURNAL_PREFIX}*"):
            suffix = p.name[len(JOURNAL_PREFIX) :]
            if suffix.isdigit() and int(suffix) != self.generation:
                p.unlink()
        for p in self.directory.glob("*.tmp"):
            p.unlink()

    # ---- writing -------------------------------------------------------------------------------------
    def append(self, rec: Record) -> None:
        line = _line(rec)
        with self._lock:
            if self._fd is None:
                raise RuntimeError("pop journal is not open")
            os.write(self._fd, line)
            self.bytes_written += len(line)
            self._dirty = True

    def sync(self) -> None:
        with self._lock:
            if self._fd is None or not self._dirty:
                return
            # fsync a duplicate outside the lock so appends from the loop never wait for the disk.
            fd = os.dup(self._fd)
            self._dirty = False
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    @property
    def opened(self) -> bool:
        """``recover`` ran: the state in memory is the one on disk, and may be written back."""
        return self._fd is not None

    def needs_compaction(self) -> bool:
        return self.bytes_written >= self.compact_bytes

    def compact(self, state: PopState) -> None:
        """Write the whole state as a new snapshot generation and start an empty journal for it.

        Caller guarantees no state change runs concurrently (the broker loop is the only writer).
        """
        gen = self.generation + 1
        tmp = self.directory / f"{SNAPSHOT_NAME}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"gen": gen, "state": state.to_snapshot()}, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        new_fd = os.open(self._journal_path(gen), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.replace(tmp, self.directory / SNAPSHOT_NAME)
        self._fsync_dir()
        with self._lock:
            old_fd, self._fd = self._fd, new_fd
            old_gen, self.generation = self.generation, gen
            self.bytes_written = 0
            self._dirty = False
        if old_fd is not None:
            os.close(old_fd)
        self._journal_path(old_gen).unlink(missing_ok=True)

    def _fsync_dir(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    # ---- lifecycle -----------------------------------------------------------------------------------
    def start_sync_thread(self) -> None:
        self._thread = threading.Thread(target=self._run, name="PopJournalFlush", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.fsync_interval_ms / 1000):
            try:
                self.sync()
            except OSError:
                log.exception("pop journal fsync failed")

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.sync()
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
