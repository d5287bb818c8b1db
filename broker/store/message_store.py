"""DefaultMessageStore: puts, gets, queries, flush services, recovery and retention over the store files.

Thread-based: one put lock (the single writer), a flush thread, an index dispatch thread and a clean thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import queue
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

from broker.store import codec
from broker.store.checkpoint import StoreCheckpoint
from broker.store.codec import ScanStatus
from broker.store.commitlog import CommitLog
from broker.store.config import CQ_UNIT_SIZE, FlushDiskType, MessageStoreConfig
from broker.store.consume_queue import ConsumeQueue
from broker.store.consume_queue_ext import ConsumeQueueExt
from broker.store.index_file import IndexService
from broker.store.mapped_file import MappedFile
from broker.store.message import INNER_BATCH_FLAG, MessageExt, MessageExtBrokerInner
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
from orbitmq import message_const as mc
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


_AnyFuture = concurrent.futures.Future[Any] | asyncio.Future[Any]


@dataclass(slots=True)
class _Caller:
    """One caller's share of a put: its future and where its messages sit in the appended batch."""

    future: _AnyFuture
    start: int
    end: int
    single: bool  # the future wants one result, not a list

    def value(self, results: Sequence[PutMessageResult]) -> Any:
        if self.single:
            return results[self.start]
        if self.start == 0 and self.end == len(results):
            return results
        return results[self.start : self.end]


_PendingPut = tuple[list[MessageExtBrokerInner], Sequence[bytes | None] | None, asyncio.Future[Any], bool]


@dataclass(order=True)
class _FlushWaiter:
    end_offset: int
    deadline: float = field(compare=False)
    callers: list[_Caller] = field(compare=False)
    results: Sequence[PutMessageResult] = field(compare=False)
    loop: asyncio.AbstractEventLoop | None = field(default=None, compare=False)  # set for asyncio futures
    answered: bool = field(default=False, compare=False)


def _answer(callers: list[_Caller], results: Sequence[PutMessageResult]) -> None:
    for c in callers:
        if not c.future.done():  # an asyncio caller may have been cancelled meanwhile
            c.future.set_result(c.value(results))


def _timed_out(results: Sequence[PutMessageResult]) -> Sequence[PutMessageResult]:
    """``results`` answered FLUSH_DISK_TIMEOUT: stored, but not known to be durable."""
    if isinstance(results, PutResults):
        return results.with_status(PutMessageStatus.FLUSH_DISK_TIMEOUT, "flush timed out")
    return [
        PutMessageResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, r.append_result, "flush timed out") if r.ok else r
        for r in results
    ]


def _answer_all(answers: list[tuple[list[_Caller], Sequence[PutMessageResult]]]) -> None:
    for callers, results in answers:
        _answer(callers, results)


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
        self.disk_usage = disk_usage or _disk_usage_ratio
        self.commitlog = CommitLog(config)
        self.index = IndexService(config.index_dir, config.maxHashSlotNum, config.maxIndexNum)
        self.queues: dict[tuple[str, int], ConsumeQueue] = {}
        self.cq_exts: dict[tuple[str, int], ConsumeQueueExt] = {}
        self.cq_ext_bitmap_bytes = 0  # 0: no ConsumeQueue extension (no filter bitmaps)
        self.stats = StoreStats()
        self._put_lock = threading.Lock()
        self._max_record_size = config.mappedFileSizeCommitLog - codec.BLANK.size
        self._listeners: list[ArrivingListener] = []
        self._dispatchers: list[CommitLogDispatcher] = []
        self._index_queue: queue.SimpleQueue[list[tuple[str, tuple[str, ...], str | None, int, int, int]] | None] = (
            queue.SimpleQueue()
        )
        self._index_end = 0  # end of the last record the index thread finished
        # The last inner batch read, unwrapped: its messages are read one by one (a pop answers per flight).
        self._inner_cache: tuple[int, list[MessageExt]] | None = None
        self._inner_raw_cache: tuple[int, int, list[bytes]] | None = None  # commitlog offset, base, records
        self._index_enqueued = 0
        self._index_done = 0
        self._index_wake = threading.Event()  # a key query cuts the index thread's dispatch delay short
        self._index_progress = threading.Condition()  # notified as the index thread finishes each put's keys
        self._pending_aio: dict[asyncio.AbstractEventLoop, list[_PendingPut]] = {}  # puts of this loop turn
        self._waiters: list[_FlushWaiter] = []
        self._in_flight: list[_FlushWaiter] = []
        self._finish_lock = threading.Lock()
        self._flush_cond = threading.Condition()
        self._flush_closed = False
        self._running = False
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    # ------------------------------------------------------------------ lifecycle
    def load(self) -> bool:
        """Open the files and recover; an ``abort`` file means the last run did not stop cleanly."""
        started = time.monotonic()
        self.config.root.mkdir(parents=True, exist_ok=True)
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
            # The final checkpoint of a clean stop is the flushed end: the rest of the segment is still zeros.
            self.commitlog.set_end(checkpoint.commitlog_offset, zero_tail=False)
            for cq in self.queues.values():
                cq.truncate_from_phys(checkpoint.commitlog_offset)
            self._index_end = checkpoint.commitlog_offset
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

    def _recover_abnormally(self, checkpoint: StoreCheckpoint | None) -> None:
        start = 0
        if checkpoint is not None:
            start = min(checkpoint.consume_queue_offset, checkpoint.index_offset, checkpoint.commitlog_offset)
        start = max(start, self.commitlog.min_offset)
        for cq in self.queues.values():
            cq.truncate_from_phys(start)
        indexed_until = self.index.max_phy_offset
        end = start
        scanned = 0
        for info in self.commitlog.scan(start):
            if info.status is not ScanStatus.OK:
                end = info.physical_offset
                if info.status is ScanStatus.CORRUPT:
                    log.warning("commitlog tail dropped at a damaged record", extra={"offset": end})
                break
            scanned += 1
            cq = self._queue(info.topic, info.queue_id)
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
        self._index_end = end
        self.stats.recovered_records = scanned

    def start(self) -> None:
        self.config.abort_path.touch()
        self.commitlog.files.prepare_first()
        self._running = True
        self._flush_closed = False
        self._stop.clear()
        specs: list[tuple[str, Callable[[], None]]] = [
            ("FlushCommitLogService", self._flush_loop),
            ("FlushConsumeQueueService", self._checkpoint_loop),
            ("CleanCommitLogService", self._clean_loop),
        ]
        if self.config.messageIndexEnable:
            specs.append(("IndexDispatchService", self._index_loop))
        if self.config.flushDiskType is FlushDiskType.SYNC_FLUSH:
            specs.append(("FlushTimeoutService", self._flush_timeout_loop))
        for name, target in specs:
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def shutdown(self) -> None:
        if not self._running:
            self.commitlog.shutdown()
            self.index.shutdown()
            for cq in self.queues.values():
                cq.shutdown()
            return
        self._running = False
        self._stop.set()
        self._index_queue.put(None)
        with self._flush_cond:
            self._flush_cond.notify_all()
        for t in self._threads:
            t.join(timeout=30)
        self._threads = []
        with self._put_lock:
            self._drain_index_queue()  # jobs of puts that raced with the stop
            self._checkpoint(final=True)
            with self._flush_cond:
                # Writers that appended before this lock but queued their wait after the flush thread left:
                # the final checkpoint flushed their records.
                self._flush_closed = True
                late, self._waiters = self._waiters, []
            self._finish([(w, w.results) for w in late])
            self.commitlog.shutdown()
            self.index.shutdown()
            for cq in self.queues.values():
                cq.shutdown()
            for ext in self.cq_exts.values():
                ext.shutdown()
        self.config.abort_path.unlink(missing_ok=True)

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
        self._put([msg], [_Caller(future, 0, 1, True)])
        return future

    def put_messages(self, msgs: list[MessageExtBrokerInner]) -> Sequence[PutMessageResult]:
        return self.put_messages_async(msgs).result()

    def put_messages_async(
        self, msgs: list[MessageExtBrokerInner]
    ) -> concurrent.futures.Future[Sequence[PutMessageResult]]:
        """Append ``msgs`` under one lock; the future resolves once they are durable per ``flushDiskType``."""
        future: concurrent.futures.Future[Sequence[PutMessageResult]] = concurrent.futures.Future()
        self._put(msgs, [_Caller(future, 0, len(msgs), False)])
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

    def _put_aio(
        self, msgs: list[MessageExtBrokerInner], raws: Sequence[bytes | None] | None, single: bool
    ) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        pending = self._pending_aio.get(loop)
        if pending is None:
            pending = self._pending_aio[loop] = []
            loop.call_soon(self._drain_aio, loop)
        pending.append((msgs, raws, future, single))
        return future

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
            self._put(msgs, [_Caller(future, 0, len(msgs), single)], loop, raws)
            return
        batch: list[MessageExtBrokerInner] = []
        callers: list[_Caller] = []
        with_raws = any(raws is not None for _, raws, _, _ in pending)
        all_raws: list[bytes | None] = []
        for msgs, raws, future, single in pending:
            start = len(batch)
            batch.extend(msgs)
            if with_raws:
                all_raws.extend(raws if raws is not None else [None] * len(msgs))
            callers.append(_Caller(future, start, len(batch), single))
        self._put(batch, callers, loop, all_raws if with_raws else None)

    def _put(
        self,
        msgs: list[MessageExtBrokerInner],
        callers: list[_Caller],
        loop: asyncio.AbstractEventLoop | None = None,
        encoded_properties: Sequence[bytes | None] | None = None,
    ) -> None:
        """Append, dispatch, then answer the callers now (ASYNC_FLUSH) or once a flush covers the batch.

        Asyncio callers (``loop`` given) are answered here only from the loop's own thread."""
        if not self._running:
            _answer(callers, self._not_running(len(msgs)))
            return
        host = self.store_host  # the record carries the host that stored it, as the message id does
        index_jobs: list[tuple[str, tuple[str, ...], str | None, int, int, int]] = []
        index_enabled = self.config.messageIndexEnable
        queues = self.queues
        keys_prop = mc.PROPERTY_KEYS
        uniq_prop = mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
        with self._put_lock:
            if not self._running:  # shutdown() won the lock: the files are closed
                _answer(callers, self._not_running(len(msgs)))
                return
            now = int(self.clock() * 1000)
            batch = codec.AppendBatch(
                msgs, encoded_properties, now, host, self._queue_max, self.config.maxMessageSize, self._max_record_size
            )
            error = self.commitlog.append_batch(batch)
            if error is not None:
                log.error("commitlog append failed", extra={"error": str(error)})
            for key, (first, entries) in batch.cq.items():
                if entries:
                    queues[key].put_batch(first, entries)
            end_offset = self.commitlog.max_offset
            written = batch.written
            n_written = len(written) - len(batch.refused)
            # messages, not records: an inner batch is one record of many
            self.stats.put_messages += sum(len(entries) for _, entries in batch.cq.values())
            self.stats.put_bytes += batch.written_bytes
            if index_enabled and batch.keyed:
                # Built under the lock so the index sees appends in order.
                sizes = batch.sizes
                for i in batch.keyed:
                    msg = msgs[i]
                    props = msg.properties
                    keys = tuple(msg.keys) if keys_prop in props else ()
                    uniq = props.get(uniq_prop)
                    if keys or uniq:
                        index_jobs.append((msg.topic, keys, uniq, written[i], sizes[i], now))
                if index_jobs:
                    self._index_enqueued += 1
                    self._index_queue.put(index_jobs)
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
        if not n_written or self.config.flushDiskType is FlushDiskType.ASYNC_FLUSH:
            _answer(callers, results)
            return
        deadline = time.monotonic() + self.config.syncFlushTimeout / 1000
        waiter = _FlushWaiter(end_offset, deadline, callers, results, loop)
        with self._flush_cond:
            closed = self._flush_closed
            if not closed:
                self._waiters.append(waiter)
                self._flush_cond.notify()
        if closed:  # shutdown's final flush already covered this append
            self._finish([(waiter, results)])

    @staticmethod
    def _not_running(count: int) -> list[PutMessageResult]:
        return [PutMessageResult(PutMessageStatus.SERVICE_NOT_AVAILABLE, error="store is not running")] * count

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
        lost = PutMessageResult(PutMessageStatus.CREATE_MAPPED_FILE_FAILED, error=str(error or "not written"))
        results.extend([lost] * (len(batch.msgs) - len(results)))
        return results

    # ------------------------------------------------------------------ flush services
    def _flush_loop(self) -> None:
        """Group commit (SYNC_FLUSH) or periodic flush (ASYNC_FLUSH) of the commitlog."""
        sync = self.config.flushDiskType is FlushDiskType.SYNC_FLUSH
        interval = 0.01 if sync else self.config.flushIntervalCommitLog / 1000
        while not self._stop.is_set():
            with self._flush_cond:
                if not self._waiters:
                    self._flush_cond.wait(timeout=interval)
                waiters, self._waiters = self._waiters, []
                self._in_flight = waiters
            try:
                flushed = self.commitlog.flush()
            except OSError as exc:
                log.error("commitlog flush failed", extra={"error": str(exc)})
                flushed = -1
            self._complete_waiters(waiters, flushed)
        with self._flush_cond:
            waiters, self._waiters = self._waiters, []
        self._complete_waiters(waiters, self.commitlog.flush())

    def _complete_waiters(self, waiters: list[_FlushWaiter], flushed: int) -> None:
        pending: list[_FlushWaiter] = []
        done: list[tuple[_FlushWaiter, Sequence[PutMessageResult]]] = []
        for w in waiters:
            if w.answered:
                continue  # already answered FLUSH_DISK_TIMEOUT by the timeout watcher
            if w.end_offset <= flushed:
                done.append((w, w.results))
            else:
                pending.append(w)
        self._finish(done)
        with self._flush_cond:
            self._in_flight = []
            self._waiters.extend(pending)

    def _finish(self, items: list[tuple[_FlushWaiter, Sequence[PutMessageResult]]]) -> None:
        """Answer waiters once each; asyncio futures are resolved by one callback per loop."""
        with self._finish_lock:  # the flush thread and the timeout watcher may race for one waiter
            todo = [(w, r) for w, r in items if not w.answered]
            for w, _ in todo:
                w.answered = True
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[list[_Caller], Sequence[PutMessageResult]]]] = {}
        for w, results in todo:
            if w.loop is None:
                _answer(w.callers, results)
            else:
                by_loop.setdefault(w.loop, []).append((w.callers, results))
        for loop, answers in by_loop.items():
            try:
                loop.call_soon_threadsafe(_answer_all, answers)
            except RuntimeError:
                log.warning("event loop closed before its puts were answered", extra={"count": len(answers)})

    def _flush_timeout_loop(self) -> None:
        """Answer FLUSH_DISK_TIMEOUT to writers waiting longer than ``syncFlushTimeout``, even mid-flush."""
        while not self._stop.wait(0.01):
            now = time.monotonic()
            with self._flush_cond:
                candidates = [w for w in (*self._waiters, *self._in_flight) if now >= w.deadline and not w.answered]
            timed_out = [(w, _timed_out(w.results)) for w in candidates]
            if timed_out:
                self._finish(timed_out)

    def _index_loop(self) -> None:
        # A put wakes this thread at the moment its own answers (the woken long polls, the producer's reply) need
        # the GIL, and hashing 50 keys holds it ~0.1 ms. Waiting a little first keeps that off the latency path,
        # and what arrived meanwhile is indexed in one go.
        delay = self.config.indexDispatchDelayMs / 1000
        while True:
            item = self._index_queue.get()
            if delay > 0 and item is not None:
                self._index_wake.wait(delay)
                self._index_wake.clear()
            while item is not None:  # this put's keys, then whatever queued meanwhile, up to a stop
                self._build_index(item)
                try:
                    item = self._index_queue.get_nowait()
                except queue.Empty:
                    break
            else:
                return

    def _build_index(self, item: list[tuple[str, tuple[str, ...], str | None, int, int, int]]) -> None:
        keyed: list[tuple[str, str, int, int]] = []
        add = keyed.append
        for topic, keys, uniq, phys, _, ts in item:
            if uniq:
                add((topic, uniq, phys, ts))
            for key in keys:
                add((topic, key, phys, ts))
        try:
            self.index.build_many(keyed)
        except OSError as exc:
            log.error("index build failed", extra={"error": str(exc)})
        if item:
            _, _, _, phys, size, _ = item[-1]
            self._index_end = phys + size
        with self._index_progress:
            self._index_done += 1
            self._index_progress.notify_all()

    def _await_index(self) -> None:
        """Read-your-writes for key queries: the keys of every put made before the query are indexed first,
        waiting at most ``indexQueryWaitMs`` (the index thread skips its dispatch delay)."""
        target = self._index_enqueued
        if self._index_done >= target or not self._running:
            return
        self._index_wake.set()
        with self._index_progress:
            self._index_progress.wait_for(lambda: self._index_done >= target, self.config.indexQueryWaitMs / 1000)

    def _drain_index_queue(self) -> None:
        while True:
            try:
                item = self._index_queue.get_nowait()
            except queue.Empty:
                return
            if item is not None:
                self._build_index(item)

    def _checkpoint_loop(self) -> None:
        interval = self.config.flushIntervalConsumeQueue / 1000
        while not self._stop.wait(interval):
            try:
                self._checkpoint()
            except OSError as exc:
                log.error("checkpoint failed", extra={"error": str(exc)})

    def _checkpoint(self, final: bool = False) -> None:
        """Flush commitlog, consume queues and index, then record the offsets below which all three are durable."""
        with self._put_lock if not final else contextlib.nullcontext():
            dispatched = self.commitlog.max_offset
            enqueued = self._index_enqueued
            queues = list(self.queues.values())
        # Records without keys never reach the index thread; once it has drained what was queued before the
        # snapshot, everything up to ``dispatched`` is indexed.
        index_end = dispatched if self._index_done >= enqueued else min(self._index_end, dispatched)
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
    def _clean_loop(self) -> None:
        while not self._stop.wait(self.config.cleanResourceInterval / 1000):
            try:
                self.delete_expired_files()
            except OSError as exc:
                log.error("retention failed", extra={"error": str(exc)})

    def delete_expired_files(self, force: bool = False) -> int:
        """Delete commitlog segments older than ``fileReservedTime`` at ``deleteWhen`` (or when the disk is
        fuller than ``diskMaxUsedSpaceRatio``, or ``force``); never the segment being written. Returns the count."""
        now = self.clock()
        hour = time.localtime(now).tm_hour
        disk_full = self.disk_usage(self.config.commitlog_dir) * 100 >= self.config.diskMaxUsedSpaceRatio
        if not (force or disk_full or hour in self.config.delete_hours()):
            return 0
        reserved = self.config.fileReservedTime * 3600

        budget = [1 if disk_full and not force else 1 << 30]  # a full disk frees one segment per round

        def expired(mf: MappedFile) -> bool:
            if budget[0] <= 0 or not (disk_full or mf.mtime() + reserved <= now):
                return False
            budget[0] -= 1
            return True

        with self._put_lock:
            deleted = self.commitlog.files.delete_first(expired, keep_last=True)
            if deleted:
                min_offset = self.commitlog.min_offset
                for cq in self.queues.values():
                    cq.delete_expired(min_offset)
                for key, ext in self.cq_exts.items():
                    ext.delete_before(self.get_min_offset_in_queue(*key))
                self.index.delete_expired(min_offset)
                log.info("retention deleted segments", extra={"count": len(deleted), "min_offset": min_offset})
        return len(deleted)

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
        return self._get(topic, queue_id, offset, max_msg_nums, message_filter, max_total_bytes, raw=False)

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
        return self._get(topic, queue_id, offset, max_msg_nums, message_filter, max_total_bytes, raw=True)

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
        return self._get(topic, queue_id, offset, max_msg_nums, message_filter, max_total_bytes, True, spans=True)

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
                msg = self.read_message(phys, size, entry_offset)
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
                result.raw, result.raw_count = self._read_spans(selected_spans)
            count = result.raw_count if raw else len(messages)
        self.stats.got_messages += count
        if count:
            result.status = GetMessageStatus.FOUND
        elif removing:
            result.status = GetMessageStatus.MESSAGE_WAS_REMOVING
        return result

    def _read_spans(self, spans: list[tuple[int, int, int]]) -> tuple[bytes, int]:
        """The records of ``spans`` end to end (see ``read_records``), and how many; stops at the first gone."""
        parts, gone = self.read_records(spans)
        if gone:
            n = gone[0]
            kept = 0
            out: list[bytes] = []
            for part_spans, part in parts:
                if kept + part_spans > n:
                    break
                out.append(part)
                kept += part_spans
            return b"".join(out), kept
        if len(parts) == 1:
            return parts[0][1], len(spans)
        return b"".join(part for _, part in parts), len(spans)

    def read_records(self, spans: Sequence[tuple[int, int, int]]) -> tuple[list[tuple[int, bytes]], list[int]]:
        """The stored records of ``spans`` (queue offset, commitlog offset, size), in order, as (how many spans,
        bytes) parts, and the indexes of the spans whose record is gone (retention deleted its segment).

        A run of records adjacent in the CommitLog is one slice of the segment. A message of an inner batch comes
        as a record of its own (``codec.unwrap_raw``), so readers never see a batch whole."""
        parts: list[tuple[int, bytes]] = []
        gone: list[int] = []
        read_raw = self.commitlog.read_raw
        physs = [s[1] for s in spans]
        i, n = 0, len(spans)
        while i < n:
            start = physs[i]
            end, j, prev = start + spans[i][2], i + 1, start
            while j < n:
                phys = physs[j]
                if phys == end:
                    end += spans[j][2]
                elif phys != prev:  # not adjacent, nor the next message of the same inner batch
                    break
                prev = phys
                j += 1
            chunk = read_raw(start, end - start)
            if chunk is None:  # gone, or the run crosses a segment end: record by record, each record read once
                record: bytes | None = None
                record_phys = -1
                for k in range(i, j):
                    queue_offset, phys, size = spans[k]
                    if phys != record_phys:
                        record, record_phys = read_raw(phys, size), phys
                    if record is None:
                        gone.append(k)
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
        return parts, gone

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
        or when no queue offset says which message of the batch is meant)."""
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
        """The message stored at ``commitlog_offset``; a message of an inner batch also needs its ``queue_offset``."""
        return self.read_message(commitlog_offset, size, queue_offset)

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
        self._await_index()
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

    def get_max_phy_offset(self) -> int:
        return self.commitlog.max_offset

    def get_min_phy_offset(self) -> int:
        return self.commitlog.min_offset

    def dispatch_behind_bytes(self) -> int:
        if not self.config.messageIndexEnable or self._index_done >= self._index_enqueued:
            return 0
        return max(0, self.commitlog.max_offset - self._index_end)


_FLAG_BYTE = OFF_SYS_FLAG + 3  # the low byte of the big-endian sys flag
assert INNER_BATCH_FLAG == 0x80  # read_records tests the flag as "low byte >= 0x80"


def _queue_offset(record: bytes) -> int:
    return int.from_bytes(record[OFF_QUEUE_OFFSET : OFF_QUEUE_OFFSET + 8], "big")


def _disk_usage_ratio(path: Path) -> float:
    path.mkdir(parents=True, exist_ok=True)
    usage = shutil.disk_usage(path)
    return usage.used / usage.total if usage.total else 0.0
