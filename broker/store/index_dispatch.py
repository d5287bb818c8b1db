"""The IndexDispatchService: a thread that puts the keys and unique keys of appended messages into the IndexFile.

A put hands over one ``IndexJob`` under the put lock (so the index sees appends in order) and neither waits for it
nor wakes the thread; key queries wait for the jobs of earlier puts (read-your-writes).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Sequence
from typing import NamedTuple

from broker.store.codec import AppendBatch
from broker.store.config import MessageStoreConfig
from broker.store.index_file import IndexService
from broker.store.plain_batch import ColumnBatch, PlainBatch
from orbitmq import message_const as mc

log = logging.getLogger(__name__)


class KeyColumns(NamedTuple):
    """Keys of one topic as columns, in index order: ``keys[i]`` names the record at ``offsets[i]`` (per message its
    unique key, then its ``KEYS``). Lists, not a tuple per message: a put of a thousand messages builds three."""

    topic: str
    keys: list[str]
    offsets: list[int]


class IndexJob(NamedTuple):
    """The keyed messages of one put, in append order: one run per stretch of messages of one topic."""

    runs: list[KeyColumns]
    store_timestamp: int  # ms, the same for every message of the put
    end_offset: int  # the end of the last keyed record: the index covers up to here once the job is built


def index_job(batch: AppendBatch, store_timestamp: int) -> IndexJob | None:
    """The job for the keyed messages ``batch`` wrote, None when none carries a key (call under the put lock)."""
    if not batch.keyed:
        return None
    msgs, written, keyed = batch.msgs, batch.written, batch.keyed
    last = keyed[-1]
    if type(msgs) is PlainBatch:  # an id each, maybe keys (checked ASCII words): no message object needed
        ids = [msgs.scanned.unique_keys[i].decode("ascii") for i in keyed]
        run = _run_of(msgs.topic, ids, keyed, written, msgs.scanned.keys)
        return IndexJob([run], store_timestamp, written[last] + batch.sizes[last])
    if type(msgs) is ColumnBatch:  # an id each, maybe keys: read from the columns
        uniqs = msgs.unique_keys
        run = _run_of(msgs.topic, [uniqs[i] for i in keyed], keyed, written, msgs.keys)
        return IndexJob([run], store_timestamp, written[last] + batch.sizes[last])
    keys_prop = mc.PROPERTY_KEYS
    uniq_prop = mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
    runs: list[KeyColumns] = []
    topic = ""
    keys: list[str] = []
    offsets: list[int] = []
    last = -1
    for i in keyed:
        msg = msgs[i]
        props = msg.properties
        uniq = props.get(uniq_prop)
        more = msg.keys if keys_prop in props else []
        if not (uniq or more):
            continue
        if msg.topic != topic or not runs:
            topic, keys, offsets = msg.topic, [], []
            runs.append(KeyColumns(topic, keys, offsets))
        phys = written[i]
        if uniq:
            keys.append(uniq)
            offsets.append(phys)
        keys.extend(more)
        offsets.extend([phys] * len(more))
        last = i
    if not runs:
        return None
    return IndexJob(runs, store_timestamp, written[last] + batch.sizes[last])


def _run_of(
    topic: str, ids: list[str], keyed: list[int], written: list[int], keys_of: Sequence[bytes | str | None]
) -> KeyColumns:
    """The run of a plain or column batch: an id per message (``ids``, in ``keyed`` order), maybe ``KEYS``
    (``keys_of``, by message index, separated by spaces as stored)."""
    if not any(keys_of):
        return KeyColumns(topic, ids, [written[i] for i in keyed])
    keys: list[str] = []
    offsets: list[int] = []
    sep = mc.KEY_SEPARATOR
    for uniq, i in zip(ids, keyed, strict=True):
        phys = written[i]
        keys.append(uniq)
        offsets.append(phys)
        raw = keys_of[i]
        if raw:
            more = [k for k in (raw.decode("ascii") if isinstance(raw, bytes) else raw).split(sep) if k]
            keys.extend(more)
            offsets.extend([phys] * len(more))
    return KeyColumns(topic, keys, offsets)


class IndexDispatchService:
    """Builds the index from the jobs puts submit, on its own clock: every ``indexDispatchDelayMs`` while jobs keep
    coming, every ``indexDispatchIdleMs`` once a look found none; a key query or a stop wakes it at once."""

    def __init__(self, index: IndexService, config: MessageStoreConfig) -> None:
        self._index = index
        self._config = config
        self._jobs: deque[IndexJob] = deque()  # appended under the put lock, taken by the thread (or drain())
        self.end_offset = 0  # end of the last record the thread finished
        self.enqueued = 0  # jobs submitted (written under the put lock)
        self.done = 0  # jobs built
        self._stopping = False
        self._wake = threading.Event()  # a key query or a stop cuts the wait short
        self._progress = threading.Condition()  # notified as each job is built

    def threads(self) -> list[threading.Thread]:
        return [threading.Thread(target=self._run, name="IndexDispatchService", daemon=True)]

    def reset(self, end_offset: int) -> None:
        """After recovery: everything before ``end_offset`` is indexed."""
        self.end_offset = end_offset

    def submit(self, job: IndexJob) -> None:
        """Queue ``job`` (under the put lock, so jobs queue in append order)."""
        self.enqueued += 1
        self._jobs.append(job)

    def stop(self) -> None:
        """End the thread once it has built what is queued."""
        self._stopping = True
        self._wake.set()

    def drain(self) -> int:
        """Build what is still queued (the thread's work; at shutdown, jobs of puts that raced with the stop)."""
        built = 0
        while True:
            try:
                job = self._jobs.popleft()
            except IndexError:
                return built
            self._build(job)
            built += 1

    def indexed_until(self, dispatched: int, enqueued: int) -> int:
        """Where the index is complete, given the CommitLog end ``dispatched`` and the jobs ``enqueued`` until then.

        Records without keys never reach the thread; once it has built what was queued before the snapshot,
        everything up to ``dispatched`` is indexed."""
        return dispatched if self.done >= enqueued else min(self.end_offset, dispatched)

    def behind_bytes(self, max_offset: int) -> int:
        """How far the index is behind the CommitLog end ``max_offset`` (0 when nothing is queued)."""
        if self.done >= self.enqueued:
            return 0
        return max(0, max_offset - self.end_offset)

    def await_jobs(self) -> None:
        """Read-your-writes for key queries: the keys of every put made before the query are indexed first,
        waiting at most ``indexQueryWaitMs`` (the thread skips its dispatch delay)."""
        target = self.enqueued
        if self.done >= target:
            return
        self._wake.set()
        with self._progress:
            self._progress.wait_for(lambda: self.done >= target, self._config.indexQueryWaitMs / 1000)

    def _run(self) -> None:
        # Puts never wake this thread. Woken by a put, it wanted the GIL at the moment the put's own answers (the
        # woken long polls, the producer's reply) did, on every put of a lone message; on its own clock its turns
        # fall anywhere, and what arrived meanwhile is indexed in one go.
        busy = self._config.indexDispatchDelayMs / 1000
        idle = max(busy, self._config.indexDispatchIdleMs / 1000)
        wait = idle
        while not self._stopping:
            self._wake.wait(wait)
            self._wake.clear()
            wait = busy if self.drain() else idle
        self.drain()

    def _build(self, job: IndexJob) -> None:
        try:
            for run in job.runs:
                self._index.build_keys(run.topic, run.keys, run.offsets, job.store_timestamp)
        except OSError as exc:
            log.error("index build failed", extra={"error": str(exc)})
        self.end_offset = job.end_offset
        with self._progress:
            self.done += 1
            self._progress.notify_all()
