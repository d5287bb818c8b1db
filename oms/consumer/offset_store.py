"""Broadcast offsets kept on the consumer's disk, as RocketMQ's ``LocalFileOffsetStore`` keeps them.

``<dir>/<instance name>/<group>/offsets.json``, replaced atomically (temp file, fsync, rename); the previous
version is kept as ``offsets.json.bak`` and read when the main file is damaged.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from oms.queue import MessageQueue

log = logging.getLogger("oms.consumer.offsets")

FILE_NAME = "offsets.json"
FORMAT_VERSION = 1


class OffsetStoreError(OSError):
    """The offset file could not be written (the consumer keeps running; the next persist tries again)."""


class LocalFileOffsetStore:
    """Thread-safe: the loop updates offsets, persisting may run on another thread."""

    def __init__(self, directory: Path, instance_name: str, group: str) -> None:
        self.path = directory / instance_name / group / FILE_NAME
        self.group = group
        self._offsets: dict[MessageQueue, int] = {}
        self._dirty = False
        self._lock = threading.Lock()

    def load(self) -> int:
        """Read the file (or its backup); returns how many queue offsets were found."""
        for candidate in (self.path, self.path.with_name(FILE_NAME + ".bak")):
            try:
                raw = candidate.read_text("utf-8")
            except FileNotFoundError:
                continue
            except OSError as exc:
                log.warning("cannot read %s: %s", candidate, exc)
                continue
            try:
                offsets = self._parse(json.loads(raw))
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("offset file %s is damaged (%s); trying the backup", candidate, exc)
                continue
            with self._lock:
                self._offsets = offsets
                self._dirty = False
            return len(offsets)
        return 0

    @staticmethod
    def _parse(data: Any) -> dict[MessageQueue, int]:
        out: dict[MessageQueue, int] = {}
        for item in data["offsets"]:
            out[MessageQueue(str(item["topic"]), str(item["broker_name"]), int(item["queue_id"]))] = int(item["offset"])
        return out

    def read(self, queue: MessageQueue) -> int | None:
        with self._lock:
            return self._offsets.get(queue)

    def update(self, queue: MessageQueue, offset: int, *, increase_only: bool = True) -> None:
        with self._lock:
            old = self._offsets.get(queue)
            if old is not None and increase_only and offset <= old:
                return
            self._offsets[queue] = offset
            self._dirty = True

    def remove(self, queue: MessageQueue) -> None:
        with self._lock:
            if self._offsets.pop(queue, None) is not None:
                self._dirty = True

    def snapshot(self) -> dict[MessageQueue, int]:
        with self._lock:
            return dict(self._offsets)

    def persist(self, force: bool = False) -> bool:
        """Write the offsets if they changed (or ``force``); True when a file was written."""
        with self._lock:
            if not self._dirty and not force:
                return False
            offsets = dict(self._offsets)
            self._dirty = False
        data = {
            "version": FORMAT_VERSION,
            "group": self.group,
            "offsets": [
                {"topic": q.topic, "broker_name": q.broker_name, "queue_id": q.queue_id, "offset": o}
                for q, o in sorted(offsets.items())
            ],
        }
        try:
            self._write(json.dumps(data, indent=1).encode("utf-8"))
        except OSError as exc:
            with self._lock:
                self._dirty = True  # try again at the next persist
            raise OffsetStoreError(exc.errno or 0, f"persisting offsets to {self.path} failed: {exc}") from exc
        return True

    def _write(self, payload: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{FILE_NAME}.tmp.{os.getpid()}.{threading.get_ident()}")
        with open(tmp, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        if self.path.exists():
            os.replace(self.path, self.path.with_name(FILE_NAME + ".bak"))
        os.replace(tmp, self.path)
        try:  # the rename itself must survive a crash: sync the directory entry too
            fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError as exc:  # some filesystems refuse fsync on directories; the data file is synced
            log.debug("directory fsync of %s failed: %s", self.path.parent, exc)
        finally:
            os.close(fd)
