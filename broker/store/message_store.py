"""DefaultMessageStore: recovery, put orchestration and reads over the store files; it starts the services.

One put lock (the single writer); the CommitLog's flush service (``flush.py``), the IndexDispatchService
(``index_dispatch.py``), retention (``retention.py``) and the checkpoint each run in threads of their own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import fcntl
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

from broker.store import codec
from broker.store.checkpoint import StoreCheckpoint
from broker.store.codec import ScanStatus
from broker.store.commitlog import CommitLog, ReplicaError
from broker.store.config import CLEAN_START_CHECK_BYTES, CQ_UNIT_SIZE, MessageStoreConfig
from broker.store.consume_queue import ConsumeQueue
from broker.store.consume_queue_ext import ConsumeQueueExt
from broker.store.disk_guard import DiskGuard
from broker.store.flush import GroupCommitService, PutCaller, answer, flush_service
from broker.store.index_dispatch import IndexDispatchService, index_job
from broker.store.index_file import IndexService
from broker.store.mapped_file import DiskFullError
from broker.store.message import INNER_BATCH_FLAG, MessageExt, MessageExtBrokerInner
from broker.store.plain_batch import RAW_BATCHES, ColumnBatch, PlainBatch
from broker.store.results import (
    AppendMessageResult,
    CommitLogDispatcher,
    GetMessageResult,
    GetMessageStatus,
    MessageFilter,
    PutMessageResult,
    PutMessageStatus,
    PutResults,
)
from broker.store.retention import CleanCommitLogService, CleanConsumeQueueService, disk_usage_ratio
from broker.store.verify import CorruptRecordError, record_crc_ok
from orbitmq.record import OFF_QUEUE_OFFSET, OFF_SYS_FLAG

log = logging.getLogger(__name__)

MAX_FILTER_SCAN = 16_000  # consume queue entries examined per get when a filter rejects messages
ArrivingListener = Callable[[str, int, int], None]


@dataclass
class StoreStats:
    put_messages: int = 0
    put_bytes: int = 0
    got_messages: int = 0
    recovered_records: int = 0  # records re-scanned by the last load(); 0 after a clean stop
    last_load_seconds: float = 0.0


_PendingPut = tuple[Sequence[MessageExtBrokerInner], Sequence[bytes | None] | None, asyncio.Future[Any], bool]


class StoreLockedError(OSError):
    """Another broker process holds this store directory."""


class DefaultMessageStore:
    def __init__(
        self,
        config: MessageStoreConfig,
        store_host: tuple[str, int] = ("127.0.0.1", 0),
        *,
        clock: Callable[[], float] = time.time,
        disk_usage: Callable[[Path], float] | None = None,
    ) -> None:
        self.config = config
        self.store_host = store_host
        self.clock = clock
        self.commitlog = CommitLog(config)
        self.index = IndexService(config.index_dir, config.maxHashSlotNum, config.maxIndexNum)
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.cq_exts: dict[tuple[str, int], ConsumeQueueExt] = {}
        self.cq_ext_bitmap_bytes = 0  # 0: no ConsumeQueue extension (no filter bitmaps)
        self.stats = StoreStats()
        self._lock_fd = -1  # the store directory's lock file, held from load() to shutdown()
        # room kept besides CommitLog segments: consume queue files are made by appends too
        self.disk = DiskGuard(
            config.commitlog_dir, config.diskSpaceWarningLevelRatio, 4 * config.mappedFileSizeConsumeQueue
        )
        self._put_lock = threading.Lock()
        self._max_record_size = config.mappedFileSizeCommitLog - codec.BLANK.size
        self._listeners: list[ArrivingListener] = []
        # metrics (broker/metrics): one call per stored batch and per consumer read; None costs nothing
        self.on_put: Callable[[Sequence[MessageExtBrokerInner], dict[str, int], int], None] | None = None
        self.on_get: Callable[[str, str, int, int], None] | None = None
        self._dispatchers: list[CommitLogDispatcher] = []
        # The last inner batch read, unwrapped: its messages are read one by one (a pop answers per flight).
        self._inner_cache: tuple[int, list[MessageExt]] | None = None
        self._inner_raw_cache: tuple[int, int, list[bytes]] | None = None  # commitlog offset, base, records
        self._pending_aio: dict[asyncio.AbstractEventLoop, list[_PendingPut]] = {}  # puts of this loop turn
        self._running = False
        # Replication (broker/ha): a SLAVE refuses puts with this reason; a SYNC_MASTER's gate holds each asyncio
        # put's answer until a slave has its records.
        self.write_refusal = ""
        self.write_guard: Callable[[], str] | None = None  # failover fencing: a reason to refuse, checked per put
        self.put_gate: Callable[[asyncio.Future[Any]], asyncio.Future[Any]] | None = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()  # every service thread's loop ends when it is set
        self.flush_service = flush_service(self.commitlog, config, self._stop)
        # The put path hands SYNC_FLUSH puts to the group commit; ASYNC_FLUSH puts are answered once appended.
        self._group_commit = self.flush_service if isinstance(self.flush_service, GroupCommitService) else None
        self.index_dispatch = IndexDispatchService(self.index, config)
        self.clean_consume_queue = CleanConsumeQueueService(self.queues, self.cq_exts, self.index)
        self.clean_commitlog = CleanCommitLogService(
            config,
            self.commitlog,
            self.clean_consume_queue,
            self._put_lock,
            self._stop,
            clock=lambda: self.clock(),  # late-bound: ``store.clock`` may be replaced after construction
            disk_usage=disk_usage or disk_usage_ratio,
        )

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> bool:
        """Open the files and recover; an ``abort`` file means the last run did not stop cleanly."""
        started = time.monotonic()
        self.config.root.mkdir(parents=True, exist_ok=True)
        self._lock_store()
        self.commitlog.load()
        if self.config.messageIndexEnable:
            self.index.load()
        self._load_consume_queues()
        checkpoint = StoreCheckpoint.load(self.config.checkpoint_path)
        crashed = self.config.abort_path.exists() or checkpoint is None
        if crashed:
            self._recover_abnormally(checkpoint)
        else:
            assert checkpoint is not None
            damaged = self._damaged_tail(checkpoint.commitlog_offset)
            if damaged is not None:
                # Files changed while the broker was stopped: recover as after a crash, from the last segment.
                log.warning("clean start found a damaged commitlog tail", extra={"offset": damaged})
                self._recover_abnormally(checkpoint, self.commitlog.files.segment_start(damaged))
            else:
                # The final checkpoint of a clean stop is the flushed end: the rest of the segment is still zeros.
                self.commitlog.set_end(checkpoint.commitlog_offset, zero_tail=False)
                for cq in self.queues.values():
                    cq.truncate_from_phys(checkpoint.commitlog_offset)
                self.index_dispatch.reset(checkpoint.commitlog_offset)
                self.stats.recovered_records = 0
        for cq in self.queues.values():  # retention may have removed what the first entries point at
            cq.delete_expired(self.commitlog.min_offset)
        self.stats.last_load_seconds = time.monotonic() - started
        log.info("store loaded", extra={"crashed": crashed, "seconds": self.stats.last_load_seconds})
        return True

    def _load_consume_queues(self) -> None:
        root = self.config.consumequeue_dir
        root.mkdir(parents=True, exist_ok=True)
        for topic_dir in sorted(root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for qdir in sorted(topic_dir.iterdir()):
                if qdir.is_dir() and qdir.name.isdigit():
                    cq = ConsumeQueue(root, topic_dir.name, int(qdir.name), self.config.mappedFileSizeConsumeQueue)
                    cq.load()
                    self.queues[(topic_dir.name, int(qdir.name))] = cq

    def _damaged_tail(self, end: int) -> int | None:
        """After a clean stop: where the log's last records up to ``end`` (the last segment, at most
        ``CLEAN_START_CHECK_BYTES`` of it) stop verifying (RocketMQ's normal recovery rechecks the last files), or
        None when all of them pass."""
        if end <= self.commitlog.min_offset:
            return None
        start = max(self.commitlog.files.segment_start(end - 1), self.commitlog.min_offset)
        if end - start > CLEAN_START_CHECK_BYTES:  # from the first record of the window's
            window = end - CLEAN_START_CHECK_BYTES
            start = self.commitlog.next_valid(window - 1)
            if not window <= start < end:
                return window  # no record where records must be: damaged
        for info in self.commitlog.scan(start):
            if info.status is not ScanStatus.OK:
                return info.physical_offset if info.physical_offset < end or info.resume_at >= 0 else None
        return None

    def _recover_abnormally(self, checkpoint: StoreCheckpoint | None, start: int | None = None) -> None:
        if start is None:
            start = 0
            if checkpoint is not None:
                start = min(checkpoint.consume_queue_offset, checkpoint.index_offset, checkpoint.commitlog_offset)
        start = max(start, self.commitlog.min_offset)
        for cq in self.queues.values():
            cq.truncate_from_phys(start)
        indexed_until = self.index.max_phy_offset
        end = start
        scanned = 0
        damaged = -1  # the last bad stretch kept behind: queue offsets it swallowed point at it, as corrupt
        for info in self.commitlog.scan(start):
            if info.status is ScanStatus.CORRUPT and info.resume_at >= 0:
                # valid records follow: keep them, quarantine the bad bytes (their queue offsets read as corrupt)
                self._quarantine_region(info.physical_offset, info.resume_at)
                damaged = info.physical_offset
                continue
            if info.status is not ScanStatus.OK:
                end = info.physical_offset
                if info.status is ScanStatus.CORRUPT:
                    log.warning("commitlog tail dropped at a torn record", extra={"offset": end})
                break
            scanned += 1
            cq = self._queue(info.topic, info.queue_id)
            if damaged >= 0:
                cq.fill_holes(info.queue_offset, damaged)
            if info.inner_tags_codes:
                for i, code in enumerate(info.inner_tags_codes):
                    cq.put(info.queue_offset + i, info.physical_offset, info.size, code)
            else:
                cq.put(info.queue_offset, info.physical_offset, info.size, info.tags_code)
            if self.config.messageIndexEnable and info.physical_offset > indexed_until:
                self.index.build_index(
                    info.topic, info.keys, info.unique_key, info.physical_offset, info.store_timestamp
                )
        self.commitlog.set_end(end)
        for cq in self.queues.values():
            cq.truncate_from_phys(end)
        self.index_dispatch.reset(end)
        self.stats.recovered_records = scanned

    def _quarantine_region(self, start: int, resume: int) -> None:
        mf = self.commitlog.files.find(start)
        stop = min(resume, mf.end_offset) if mf is not None else start
        data = bytes(mf.view[start - mf.start_offset : stop - mf.start_offset]) if mf is not None else None
        error = CorruptRecordError(start, stop - start, f"damaged bytes found in recovery, records resume at {resume}")
        self.commitlog.quarantine.report(error, data)

    def start(self) -> None:
        self.disk.check()
        self.config.abort_path.touch()
        self.commitlog.files.prepare_first()
        self._running = True
        self.flush_service.open()
        self._stop.clear()
        threads = [
            *self.flush_service.threads(),
            threading.Thread(target=self._checkpoint_loop, name="FlushConsumeQueueService", daemon=True),
            *self.clean_commitlog.threads(),
        ]
        if self.config.messageIndexEnable:
            threads.extend(self.index_dispatch.threads())
        for t in threads:
            t.start()
            self._threads.append(t)

    def _lock_store(self) -> None:
        """One broker per store directory: a second one would interleave appends into the same segments."""
        path = self.config.root / "lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StoreLockedError(
                errno.EBUSY, f"store directory {self.config.root} is in use by another broker (it holds {path})"
            ) from None
        self._lock_fd = fd

    def _unlock_store(self) -> None:
        fd, self._lock_fd = self._lock_fd, -1
        if fd >= 0:
            os.close(fd)  # closing releases the flock

    def shutdown(self) -> None:
        if not self._running:
            self.commitlog.shutdown()
            self.index.shutdown()
            for cq in self.queues.values():
                cq.shutdown()
            self._unlock_store()
            return
        self._running = False
        self._stop_threads()
        self._threads = []
        with self._put_lock:
            self.index_dispatch.drain()  # jobs of puts that raced with the stop
            self._checkpoint(final=True)
            self.flush_service.close()  # the final checkpoint flushed what late writers appended
            self.commitlog.shutdown()
            self.index.shutdown()
            for cq in self.queues.values():
                cq.shutdown()
            for ext in self.cq_exts.values():
                ext.shutdown()
        self.config.abort_path.unlink(missing_ok=True)
        self._unlock_store()

    def halt(self) -> None:
        """Stop the service threads as a crash would: no final checkpoint, the ``abort`` file stays, the files stay
        open (the lock goes, as with a dead process); the next ``load`` recovers. For crash tests and the recovery
        benchmark."""
        self._stop_threads()
        self._unlock_store()

    def _stop_threads(self) -> None:
        self._stop.set()
        self.index_dispatch.stop()
        self.flush_service.wake()
        for t in self._threads:
            t.join(timeout=30)

    # ------------------------------------------------------------------ put
    def add_arriving_listener(self, listener: ArrivingListener) -> None:
        self._listeners.append(listener)

    def add_dispatcher(self, dispatcher: CommitLogDispatcher) -> None:
        self._dispatchers.append(dispatcher)

    def _queue_max(self, key: tuple[str, int]) -> int:
        return (self.queues.get(key) or self._queue(*key)).max_offset

    def _queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            cq = ConsumeQueue(self.config.consumequeue_dir, topic, queue_id, self.config.mappedFileSizeConsumeQueue)
            cq.load()
            self.queues[(topic, queue_id)] = cq
        return cq

    def put_message(self, msg: MessageExtBrokerInner) -> PutMessageResult:
        return self.put_message_async(msg).result()

    def put_message_async(self, msg: MessageExtBrokerInner) -> concurrent.futures.Future[PutMessageResult]:
        future: concurrent.futures.Future[PutMessageResult] = concurrent.futures.Future()
        self._put([msg], [PutCaller(future, 0, 1, True)])
        return future

    def put_messages(self, msgs: list[MessageExtBrokerInner]) -> Sequence[PutMessageResult]:
        return self.put_messages_async(msgs).result()

    def put_messages_async(
        self, msgs: list[MessageExtBrokerInner]
    ) -> concurrent.futures.Future[Sequence[PutMessageResult]]:
        """Append ``msgs`` under one lock; the future resolves once they are durable per ``flushDiskType``."""
        future: concurrent.futures.Future[Sequence[PutMessageResult]] = concurrent.futures.Future()
        self._put(msgs, [PutCaller(future, 0, len(msgs), False)])
        return future

    def put_message_aio(self, msg: MessageExtBrokerInner) -> asyncio.Future[PutMessageResult]:
        """``put_message_async`` for callers on an asyncio loop (call from the loop's thread).

        Puts made in one turn of the loop are appended together at the end of it (one lock, one encoder pass,
        one flush waiter), and one group commit wakes the loop once for all of them.
        """
        return self._put_aio([msg], None, single=True)

    def put_messages_aio(
        self, msgs: list[MessageExtBrokerInner], encoded_properties: Sequence[bytes | None] | None = None
    ) -> asyncio.Future[Sequence[PutMessageResult]]:
        """``put_messages_async`` for callers on an asyncio loop (call from the loop's thread), appended with the
        other puts of the same turn of the loop (see ``put_message_aio``).

        ``encoded_properties[i]``, when given, is ``msgs[i].properties`` already encoded (saves encoding twice)."""
        return self._put_aio(msgs, encoded_properties, single=False)

    def put_plain_batch_aio(self, batch: PlainBatch | ColumnBatch) -> asyncio.Future[Sequence[PutMessageResult]]:
        """``put_messages_aio`` of a request's plain messages, their records encoded straight from a SendBatch
        request's payload (``PlainBatch``) or a v2 request's columns (``ColumnBatch``); appended in its turn of the
        loop, after the puts made before it."""
        return self._put_aio(batch, None, single=False)

    def _put_aio(
        self, msgs: Sequence[MessageExtBrokerInner], raws: Sequence[bytes | None] | None, single: bool
    ) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        pending = self._pending_aio.get(loop)
        if pending is None:
            pending = self._pending_aio[loop] = []
            loop.call_soon(self._drain_aio, loop)
        pending.append((msgs, raws, future, single))
        return future if self.put_gate is None else self.put_gate(future)

    def _drain_aio(self, loop: asyncio.AbstractEventLoop) -> None:
        """Append every put the loop made since the last drain as one batch; each caller gets its share."""
        pending = self._pending_aio.pop(loop)
        try:
            self._put_pending(pending, loop)
        except Exception as exc:  # a bug or an unexpected store error: every caller hears of it, none hangs
            log.exception("put failed")
            for _, _, future, _ in pending:
                if not future.done():
                    future.set_exception(exc)

    def _put_pending(self, pending: list[_PendingPut], loop: asyncio.AbstractEventLoop) -> None:
        if len(pending) == 1:
            msgs, raws, future, single = pending[0]
            self._put(msgs, [PutCaller(future, 0, len(msgs), single)], loop, raws)
            return
        if any(type(msgs) in RAW_BATCHES for msgs, _, _, _ in pending):
            # a plain or column batch is appended on its own (its records come from its payload or columns); order
            # is kept
            run: list[_PendingPut] = []
            for put in pending:
                if type(put[0]) in RAW_BATCHES:
                    if run:
                        self._put_pending(run, loop)
                        run = []
                    self._put_pending([put], loop)
                else:
                    run.append(put)
            if run:
                self._put_pending(run, loop)
            return
        batch: list[MessageExtBrokerInner] = []
        callers: list[PutCaller] = []
        with_raws = any(raws is not None for _, raws, _, _ in pending)
        all_raws: list[bytes | None] = []
        for msgs, raws, future, single in pending:
            start = len(batch)
            batch.extend(msgs)
            if with_raws:
                all_raws.extend(raws if raws is not None else [None] * len(msgs))
            callers.append(PutCaller(future, start, len(batch), single))
        self._put(batch, callers, loop, all_raws if with_raws else None)

    def _put(
        self,
        msgs: Sequence[MessageExtBrokerInner],
        callers: list[PutCaller],
        loop: asyncio.AbstractEventLoop | None = None,
        encoded_properties: Sequence[bytes | None] | None = None,
    ) -> None:
        """Append, dispatch, then answer the callers now (ASYNC_FLUSH) or once a flush covers the batch.

        Asyncio callers (``loop`` given) are answered here only from the loop's own thread."""
        refusal = self.write_refusal or self.disk.reason or (self.write_guard() if self.write_guard is not None else "")
        if not self._running or refusal:
            answer(callers, self._not_running(len(msgs), refusal or ""))
            return
        host = self.store_host  # the record carries the host that stored it, as the message id does
        index_enabled = self.config.messageIndexEnable
        queues = self.queues
        with self._put_lock:
            if not self._running:  # shutdown() won the lock: the files are closed
                answer(callers, self._not_running(len(msgs)))
                return
            now = int(self.clock() * 1000)
            batch = codec.AppendBatch(
                msgs, encoded_properties, now, host, self._queue_max, self.config.maxMessageSize, self._max_record_size
            )
            error = self.commitlog.append_batch(batch)
            if error is not None:
                log.error("commitlog append failed", extra={"error": str(error)})
                if isinstance(error, DiskFullError):
                    self.disk.refuse(str(error))
            for key, (first, entries) in batch.cq.items():
                if entries:
                    try:
                        queues[key].put_batch(first, entries)
                    except DiskFullError as exc:  # the guard's reserve was not enough: stop writes at once
                        log.error("consume queue entries not written", extra={"queue": key, "error": str(exc)})
                        self.disk.refuse(str(exc))
            end_offset = self.commitlog.max_offset
            written = batch.written
            n_written = len(written) - len(batch.refused)
            # messages, not records: an inner batch is one record of many
            self.stats.put_messages += sum(len(entries) for _, entries in batch.cq.values())
            self.stats.put_bytes += batch.written_bytes
            if self.on_put is not None and n_written:
                per_topic: dict[str, int] = {}
                for (topic, _), (_, entries) in batch.cq.items():
                    per_topic[topic] = per_topic.get(topic, 0) + len(entries)
                self.on_put(msgs, per_topic, batch.written_bytes)
            if index_enabled and batch.keyed:
                job = index_job(batch, now)  # built under the lock so the index sees appends in order
                if job is not None:
                    self.index_dispatch.submit(job)
        results = self._results(batch, host, now, error)
        arrived = {key: first + len(entries) for key, (first, entries) in batch.cq.items() if entries}
        if self._dispatchers and n_written:
            for msg, r in zip(msgs, results, strict=True):
                if r.append_result is not None:
                    for d in self._dispatchers:
                        d.dispatch(msg, r.append_result)
        for (topic, qid), max_offset in arrived.items():
            for listener in self._listeners:
                listener(topic, qid, max_offset)
        group_commit = self._group_commit
        if not n_written or group_commit is None:
            answer(callers, results)
            return
        group_commit.submit(end_offset, callers, results, loop)

    @staticmethod
    def _not_running(count: int, reason: str = "") -> list[PutMessageResult]:
        error = reason or "store is not running"
        return [PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, error=error)] * count

    # ------------------------------------------------------------------ replication (broker/ha)
    def read_replica_chunk(self, offset: int, max_bytes: int) -> tuple[bytes, bool] | None:
        """Master: the records a slave needs next (see ``CommitLog.read_replica_chunk``)."""
        return self.commitlog.read_replica_chunk(offset, max_bytes)

    def truncate_replica(self, offset: int) -> None:
        """Failover: drop everything at or after ``offset`` (a record boundary), records the group's new master
        never had; the ConsumeQueues lose their entries there. Index entries past it are left: key queries check
        the record they find, so they never return a message that is gone."""
        with self._put_lock:
            if offset >= self.commitlog.max_offset:
                return
            self.commitlog.set_end(offset)
            for cq in self.queues.values():
                cq.truncate_from_phys(offset)
            self.index_dispatch.reset(offset)
            self._inner_cache = None
            self._inner_raw_cache = None
        self._checkpoint()
        log.warning("commitlog truncated for the new master", extra={"offset": offset})

    def append_replica(self, offset: int, data: bytes, blank: bool) -> int:
        """Slave: store records the master sent, byte for byte, and dispatch them to the ConsumeQueues and the
        index as the master's own puts were (RocketMQ's reput); returns the new CommitLog end.

        The records are checked (size, magic, CRC) before anything is written: a bad chunk raises ReplicaError."""
        infos: list[codec.RecordInfo] = []
        pos = 0
        while not blank and pos < len(data):
            info = codec.check_record(data, pos, len(data))
            if info.status is not ScanStatus.OK or info.physical_offset != offset + pos:
                raise ReplicaError(f"replicated record at offset {offset + pos} is damaged ({info.status.name})")
            infos.append(info)
            pos += info.size
        arrived: dict[tuple[str, int], int] = {}
        with self._put_lock:
            if not self._running:
                raise ReplicaError("store is not running")
            self.commitlog.append_replica(offset, data, blank)
            for info in infos:
                cq = self._queue(info.topic, info.queue_id)
                codes = info.inner_tags_codes or (info.tags_code,)
                for i, code in enumerate(codes):
                    cq.put(info.queue_offset + i, info.physical_offset, info.size, code)
                arrived[(info.topic, info.queue_id)] = info.queue_offset + len(codes)
                self.stats.put_messages += len(codes)
                if self.config.messageIndexEnable:
                    self.index.build_index(
                        info.topic, info.keys, info.unique_key, info.physical_offset, info.store_timestamp
                    )
            self.stats.put_bytes += len(data)
            end = self.commitlog.max_offset
        for (topic, qid), max_offset in arrived.items():
            for listener in self._listeners:
                listener(topic, qid, max_offset)
        return end

    @staticmethod
    def _results(
        batch: codec.AppendBatch, host: tuple[str, int], now: int, error: OSError | None
    ) -> Sequence[PutMessageResult]:
        """Per message: stored (lazily built when all were), refused with the field and limit, or not written."""
        if not batch.refused and len(batch.written) == len(batch.msgs):
            return PutResults(batch.written, batch.sizes, batch.queue_offsets, host, now)
        results: list[PutMessageResult] = []
        for i, (phys, size, qo) in enumerate(zip(batch.written, batch.sizes, batch.queue_offsets, strict=True)):
            why = batch.refused.get(i)
            if why is not None:
                status = (
                    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
                    if isinstance(why, codec.PropertiesTooLarge)
                    else PutMessageStatus.MESSAGE_ILLEGAL
                )
                results.append(PutMessageResult(status, error=str(why)))
            else:
                stored = AppendMessageResult(phys, size, host, now, qo)
                results.append(PutMessageResult(PutMessageStatus.PUT_OK, stored))
        status = (
            PutMessageStatus.SERVICE_NOT_AVAILABLE
            if isinstance(error, DiskFullError)
            else PutMessageStatus.CREATE_MAPPED_FILE_FAILED
        )
        lost = PutMessageResult(status, error=str(error or "not written"))
        results.extend([lost] * (len(batch.msgs) - len(results)))
        return results

    # ------------------------------------------------------------------ checkpoint (FlushConsumeQueueService)
    def _checkpoint_loop(self) -> None:
        interval = self.config.flushIntervalConsumeQueue / 1000
        while not self._stop.wait(interval):
            try:
                self.disk.check()
                self._checkpoint()
            except OSError as exc:
                log.error("checkpoint failed", extra={"error": str(exc)})

    def _checkpoint(self, final: bool = False) -> None:
        """Flush commitlog, consume queues and index, then record the offsets below which all three are durable."""
        with self._put_lock if not final else contextlib.nullcontext():
            dispatched = self.commitlog.max_offset
            enqueued = self.index_dispatch.enqueued
            queues = list(self.queues.values())
        index_end = self.index_dispatch.indexed_until(dispatched, enqueued)
        flushed = self.commitlog.flush()
        for cq in queues:
            cq.flush()
        for ext in list(self.cq_exts.values()):
            ext.flush()
        self.index.flush()
        StoreCheckpoint(
            commitlog_offset=min(flushed, dispatched),
            consume_queue_offset=dispatched,
            index_offset=index_end,
            timestamp=int(self.clock() * 1000),
        ).save(self.config.checkpoint_path)

    # ------------------------------------------------------------------ retention
    def delete_expired_files(self, force: bool = False) -> int:
        """Run retention now (see ``CleanCommitLogService.delete_expired_files``); returns the segments deleted."""
        return self.clean_commitlog.delete_expired_files(force)

    # ------------------------------------------------------------------ reads
    def get_message(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
        max_total_bytes: int = 4 * 1024 * 1024,
    ) -> GetMessageResult:
        return self._get(topic, queue_id, offset, max_msg_nums, message_filter, max_total_bytes, raw=False, group=group)

    def get_message_raw(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
        max_total_bytes: int = 4 * 1024 * 1024,
    ) -> GetMessageResult:
        """``get_message`` returning the records as stored, end to end in ``raw`` (``raw_count`` of them).

        Contiguous records are copied with one slice, and without a filter nothing is decoded: the batched pull
        costs the broker a ConsumeQueue read and a memcpy per run of records."""
        return self._get(topic, queue_id, offset, max_msg_nums, message_filter, max_total_bytes, raw=True, group=group)

    def get_message_spans(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None = None,
        max_total_bytes: int = 4 * 1024 * 1024,
    ) -> GetMessageResult:
        """``get_message`` answering where the selected records are, ``spans`` of (queue offset, commitlog
        offset, size), without reading them: without a filter nothing is decoded (the pop reads what it hands
        out once, at the end)."""
        return self._get(
            topic, queue_id, offset, max_msg_nums, message_filter, max_total_bytes, True, spans=True, group=group
        )

    def _get(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_msg_nums: int,
        message_filter: MessageFilter | None,
        max_total_bytes: int,
        raw: bool,
        spans: bool = False,
        group: str = "",
    ) -> GetMessageResult:
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            return GetMessageResult(GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)
        min_o, max_o = cq.min_offset, cq.max_offset
        if max_o == 0:
            return GetMessageResult(GetMessageStatus.NO_MESSAGE_IN_QUEUE, [], 0, min_o, max_o)
        if offset < min_o:
            return GetMessageResult(GetMessageStatus.OFFSET_TOO_SMALL, [], min_o, min_o, max_o)
        if offset == max_o:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_ONE, [], offset, min_o, max_o)
        if offset > max_o:
            return GetMessageResult(GetMessageStatus.OFFSET_OVERFLOW_BADLY, [], max_o, min_o, max_o)
        messages: list[MessageExt] = []
        selected_spans: list[tuple[int, int, int]] = []  # raw mode: (queue offset, commitlog offset, size)
        selected = selected_spans if raw else messages
        total = 0
        next_offset = offset
        scanned = 0
        removing = False
        min_phys = self.commitlog.min_offset
        ext = self._cq_ext(topic, queue_id) if getattr(message_filter, "uses_cq_ext", False) else None
        last_phys = -1  # the messages of an inner batch share one record: its size counts once
        while len(selected) < max_msg_nums and next_offset < max_o and scanned < MAX_FILTER_SCAN:
            batch = cq.entries(next_offset, min(max_msg_nums * 4, MAX_FILTER_SCAN - scanned))
            if not batch:
                break
            for phys, size, tags in batch:
                counted = 0 if phys == last_phys else size
                if len(selected) >= max_msg_nums or (selected and total + counted > max_total_bytes):
                    break
                entry_offset = next_offset
                next_offset += 1
                scanned += 1
                if phys < min_phys:
                    removing = True
                    continue
                if message_filter is not None:
                    unit = ext.get(entry_offset, phys) if ext is not None else None
                    if not message_filter.is_matched_by_consume_queue(tags, unit):
                        continue
                if raw and message_filter is None:
                    selected_spans.append((entry_offset, phys, size))
                    total += counted
                    last_phys = phys
                    continue
                try:
                    msg = self.read_message(phys, size, entry_offset)
                except CorruptRecordError:
                    if not selected:  # the record at the requested offset: a status of its own, then past it
                        return GetMessageResult(GetMessageStatus.MESSAGE_CORRUPTED, [], next_offset, min_o, max_o)
                    next_offset = entry_offset  # served before it; the next read gets its status
                    break
                if msg is None:
                    continue
                if message_filter is not None and not message_filter.is_matched_by_commitlog(msg):
                    continue
                if raw:
                    selected_spans.append((entry_offset, phys, size))
                else:
                    messages.append(msg)
                total += counted
                last_phys = phys
            else:
                continue
            break
        result = GetMessageResult(GetMessageStatus.NO_MATCHED_MESSAGE, messages, next_offset, min_o, max_o)
        if spans:
            result.spans = selected_spans
            count = len(selected_spans)
        else:
            if raw and selected_spans:
                result.raw, result.raw_count, corrupt_at = self._read_spans(selected_spans)
                if corrupt_at is not None:
                    if not result.raw_count:  # the first record is corrupt: its status, and past its record
                        bad_phys = selected_spans[corrupt_at][1]
                        past = corrupt_at
                        while past < len(selected_spans) and selected_spans[past][1] == bad_phys:
                            past += 1
                        after = selected_spans[past][0] if past < len(selected_spans) else next_offset
                        return GetMessageResult(GetMessageStatus.MESSAGE_CORRUPTED, [], after, min_o, max_o)
                    result.next_begin_offset = selected_spans[corrupt_at][0]  # the next read gets its status
            count = result.raw_count if raw else len(messages)
        self.stats.got_messages += count
        if count:
            result.status = GetMessageStatus.FOUND
            if group and self.on_get is not None:  # a consumer's read, not the broker's own scans
                self.on_get(group, topic, count, total)
        elif removing:
            result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
        return result

    def _read_spans(self, spans: list[tuple[int, int, int]]) -> tuple[bytes, int, int | None]:
        """The records of ``spans`` end to end (see ``read_records``) and how many, stopping at the first one gone
        or corrupt; and the index of that span when it is a corrupt record."""
        parts, gone, corrupt = self.read_records(spans)
        corrupt_at = corrupt[0] if corrupt and (not gone or corrupt[0] < gone[0]) else None
        if gone or corrupt:
            n = min(gone[:1] + corrupt[:1])
            kept = 0
            out: list[bytes] = []
            for part_spans, part in parts:
                if kept + part_spans > n:
                    break
                out.append(part)
                kept += part_spans
            return b"".join(out), kept, corrupt_at
        if len(parts) == 1:
            return parts[0][1], len(spans), None
        return b"".join(part for _, part in parts), len(spans), None

    def read_records(
        self, spans: Sequence[tuple[int, int, int]]
    ) -> tuple[list[tuple[int, bytes]], list[int], list[int]]:
        """The stored records of ``spans`` (queue offset, commitlog offset, size), in order, as (how many spans,
        bytes) parts; the indexes of the spans whose record is gone (retention deleted its segment); and of those
        whose record fails its CRC (reported, never served).

        A run of records adjacent in the CommitLog is one slice of the segment, checked once per process. A
        message of an inner batch comes as a record of its own (``codec.unwrap_raw``), so readers never see a
        batch whole."""
        parts: list[tuple[int, bytes]] = []
        gone: list[int] = []
        corrupt: list[int] = []
        read_raw = self.commitlog.read_raw
        physs = [s[1] for s in spans]
        i, n = 0, len(spans)
        while i < n:
            start = physs[i]
            end, j, prev = start + spans[i][2], i + 1, start
            while j < n:
                phys = physs[j]
                if spans[j][2] <= 0:  # an offset recovery lost (a hole, size 0): a run of its own, read as corrupt
                    break
                if phys == end:
                    end += spans[j][2]
                elif phys != prev:  # not adjacent, nor the next message of the same inner batch
                    break
                prev = phys
                j += 1
            chunk = read_raw(start, end - start)
            if chunk is not None and not self._run_ok(chunk, start, end, spans, i, j):
                chunk = None  # a corrupt record in the run: record by record, so the good ones are served
            if chunk is None:  # gone, or the run crosses a segment end: record by record, each record read once
                record: bytes | None = None
                record_phys = -1
                record_ok = False
                for k in range(i, j):
                    queue_offset, phys, size = spans[k]
                    if phys != record_phys:
                        record, record_phys = read_raw(phys, size), phys
                        record_ok = record is not None and self._record_ok(phys, size, record)
                    if record is None:
                        gone.append(k)
                    elif not record_ok:
                        corrupt.append(k)
                    else:
                        parts.append((1, self._unwrapped_raw(queue_offset, phys, record)))
                i = j
                continue
            # The sys flags' low bytes, picked in C: INNER_BATCH_FLAG is their high bit, so a batch makes one >= 0x80.
            at = [p - start + _FLAG_BYTE for p in physs[i:j]]
            if max(itemgetter(*at)(chunk) if len(at) > 1 else (chunk[at[0]],)) < INNER_BATCH_FLAG:
                parts.append((j - i, chunk))
            else:
                k = i
                while k < j:
                    phys = spans[k][1]
                    record = chunk[phys - start : phys - start + spans[k][2]]
                    m = k + 1
                    while m < j and spans[m][1] == phys:  # the messages of an inner batch share its record
                        m += 1
                    parts.append(
                        (m - k, b"".join([self._unwrapped_raw(spans[x][0], phys, record) for x in range(k, m)]))
                    )
                    k = m
            i = j
        return parts, gone, corrupt

    def _record_ok(self, phys: int, size: int, record: bytes) -> bool:
        try:
            self.commitlog.check(phys, size, record, 0)
        except CorruptRecordError:
            return False
        return True

    def _run_ok(
        self, chunk: bytes, start: int, end: int, spans: Sequence[tuple[int, int, int]], i: int, j: int
    ) -> bool:
        """Whether every record of the run ``spans[i:j]`` (``chunk`` = CommitLog ``[start, end)``) is good."""
        verified = self.commitlog.verified
        if end > start and verified.covers(start, end):
            return True
        last = -1
        for _, phys, size in spans[i:j]:
            if phys != last and (size <= 0 or not record_crc_ok(chunk, phys - start, size)):
                return False
            last = phys
        verified.add(start, end)
        return True

    def _unwrapped_raw(self, queue_offset: int, phys: int, record: bytes) -> bytes:
        """``record`` itself, or for an inner batch its message at ``queue_offset`` as a record of its own. The
        last batch unwrapped is kept: a batch is read message by message."""
        cached = self._inner_raw_cache
        if cached is not None and cached[0] == phys:
            base, messages = cached[1], cached[2]
        elif not record[_FLAG_BYTE] & INNER_BATCH_FLAG:
            return record
        else:
            try:
                messages = codec.unwrap_raw(record)
            except codec.RecordError as exc:  # our bug (check_record logged it): serve the record as stored
                log.error("inner batch unreadable", extra={"commitlog_offset": phys, "error": str(exc)})
                return record
            base = _queue_offset(record)
            self._inner_raw_cache = (phys, base, messages)
        i = queue_offset - base
        return messages[i] if 0 <= i < len(messages) else record

    def read_message(self, phys: int, size: int | None, queue_offset: int | None = None) -> MessageExt | None:
        """The message at ``phys``; for an inner-batch record, its message at ``queue_offset`` (None when gone,
        or when no queue offset says which message of the batch is meant). Raises ``CorruptRecordError`` when
        the record fails its CRC."""
        cached = self._inner_cache
        if cached is not None and cached[0] == phys and phys >= self.commitlog.min_offset:
            messages = cached[1]
        else:
            msg = self.commitlog.read(phys, size)
            if msg is None or not msg.sys_flag & INNER_BATCH_FLAG:
                return msg
            try:
                messages = codec.unwrap(msg)
            except codec.RecordError as exc:  # our bug (check_record logged it): serve the record as stored
                log.error("inner batch unreadable", extra={"commitlog_offset": phys, "error": str(exc)})
                return msg
            if not messages:
                return msg
            self._inner_cache = (phys, messages)
        if queue_offset is None:
            return None
        i = queue_offset - messages[0].queue_offset
        return messages[i] if 0 <= i < len(messages) else None

    # ------------------------------------------------------------------ ConsumeQueue extension (filter bitmaps)
    def enable_cq_ext(self, bitmap_bytes: int) -> None:
        """Keep a ``bitmap_bytes`` filter bitmap per ConsumeQueue entry (the broker's Bloom filter size)."""
        self.cq_ext_bitmap_bytes = bitmap_bytes

    def _cq_ext(self, topic: str, queue_id: int) -> ConsumeQueueExt | None:
        if not self.cq_ext_bitmap_bytes:
            return None
        ext = self.cq_exts.get((topic, queue_id))
        if ext is None:
            units = self.config.mappedFileSizeConsumeQueue // CQ_UNIT_SIZE
            ext = ConsumeQueueExt(self.config.consumequeue_ext_dir, topic, queue_id, self.cq_ext_bitmap_bytes, units)
            ext.load()
            self.cq_exts[(topic, queue_id)] = ext
        return ext

    def put_cq_ext(self, topic: str, queue_id: int, queue_offset: int, commitlog_offset: int, bitmap: bytes) -> None:
        """Store the filter bitmap of ConsumeQueue entry ``queue_offset`` (called by the broker's dispatcher)."""
        ext = self._cq_ext(topic, queue_id)
        if ext is not None:
            ext.put(queue_offset, commitlog_offset, bitmap)

    def look_message_by_offset(
        self, commitlog_offset: int, size: int | None = None, queue_offset: int | None = None
    ) -> MessageExt | None:
        """The message stored at ``commitlog_offset``; a message of an inner batch also needs its ``queue_offset``.
        None when gone or corrupt (a corrupt record is reported when found)."""
        try:
            return self.read_message(commitlog_offset, size, queue_offset)
        except CorruptRecordError:
            return None

    def get_min_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get((topic, queue_id))
        return cq.min_offset if cq else 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        cq = self.queues.get((topic, queue_id))
        return cq.max_offset if cq else 0

    def get_message_store_timestamp(self, topic: str, queue_id: int, offset: int) -> int:
        cq = self.queues.get((topic, queue_id))
        entry = cq.get(offset) if cq else None
        return self.commitlog.store_timestamp(entry[0]) if entry else -1

    def get_offset_in_queue_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """The first queue offset whose store time is >= ``timestamp_ms`` (the max offset if none is)."""
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            entry = cq.get(mid)
            ts = self.commitlog.store_timestamp(entry[0]) if entry and entry[0] >= self.commitlog.min_offset else -1
            if ts < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def query_message(self, topic: str, key: str, max_num: int, begin_ts: int, end_ts: int) -> list[MessageExt]:
        if self._running:
            self.index_dispatch.await_jobs()
        found: list[MessageExt] = []
        seen: set[int] = set()
        for phys in self.index.query(topic, key, max_num * 2, begin_ts, end_ts):
            if phys in seen:
                continue
            seen.add(phys)
            msg = self.read_message(phys, None)  # inner-batch messages are not indexed one by one (as RocketMQ)
            if msg is None or msg.topic != topic or not (begin_ts <= msg.store_timestamp <= end_ts):
                continue
            if key in msg.keys or msg.unique_id == key:
                found.append(msg)
                if len(found) >= max_num:
                    break
        return found

    def topics(self) -> list[str]:
        return sorted({t for t, _ in list(self.queues)})  # list(): a put may add a queue meanwhile

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(q for t, q in list(self.queues) if t == topic)

    def delete_topics(self, topics: list[str]) -> None:
        with self._put_lock:
            for key in [k for k in self.queues if k[0] in topics]:
                cq = self.queues.pop(key)
                cq.destroy()
            for t in topics:
                shutil.rmtree(self.config.consumequeue_dir / t, ignore_errors=True)

    @property
    def corrupt_records(self) -> int:
        """Records found failing their CRC since start (read paths and recovery): reported, never served."""
        return self.commitlog.quarantine.count

    def get_max_phy_offset(self) -> int:
        return self.commitlog.max_offset

    def get_min_phy_offset(self) -> int:
        return self.commitlog.min_offset

    def flush_behind_bytes(self) -> int:
        return self.commitlog.files.unflushed_bytes()

    def earliest_store_timestamp(self) -> int:
        """Store time of the oldest message kept (ms); 0 when the store is empty."""
        low = self.commitlog.min_offset
        return self.commitlog.store_timestamp(low) if self.commitlog.max_offset > low else 0

    def dispatch_behind_bytes(self) -> int:
        if not self.config.messageIndexEnable:
            return 0
        return self.index_dispatch.behind_bytes(self.commitlog.max_offset)


_FLAG_BYTE = OFF_SYS_FLAG + 3  # the low byte of the big-endian sys flag
assert INNER_BATCH_FLAG == 0x80  # read_records tests the flag as "low byte >= 0x80"


def _queue_offset(record: bytes) -> int:
    return int.from_bytes(record[OFF_QUEUE_OFFSET : OFF_QUEUE_OFFSET + 8], "big")
