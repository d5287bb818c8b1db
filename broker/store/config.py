"""Store configuration with RocketMQ's key names (``storePathRootDir``, ``flushDiskType``, ...).

Derived paths (commitlog, consumequeue, index, checkpoint, abort) are computed here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from orbitmq.limits import GIB, MAX_MESSAGE_BODY_SIZE

CQ_UNIT_SIZE = 20
# A clean start rechecks at most this much of the log's tail (RocketMQ rechecks its last files): bounded so the
# start stays fast with 1 GiB segments of small records.
CLEAN_START_CHECK_BYTES = 4 * 1024 * 1024


class FlushDiskType(StrEnum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


@dataclass
class MessageStoreConfig:
    # store directory: commitlog, consumequeue, index, config, checkpoint
    storePathRootDir: str = str(Path.home() / "store")
    storePathCommitLog: str = ""  # CommitLog directory (default: storePathRootDir/commitlog)
    mappedFileSizeCommitLog: int = GIB  # bytes per CommitLog segment file
    mappedFileSizeConsumeQueue: int = 300_000 * CQ_UNIT_SIZE  # bytes per ConsumeQueue file (20 bytes an entry)
    # ASYNC_FLUSH answers once appended; SYNC_FLUSH once on disk (group commit)
    flushDiskType: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flushIntervalCommitLog: int = 500  # ms between background flushes (ASYNC_FLUSH)
    flushIntervalConsumeQueue: int = 1000  # ms between consume queue / index flushes and checkpoints
    syncFlushTimeout: int = 5000  # ms a SYNC_FLUSH writer waits before FLUSH_DISK_TIMEOUT
    fileReservedTime: int = 72  # hours
    deleteWhen: str = "04"  # hours of the day, ';'-separated
    diskMaxUsedSpaceRatio: int = 75  # percent: above it retention deletes the oldest segments whatever their age
    diskSpaceWarningLevelRatio: int = 90  # percent: above it writes are refused (reads and acks go on)
    cleanResourceInterval: int = 10_000  # ms between retention checks
    maxMessageSize: int = MAX_MESSAGE_BODY_SIZE  # largest body a message may have (bytes)
    messageIndexEnable: bool = True  # index message keys and unique ids for query by key and id
    indexDispatchDelayMs: int = 2  # ms (>= 0) between the index thread's looks for new keys while puts bring them
    indexDispatchIdleMs: int = 20  # ms (>= 1) between its looks once one found none (puts never wake it; queries do)
    indexQueryWaitMs: int = 100  # most a key query waits for the keys of puts made before it to be indexed
    maxHashSlotNum: int = 5_000_000  # hash slots per IndexFile
    maxIndexNum: int = 20_000_000  # entries per IndexFile
    warmMapedFileEnable: bool = True  # prepare the next segment in the background (allocate, read into the page cache)

    @property
    def root(self) -> Path:
        return Path(self.storePathRootDir).expanduser()

    @property
    def commitlog_dir(self) -> Path:
        return Path(self.storePathCommitLog).expanduser() if self.storePathCommitLog else self.root / "commitlog"

    @property
    def consumequeue_dir(self) -> Path:
        return self.root / "consumequeue"

    @property
    def consumequeue_ext_dir(self) -> Path:
        return self.root / "consumequeue_ext"

    @property
    def index_dir(self) -> Path:
        return self.root / "index"

    @property
    def checkpoint_path(self) -> Path:
        return self.root / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.root / "abort"

    def delete_hours(self) -> set[int]:
        return {int(h) for h in self.deleteWhen.split(";") if h.strip()}
