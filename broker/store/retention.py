"""Retention: CommitLog segments deleted after ``fileReservedTime`` at ``deleteWhen`` or when the disk is too full,
and the consume queues, their filter bitmaps and the index cut to what the CommitLog still holds.

RocketMQ's CleanCommitLogService and CleanConsumeQueueService.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path

from broker.store.commitlog import CommitLog
from broker.store.config import MessageStoreConfig
from broker.store.consume_queue import ConsumeQueue
from broker.store.consume_queue_ext import ConsumeQueueExt
from broker.store.index_file import IndexService
from broker.store.mapped_file import MappedFile

log = logging.getLogger(__name__)

QueueKey = tuple[str, int]  # topic, queue id


def disk_usage_ratio(path: Path) -> float:
    """How full the file system holding ``path`` is, 0..1."""
    path.mkdir(parents=True, exist_ok=True)
    usage = shutil.disk_usage(path)
    return usage.used / usage.total if usage.total else 0.0


class CleanConsumeQueueService:
    """Drops what points below the CommitLog's min offset: consume-queue files and entries, the filter bitmaps
    before each queue's new min offset, and index files wholly before it."""

    def __init__(
        self,
        queues: dict[QueueKey, ConsumeQueue],
        cq_exts: dict[QueueKey, ConsumeQueueExt],
        index: IndexService,
    ) -> None:
        self._queues = queues  # the store's own tables: queues created later are cleaned too
        self._cq_exts = cq_exts
        self._index = index

    def delete_expired(self, min_offset: int) -> None:
        for cq in self._queues.values():
            cq.delete_expired(min_offset)
        for key, ext in self._cq_exts.items():
            owner = self._queues.get(key)
            ext.delete_before(owner.min_offset if owner else 0)
        self._index.delete_expired(min_offset)


class CleanCommitLogService:
    """Deletes expired CommitLog segments every ``cleanResourceInterval`` ms, then has the consume queues follow."""

    def __init__(
        self,
        config: MessageStoreConfig,
        commitlog: CommitLog,
        consume_queues: CleanConsumeQueueService,
        put_lock: threading.Lock,
        stop: threading.Event,
        *,
        clock: Callable[[], float],
        disk_usage: Callable[[Path], float],
    ) -> None:
        self._config = config
        self._commitlog = commitlog
        self._consume_queues = consume_queues
        self._put_lock = put_lock
        self._stop = stop
        self._clock = clock
        self._disk_usage = disk_usage

    def threads(self) -> list[threading.Thread]:
        return [threading.Thread(target=self._run, name="CleanCommitLogService", daemon=True)]

    def _run(self) -> None:
        while not self._stop.wait(self._config.cleanResourceInterval / 1000):
            try:
                self.delete_expired_files()
            except OSError as exc:
                log.error("retention failed", extra={"error": str(exc)})

    def delete_expired_files(self, force: bool = False) -> int:
        """Delete commitlog segments older than ``fileReservedTime`` at ``deleteWhen`` (or when the disk is
        fuller than ``diskMaxUsedSpaceRatio``, or ``force``); never the segment being written. Returns the count."""
        config = self._config
        now = self._clock()
        hour = time.localtime(now).tm_hour
        disk_full = self._disk_usage(config.commitlog_dir) * 100 >= config.diskMaxUsedSpaceRatio
        if not (force or disk_full or hour in config.delete_hours()):
            return 0
        reserved = config.fileReservedTime * 3600

        budget = [1 if disk_full and not force else 1 << 30]  # a full disk frees one segment per round

        def expired(mf: MappedFile) -> bool:
            if budget[0] <= 0 or not (disk_full or mf.mtime() + reserved <= now):
                return False
            budget[0] -= 1
            return True

        with self._put_lock:
            deleted = self._commitlog.files.delete_first(expired, keep_last=True)
            if deleted:
                min_offset = self._commitlog.min_offset
                self._consume_queues.delete_expired(min_offset)
                log.info("retention deleted segments", extra={"count": len(deleted), "min_offset": min_offset})
        return len(deleted)
