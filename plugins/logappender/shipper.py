"""``LogShipper``, the core the three adapters share: a bounded queue, one background sender thread that batches
records into ``send_batch`` calls, retries with a capped backoff, an optional disk spool, and deadlines.

The logging thread only appends to a deque (``offer``); serializing, packing, sending and spooling happen on the
sender thread. Counters say where every accepted record went; a stderr line reports drops at most once per
``warn_interval``. Shippers close at exit (before ``oms`` shuts its access points down) and start afresh in a
forked child.
"""

from __future__ import annotations

import atexit
import multiprocessing.util
import os
import sys
import threading
import time
import weakref
from collections import deque
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from plugins.logappender.config import AppenderConfig, OverflowPolicy
from plugins.logappender.record import BatchEncoder, OutMessage, pack_encoded
from plugins.logappender.spool import DiskSpool, SpoolError
from plugins.logappender.transport import Failure, OmsTransport, Ordering, RelayTransport, SendFailed, Transport


class _SenderState(threading.local):
    """``active`` is True on sender threads: their records never re-enter a queue. A class default, because
    ``getattr(local, name, default)`` raises and catches an AttributeError on every other thread: about 1 us of
    every logging call."""

    active = False


sender_state = _SenderState()
_live: weakref.WeakSet[LogShipper] = weakref.WeakSet()
IDLE_WAIT_S = 1.0  # an idle sender still looks at the spool's age and the drop counters this often


def in_sender_thread() -> bool:
    return sender_state.active


def client_thread() -> bool:
    """True on threads of the messaging client (its loop), where blocking for queue room could deadlock."""
    return threading.current_thread().name.startswith("oms-")


@dataclass(frozen=True)
class Counters:
    """Where the records went. ``accepted`` = ``sent`` (from memory) + ``spooled`` + ``dropped_error`` +
    records evicted by ``drop_oldest`` + ``queued`` + in flight; ``replayed`` counts records sent from the spool
    (``sent`` includes them), ``dropped_spool`` records the spool's size or age limits deleted."""

    accepted: int
    sent: int
    dropped_overflow: int
    dropped_error: int
    spooled: int
    replayed: int
    dropped_spool: int
    queued: int


@dataclass
class _Batch:
    messages: list[OutMessage]
    records: int
    from_memory: bool  # False: replayed from a spool file (already settled when spooled)
    abandoned: bool = False  # close() gave up on it and accounted for it


class LogShipper:
    """One queue and one sender thread; ``offer`` items that ``encode`` turns into rows on the sender thread, a
    batch at a time."""

    def __init__(self, config: AppenderConfig, encode: BatchEncoder, appender_type: str) -> None:
        self.config = config
        self._encode = encode
        self._appender_type = appender_type
        self._reset(forked=False)
        _live.add(self)
        if self._spool is not None and self._spool.files():
            self._start()  # replay what an earlier run left, even if this one never logs

    def _reset(self, forked: bool) -> None:
        cfg = self.config
        self._queue: deque[Any] = deque()
        self._max = cfg.queue_size
        self._policy = cfg.overflow
        self._lock = threading.Lock()
        self._space = threading.Condition(self._lock)  # blocked offers wait here
        self._progress = threading.Condition(threading.Lock())  # flushers wait here
        self._start_lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._stopping = False
        self._abandon = False
        self._flushing = 0
        self._blocked = 0
        self._taken = 0  # items the sender (or close) took from the queue; only those threads write it
        self._evicted = 0  # items drop_oldest pushed out of the queue (under the lock)
        self._settled = 0
        self._batch_max = cfg.batch_max_records
        self._sent = self._dropped_overflow = self._dropped_error = 0
        self._spooled = self._replayed = self._dropped_spool = 0
        self._reported = (0, 0, 0)
        self._last_warning = 0.0
        self._next_seq = 1  # the sequence number of the next record taken (under the lock)
        self._packing = False  # the last batch packed: the load is heavy (see _step)
        self._ordering = Ordering.GROUP if cfg.ordered else Ordering.NONE
        self._pending: _Batch | None = None  # failed batch awaiting retry (no spool)
        self._inflight: _Batch | None = None
        self._batch_lock = threading.Lock()
        self._retry_at = 0.0
        self._backoff = cfg.retry_backoff
        self._spool = DiskSpool(cfg.spool_dir, cfg.spool_max_bytes, cfg.spool_max_age) if cfg.spool_dir else None
        self._transport: Transport = (
            RelayTransport(cfg, self._appender_type) if forked else OmsTransport(cfg, self._appender_type)
        )

    # -- the logging thread's side ------------------------------------------------------------------------------

    def offer(self, item: Any) -> bool:
        """Queue ``item`` without blocking (unless the policy is ``block``); False if it was dropped.

        The common case takes no lock: ``deque.append`` is atomic, and threads racing past the size check can
        overshoot ``queue_size`` by at most one record each."""
        if self._thread is None:
            self._start()
        queue = self._queue
        if len(queue) >= self._max or self._closed:
            return self._offer_full(item)
        queue.append(item)
        n = len(queue)
        if n == 1 or n == self._batch_max:
            self._wake.set()
        return True

    def _offer_full(self, item: Any) -> bool:
        with self._lock:
            if self._closed:
                self._dropped_error += 1
                return False
            queue = self._queue
            if len(queue) >= self._max:
                policy = self._policy
                if policy is OverflowPolicy.DROP_OLDEST:
                    try:
                        queue.popleft()
                    except IndexError:  # the sender took everything meanwhile
                        pass
                    else:
                        self._evicted += 1
                        self._dropped_overflow += 1
                        self._settled += 1
                elif policy is OverflowPolicy.BLOCK and not in_sender_thread() and not client_thread():
                    self._blocked += 1
                    try:
                        room = self._space.wait_for(lambda: len(queue) < self._max, self.config.block_timeout)
                    finally:
                        self._blocked -= 1
                    if not room:
                        self._dropped_overflow += 1
                        return False
                else:
                    self._dropped_overflow += 1
                    return False
            queue.append(item)
        self._wake.set()
        return True

    def _accepted(self) -> int:
        return self._taken + self._evicted + len(self._queue)

    def counters(self) -> Counters:
        with self._lock:
            return Counters(
                accepted=self._accepted(),
                sent=self._sent,
                dropped_overflow=self._dropped_overflow,
                dropped_error=self._dropped_error,
                spooled=self._spooled,
                replayed=self._replayed,
                dropped_spool=self._dropped_spool,
                queued=len(self._queue),
            )

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every record accepted so far was sent, spooled or dropped; False if ``timeout`` passed."""
        if in_sender_thread():
            return False
        timeout = self.config.flush_timeout if timeout is None else timeout
        with self._lock:
            target = self._accepted()
            if self._settled >= target:
                return True
            self._flushing += 1
        try:
            self._wake.set()
            deadline = time.monotonic() + timeout
            with self._progress:
                while True:
                    with self._lock:
                        if self._settled >= target:
                            return True
                    remaining = deadline - time.monotonic()
                    thread = self._thread
                    if remaining <= 0 or thread is None or not thread.is_alive():
                        return False
                    self._progress.wait(min(remaining, 0.1))
        finally:
            with self._lock:
                self._flushing -= 1

    def close(self, timeout: float | None = None) -> bool:
        """Flush and stop within ``timeout`` (default ``close_timeout``); what is left then is spooled, or counted
        as ``dropped_error``. Returns True if everything was sent or spooled in time. Idempotent."""
        timeout = self.config.close_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        with self._lock:
            if self._closed:
                return True
            self._closed = True
            self._space.notify_all()
        _live.discard(self)
        thread = self._thread
        clean = True
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            clean = self.flush(max(0.0, deadline - time.monotonic()))
            self._stopping = True
            self._wake.set()
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                clean = False
                self._give_up()
        elif thread is None:
            self._close_transport()
        if self._queue and (thread is None or not thread.is_alive()):
            self._abandon = True
            self._give_up()  # records that raced past the closed flag: spooled or counted, never silent
        self._report(final=True)
        return clean

    # -- sender thread ------------------------------------------------------------------------------------------

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is not None or self._closed:
                return
            thread = threading.Thread(target=self._run, name=f"orbitmq-log-sender-{self.config.topic}", daemon=True)
            self._thread = thread
            thread.start()

    def _run(self) -> None:
        sender_state.active = True
        try:
            while not self._abandon:
                if not self._step():
                    break
                self._report()
        except BaseException as exc:  # a bug here must not go unnoticed, and must not take the app down
            print(f"orbitmq log appender: sender thread failed: {exc!r}", file=sys.stderr, flush=True)
            raise
        finally:
            if not self._abandon:
                self._close_transport()
            self._notify_progress()

    def _step(self) -> bool:
        """One round of work; False when the shipper stopped and nothing is left."""
        if self._pending is not None:
            if self._wait_retry():
                self._send(self._pending)
            return True
        if self._stopping and not self._queue:
            return False  # what the spool holds is replayed by the next run
        if self._spool is not None and self._spool_busy():
            self._spool_round()
            return True
        if not self._queue:
            self._wake.clear()
            if not self._queue and not self._stopping:
                self._wake.wait(IDLE_WAIT_S)
            if not self._queue:
                return True
            self._linger()  # the first record after a quiet spell waits a little for company
        elif self._packing and len(self._queue) <= self.config.pack_over:
            # Under a heavy load the queue is rarely empty, but a sender that took whatever was there would send
            # small batches one record per message (the client's dearest path: about 50 us of CPU each) and wake
            # up, and take the GIL, once per handful of records: while batches pack, a handful waits for company.
            # At a modest rate (batches too small to pack) records go as soon as the previous send is done.
            self._linger()
        batch = self._take()
        if batch is not None:
            self._send(batch)
        return True

    def _linger(self) -> None:
        """Give a first record ``linger`` seconds for company."""
        self._gather(time.monotonic() + self.config.linger)

    def _gather(self, deadline: float) -> None:
        """Wait until ``deadline`` for records to collect, unless a flush, a stop or a full batch says go."""
        limit = min(self.config.batch_max_records, max(1, self._max // 2))
        while len(self._queue) < limit and not self._stopping and not self._flushing:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            self._wake.clear()
            if len(self._queue) >= limit:
                return
            self._wake.wait(min(remaining, 0.05))  # offers wake only for a first or a full-batch record

    def _take(self) -> _Batch | None:
        """Up to ``batch_max_records`` queued items, serialized and packed."""
        queue = self._queue
        with self._lock:  # close() may take what a stuck sender left: sequence numbers are reserved here
            # popped in C under the lock: drop_oldest evicts under it too, so the n items are there (offers only add)
            items = list(map(deque.popleft, repeat(queue, min(len(queue), self.config.batch_max_records))))
            self._taken += len(items)
            first_seq = self._next_seq
            self._next_seq += len(items)
            if self._blocked:
                self._space.notify_all()
        encoded = self._encode(items, first_seq)
        del items  # the queued records go now, before the batch is packed and sent
        if encoded.failed:
            self._warn_once(f"a record could not be serialized and was dropped: {encoded.error!r}")
            self._settle(encoded.failed, dropped_error=encoded.failed)
        n = len(encoded)
        if not n:
            return None
        cfg = self.config
        self._packing = n > cfg.pack_over and cfg.records_per_message > 1
        messages = pack_encoded(encoded, cfg.records_per_message, cfg.max_message_bytes, cfg.pack_over)
        return _Batch(messages, n, from_memory=True)

    def _send(self, batch: _Batch) -> bool:
        """Send one batch; True when done with it (stored, or refused for good), False to try again."""
        with self._batch_lock:
            if batch.abandoned:
                return False
            self._inflight = batch
        try:
            self._transport.send(batch.messages, self.config.send_timeout, self._ordering)
        except SendFailed as exc:
            return self._failed(batch, exc)
        finally:
            with self._batch_lock:
                self._inflight = None
                abandoned = batch.abandoned
        if abandoned:
            return True
        self._pending = None
        self._backoff = self.config.retry_backoff
        self._retry_at = 0.0
        with self._lock:
            self._sent += batch.records
            if batch.from_memory:
                self._settled += batch.records
            else:
                self._replayed += batch.records
        self._notify_progress()
        return True

    def _failed(self, batch: _Batch, exc: SendFailed) -> bool:
        if batch.abandoned:
            return True
        if exc.failure is Failure.UNORDERED and self._ordering is not Ordering.NONE:
            if self._ordering is Ordering.GROUP:
                # a NORMAL topic: the process's records keep their order in one queue (RocketMQ 4 partition order);
                # nothing to warn about, and no logging from the shipper (it may be the root logger's handler)
                self._ordering = Ordering.QUEUE
            else:
                self._ordering = Ordering.NONE
                self._warn_once(
                    f"topic {self.config.topic!r} takes neither FIFO messages nor a chosen queue ({exc}); records "
                    "are sent unordered from now on, so consumers must order them by their 'seq'"
                )
            self._pending = batch if batch.from_memory else None
            return False
        if exc.failure is Failure.DROP:
            self._pending = None
            self._warn_once(f"the broker refused {batch.records} records: {exc}")
            if batch.from_memory:
                self._settle(batch.records, dropped_error=batch.records)
            else:
                with self._lock:
                    self._dropped_spool += batch.records
            return True
        self._retry_at = time.monotonic() + self._backoff
        self._backoff = min(self._backoff * 2, self.config.retry_backoff_max)
        if batch.from_memory and self._spool is not None:
            self._pending = None
            self._to_spool(batch)
            return True
        if batch.from_memory:
            self._pending = batch  # retried first: later records wait behind it, so order is kept
        return False

    def _wait_retry(self) -> bool:
        """Sleep until the backoff ends (at most ``IDLE_WAIT_S``); True if it did."""
        remaining = self._retry_at - time.monotonic()
        if remaining <= 0:
            return True
        time.sleep(min(remaining, 0.05 if self._stopping else IDLE_WAIT_S))
        return self._retry_at <= time.monotonic()

    # -- spool --------------------------------------------------------------------------------------------------

    def _spool_busy(self) -> bool:
        """True while the spool holds batches: new records go behind them so the order stays."""
        spool = self._spool
        return spool is not None and bool(spool.files())

    def _spool_round(self) -> None:
        spool = self._spool
        assert spool is not None
        while self._queue:  # memory goes behind what is on disk
            batch = self._take()
            if batch is not None:
                self._to_spool(batch)
        expired = spool.expire()
        if expired:
            with self._lock:
                self._dropped_spool += expired
        if self._retry_at > time.monotonic():
            self._gather(min(self._retry_at, time.monotonic() + IDLE_WAIT_S))  # fewer, bigger spool files
            return
        try:
            claimed = spool.claim_oldest()
        except SpoolError as exc:
            self._warn_once(str(exc))
            return
        if claimed is None:
            return
        path, messages, records = claimed
        if self._send(_Batch(messages, records, from_memory=False)):
            spool.done(path)
        else:
            spool.release(path)

    def _to_spool(self, batch: _Batch) -> None:
        spool = self._spool
        assert spool is not None
        try:
            written, evicted = spool.write(batch.messages)
        except SpoolError as exc:
            self._warn_once(str(exc))
            self._settle(batch.records, dropped_error=batch.records)
            return
        with self._lock:
            self._spooled += written
            self._dropped_spool += evicted
            self._settled += batch.records
        self._notify_progress()

    # -- close --------------------------------------------------------------------------------------------------

    def _give_up(self) -> None:
        """The deadline passed with the sender still busy: account for the queue, the failed batch and the batch
        in flight (spool them, else count them as dropped), and leave the sender to die with the process."""
        self._abandon = True
        left: list[_Batch] = []
        with self._batch_lock:
            for batch in (self._inflight, self._pending):
                if batch is not None and not batch.abandoned and batch.from_memory:
                    batch.abandoned = True
                    left.append(batch)
        while self._queue:
            batch = self._take()
            if batch is not None:
                left.append(batch)
        for batch in left:
            if self._spool is not None:
                self._to_spool(batch)
            else:
                self._settle(batch.records, dropped_error=batch.records)

    def _close_transport(self) -> None:
        try:
            self._transport.close()
        except Exception as exc:
            print(f"orbitmq log appender: closing the producer failed: {exc!r}", file=sys.stderr, flush=True)

    # -- accounting and reports ---------------------------------------------------------------------------------

    def _settle(self, records: int, *, dropped_error: int = 0) -> None:
        with self._lock:
            self._dropped_error += dropped_error
            self._settled += records
        self._notify_progress()

    def _notify_progress(self) -> None:
        with self._progress:
            self._progress.notify_all()

    def _warn_once(self, text: str) -> None:
        now = time.monotonic()
        if now - self._last_warning >= self.config.warn_interval or self._last_warning == 0.0:
            self._last_warning = now
            print(f"orbitmq log appender (topic {self.config.topic}): {text}", file=sys.stderr, flush=True)

    def _report(self, final: bool = False) -> None:
        """A stderr line when records were dropped since the last one, at most once per ``warn_interval``."""
        with self._lock:
            now_counts = (self._dropped_overflow, self._dropped_error, self._dropped_spool)
        if now_counts == self._reported:
            return
        now = time.monotonic()
        if not final and self._last_warning and now - self._last_warning < self.config.warn_interval:
            return
        overflow, error, spool = (a - b for a, b in zip(now_counts, self._reported, strict=True))
        self._reported = now_counts
        self._last_warning = now
        print(
            f"orbitmq log appender (topic {self.config.topic}): dropped {overflow} records (queue full, policy "
            f"{self.config.overflow.value}), {error} (send errors or closed), {spool} (spool limits) since the last "
            "report",
            file=sys.stderr,
            flush=True,
        )

    def __repr__(self) -> str:
        return f"LogShipper(topic={self.config.topic!r}, {self.counters()})"


def close_all(timeout: float | None = None) -> None:
    """Close every live shipper (each within its own ``close_timeout``, or ``timeout``)."""
    for shipper in list(_live):
        shipper.close(timeout)


def _after_fork_in_child() -> None:
    # Threads do not survive fork and the parent's locks may have been held: every shipper starts afresh; records
    # queued before the fork are the parent's to send. gRPC cannot be used here, so the child sends via a relay.
    for shipper in list(_live):
        shipper._reset(forked=True)


class _MultiprocessingChild:
    """multiprocessing's children end with ``os._exit`` (no atexit): close the shippers from its finalizers."""

    @staticmethod
    def register(_: object) -> None:
        # runs in the child after multiprocessing cleared the parent's finalizers; priority: before its own
        multiprocessing.util.Finalize(None, close_all, exitpriority=100)


_MP_HOOK = _MultiprocessingChild()

# Registered after ``oms`` was imported, so it runs before oms closes its access points at exit (atexit is LIFO).
atexit.register(close_all)
os.register_at_fork(after_in_child=_after_fork_in_child)
multiprocessing.util.register_after_fork(_MP_HOOK, _MultiprocessingChild.register)
