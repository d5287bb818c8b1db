"""CommitLog flush services: group commit with its timeout watcher (SYNC_FLUSH) or the periodic flush (ASYNC_FLUSH).

RocketMQ's CommitLog.GroupCommitService and FlushRealTimeService; the store hands a SYNC_FLUSH put's callers over
once the records are appended, and the group commit answers them when an fdatasync covers their end offset.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from broker.store.commitlog import CommitLog
from broker.store.config import FlushDiskType, MessageStoreConfig
from broker.store.results import PutMessageResult, PutMessageStatus, PutResults

log = logging.getLogger(__name__)

AnyFuture = concurrent.futures.Future[Any] | asyncio.Future[Any]


@dataclass(slots=True)
class PutCaller:
    """One caller's share of a put: its future and where its messages sit in the appended batch."""

    future: AnyFuture
    start: int
    end: int
    single: bool  # the future wants one result, not a list

    def value(self, results: Sequence[PutMessageResult]) -> Any:
        if self.single:
            return results[self.start]
        if self.start == 0 and self.end == len(results):
            return results
        return results[self.start : self.end]


def answer(callers: list[PutCaller], results: Sequence[PutMessageResult]) -> None:
    for c in callers:
        if not c.future.done():  # an asyncio caller may have been cancelled meanwhile
            c.future.set_result(c.value(results))


def _answer_all(answers: list[tuple[list[PutCaller], Sequence[PutMessageResult]]]) -> None:
    for callers, results in answers:
        answer(callers, results)


def _timed_out(results: Sequence[PutMessageResult]) -> Sequence[PutMessageResult]:
    """``results`` answered FLUSH_DISK_TIMEOUT: stored, but not known to be durable."""
    if isinstance(results, PutResults):
        return results.with_status(PutMessageStatus.FLUSH_DISK_TIMEOUT, "flush timed out")
    return [
        PutMessageResult(PutMessageStatus.FLUSH_DISK_TIMEOUT, r.append_result, "flush timed out") if r.ok else r
        for r in results
    ]


@dataclass(order=True)
class GroupCommitRequest:
    """A put waiting for the flush to pass ``end_offset``, answered once: flushed, timed out or at shutdown."""

    end_offset: int
    deadline: float = field(compare=False)
    callers: list[PutCaller] = field(compare=False)
    results: Sequence[PutMessageResult] = field(compare=False)
    loop: asyncio.AbstractEventLoop | None = field(default=None, compare=False)  # set for asyncio futures
    answered: bool = field(default=False, compare=False)


class FlushRealTimeService:
    """ASYNC_FLUSH: puts are answered once appended; this thread fdatasyncs every ``flushIntervalCommitLog`` ms."""

    def __init__(self, commitlog: CommitLog, config: MessageStoreConfig, stop: threading.Event) -> None:
        self._commitlog = commitlog
        self._config = config
        self._stop = stop

    def threads(self) -> list[threading.Thread]:
        return [threading.Thread(target=self._run, name="FlushRealTimeService", daemon=True)]

    def open(self) -> None:
        """Nothing waits on this service: puts are answered before their flush."""

    def wake(self) -> None:
        """The loop waits on the store's stop event, which ``shutdown`` sets."""

    def close(self) -> None:
        """Nothing waits on this service."""

    def _run(self) -> None:
        while not self._stop.wait(self._config.flushIntervalCommitLog / 1000):
            try:
                self._commitlog.flush()
            except OSError as exc:
                log.error("commitlog flush failed", extra={"error": str(exc)})
        self._commitlog.flush()


class GroupCommitService:
    """SYNC_FLUSH: one fdatasync for every put waiting, each answered when a flush covers its end offset; a watcher
    answers FLUSH_DISK_TIMEOUT to those waiting longer than ``syncFlushTimeout``, even mid-flush."""

    def __init__(self, commitlog: CommitLog, config: MessageStoreConfig, stop: threading.Event) -> None:
        self._commitlog = commitlog
        self._config = config
        self._stop = stop
        self._requests: list[GroupCommitRequest] = []
        self._in_flight: list[GroupCommitRequest] = []
        self._finish_lock = threading.Lock()
        self._cond = threading.Condition()
        self._closed = False

    def threads(self) -> list[threading.Thread]:
        return [
            threading.Thread(target=self._run, name="GroupCommitService", daemon=True),
            threading.Thread(target=self._timeout_loop, name="FlushTimeoutService", daemon=True),
        ]

    def open(self) -> None:
        self._closed = False

    def wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def submit(
        self,
        end_offset: int,
        callers: list[PutCaller],
        results: Sequence[PutMessageResult],
        loop: asyncio.AbstractEventLoop | None,
    ) -> None:
        """Answer ``callers`` once the CommitLog is flushed past ``end_offset`` (asyncio callers on ``loop``)."""
        request = GroupCommitRequest(
            end_offset, time.monotonic() + self._config.syncFlushTimeout / 1000, callers, results, loop
        )
        with self._cond:
            closed = self._closed
            if not closed:
                self._requests.append(request)
                self._cond.notify()
        if closed:  # shutdown's final flush already covered this append
            self._finish([(request, results)])

    def close(self) -> None:
        """After the final flush (under the store's put lock): answer the puts that appended before the lock but
        queued their request after the flush thread left; the final checkpoint flushed their records."""
        with self._cond:
            self._closed = True
            late, self._requests = self._requests, []
        self._finish([(r, r.results) for r in late])

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                if not self._requests:
                    self._cond.wait(timeout=0.01)
                requests, self._requests = self._requests, []
                self._in_flight = requests
            try:
                flushed = self._commitlog.flush()
            except OSError as exc:
                log.error("commitlog flush failed", extra={"error": str(exc)})
                flushed = -1
            self._complete(requests, flushed)
        with self._cond:
            requests, self._requests = self._requests, []
        self._complete(requests, self._commitlog.flush())

    def _complete(self, requests: list[GroupCommitRequest], flushed: int) -> None:
        pending: list[GroupCommitRequest] = []
        done: list[tuple[GroupCommitRequest, Sequence[PutMessageResult]]] = []
        for r in requests:
            if r.answered:
                continue  # already answered FLUSH_DISK_TIMEOUT by the timeout watcher
            if r.end_offset <= flushed:
                done.append((r, r.results))
            else:
                pending.append(r)
        self._finish(done)
        with self._cond:
            self._in_flight = []
            self._requests.extend(pending)

    def _finish(self, items: list[tuple[GroupCommitRequest, Sequence[PutMessageResult]]]) -> None:
        """Answer requests once each; asyncio futures are resolved by one callback per loop."""
        with self._finish_lock:  # the flush thread and the timeout watcher may race for one request
            todo = [(r, res) for r, res in items if not r.answered]
            for r, _ in todo:
                r.answered = True
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[list[PutCaller], Sequence[PutMessageResult]]]] = {}
        for r, results in todo:
            if r.loop is None:
                answer(r.callers, results)
            else:
                by_loop.setdefault(r.loop, []).append((r.callers, results))
        for loop, answers in by_loop.items():
            try:
                loop.call_soon_threadsafe(_answer_all, answers)
            except RuntimeError:
                log.warning("event loop closed before its puts were answered", extra={"count": len(answers)})

    def _timeout_loop(self) -> None:
        while not self._stop.wait(0.01):
            now = time.monotonic()
            with self._cond:
                candidates = [r for r in (*self._requests, *self._in_flight) if now >= r.deadline and not r.answered]
            timed_out = [(r, _timed_out(r.results)) for r in candidates]
            if timed_out:
                self._finish(timed_out)


FlushCommitLogService = FlushRealTimeService | GroupCommitService


def flush_service(commitlog: CommitLog, config: MessageStoreConfig, stop: threading.Event) -> FlushCommitLogService:
    """The CommitLog's flush service for ``flushDiskType``; both stop when ``stop`` is set."""
    if config.flushDiskType is FlushDiskType.SYNC_FLUSH:
        return GroupCommitService(commitlog, config, stop)
    return FlushRealTimeService(commitlog, config, stop)
