"""Offset-based CLUSTERING push consumption, the RocketMQ 4 ``DefaultMQPushConsumer`` way (``rmq.consume.mode=PULL``).

- Allocation: every ``rebalance_interval`` the queues of each subscribed topic (and of ``%RETRY%<group>``) are cut
  into contiguous blocks among the group's live members, AllocateMessageQueueAveragely over the sorted client ids
  the broker returns from ``Consume/GetConsumerList``. Client-side on purpose: the broker's ``QueryAssignment``
  answers per broker (queue id -1) for non-FIFO groups and lets members share an item when there are more members
  than items, so it cannot make every queue go to exactly one member.
- Each allocated queue has a pull loop (``Consume/PullBatch``); consumed offsets are kept in memory and committed
  with ``UpdateOffset`` every ``persist_consumer_offset_interval``, when a queue is given up, and at shutdown.
- Concurrent listeners: a failed message goes back with ``Consume/SendBack`` (``%RETRY%<group>``, or ``%DLQ%<group>``
  after ``max_reconsume_times``); the retry topic is subscribed automatically.
- Orderly listeners: a queue is consumed only while this member holds its broker lease (``Consume/LockQueues``),
  renewed every ``rmq.rebalance.lock.interval`` (at most a third of the broker's lease); as RocketMQ's client, a
  lease counts as held for half the broker's lease time only, so a member that cannot renew stops before the
  broker gives the queue to another. A failed batch suspends the queue and the same message comes again; past
  ``max_reconsume_times`` it is dead-lettered (SendBack with delay level -1). A queue given up is unlocked after its
  in-flight batch finished and its offset was committed.
- Backtracking: pulls ask the broker to serve a pending admin reset (``use_reset_offset``); a response flagged
  ``offset_reset`` makes the queue drop what it holds and continue from the reset position.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from oms.client.core import ClientCore
from oms.client.endpoints import Endpoint
from oms.consumer.calls import ConsumerCalls, PullBatchError, QueueRef
from oms.consumer.config import PULL_LONG_POLLING_MS, ConsumeFromWhere, ConsumerConfig
from oms.consumer.engine import ERROR_PAUSE_S, FLOW_CONTROL_PAUSE_S, EngineBase, Subscription
from oms.consumer.process_queue import ProcessQueue
from oms.consumer.records import record_to_message
from oms.consumer.selector import MessageSelector
from oms.errors import OMSException, OMSRuntimeException
from oms.message import BytesMessage
from oms.plugins import Hooks
from oms.queue import MessageQueue
from orbitmq import message_const as mc
from orbitmq.errors import Code
from orbitmq.record import RecordFormatError, iter_records
from orbitmq.topics import is_dlq_topic, is_retry_topic, retry_topic

log = logging.getLogger("oms.consumer.offset")

LEASE_TRUST_FRACTION = 0.5  # RocketMQ's client trusts a 60 s broker lease for 30 s
LOCK_RETRY_S = 0.2  # an orderly queue whose lease another member still holds is tried again after this


@dataclass
class Pulled:
    """One stored record as a message, with what SendBack needs."""

    message: BytesMessage
    commitlog_offset: int
    listener_topic: str  # the subscription it belongs to (a retry message's original topic)
    queue_offset: int  # with the commitlog offset, which message of an inner batch
    arrived: float = 0.0  # time.monotonic() when it reached this client (rocketmq_await_time)


@dataclass
class QueueState:
    ref: QueueRef
    pq: ProcessQueue = field(default_factory=ProcessQueue)
    offset: int = -1  # the next pull offset
    generation: int = 0  # bumped by an offset reset: older consume results no longer move the offset
    lease_until: float = 0.0  # monotonic; orderly only
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def queue(self) -> MessageQueue:
        return self.ref.queue


def allocate_averagely(queues: list[QueueRef], members: list[str], me: str) -> list[QueueRef]:
    """AllocateMessageQueueAveragely: member i of n takes the i-th contiguous block; no queue is shared."""
    if me not in members or not queues:
        return []
    ordered = sorted(queues, key=lambda r: (r.queue.broker_name, r.queue.queue_id))
    base, extra = divmod(len(ordered), len(members))
    index = members.index(me)
    start = index * base + min(index, extra)
    return ordered[start : start + base + (1 if index < extra else 0)]


class OffsetClusteringEngine(EngineBase):
    """Loop-bound; created by ``PushConsumer`` in CLUSTERING mode with ``rmq.consume.mode=PULL``."""

    def __init__(
        self,
        config: ConsumerConfig,
        subscriptions: Callable[[], dict[str, Subscription]],
        pool: concurrent.futures.ThreadPoolExecutor,
        hooks: Hooks,
        core: ClientCore,
        calls: ConsumerCalls,
    ) -> None:
        super().__init__(config, subscriptions, pool, hooks)
        self.core = core
        self.calls = calls
        self._queues: dict[QueueRef, QueueState] = {}
        self._committed: dict[QueueRef, int] = {}  # consumed offsets not yet sent (or changed since)
        self._sent: dict[QueueRef, int] = {}
        self.long_polling_ms = config.long_polling_ms or PULL_LONG_POLLING_MS
        self.retry_topic = retry_topic(calls.group)
        self._lease_s: float | None = None  # the broker's lease time, once a LockQueues answered

    @property
    def assignments(self) -> list[MessageQueue]:
        return sorted(s.queue for s in self._queues.values())

    def _process_queues(self) -> list[tuple[str, ProcessQueue]]:
        return [(s.queue.topic, s.pq) for s in list(self._queues.values())]

    def _topics(self) -> list[str]:
        subs = self._subscriptions()
        return [*sorted(subs), self.retry_topic] if subs else []

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.rebalance()
        self._spawn(self._rebalance_loop(), f"rebalance {self.calls.group}", self._background)
        self._spawn(self._persist_loop(), f"offsets {self.calls.group}", self._background)
        if self.config.orderly:
            self._spawn(self._lock_loop(), f"leases {self.calls.group}", self._background)

    async def stop(self, grace_s: float) -> None:
        await self.stop_tasks(grace_s)
        states = list(self._queues.values())
        self._queues.clear()
        await self._persist_offsets()
        if self.config.orderly:
            await self._unlock([s.ref for s in states])

    # -- rebalance ----------------------------------------------------------------------------------------------

    async def _rebalance_loop(self) -> None:
        while True:
            await self._sleep_or_kick(self.config.rebalance_interval_s)
            await self.rebalance()

    async def _allocated(self, topic: str) -> set[QueueRef] | None:
        """This member's queues of ``topic``; None when it cannot tell (keep what it has)."""
        try:
            route = await self.core.routes.get(topic)
        except OMSException as exc:
            if not is_retry_topic(topic):  # the retry topic exists from the first send-back on
                log.warning("route of %s unavailable: %s", topic, exc)
            return None
        queues = [QueueRef(q.queue, q.endpoint) for q in route.queues if q.readable]
        if not queues:
            return set()
        endpoint = min((r.endpoint for r in queues), key=str)
        try:
            members = await self.calls.consumer_list(endpoint)
        except OMSException as exc:
            log.warning("members of %s unavailable from %s: %s", self.calls.group, endpoint, exc)
            return None
        me = self.core.client_id
        if me not in members:  # our heartbeat has not reached this broker yet
            members = sorted([*members, me])
        return set(allocate_averagely(sorted(set(queues), key=str), members, me))

    async def rebalance(self) -> None:
        if self._stopping:
            return
        wanted: set[QueueRef] = set()
        for topic in self._topics():
            allocated = await self._allocated(topic)
            if allocated is None:
                allocated = {ref for ref in self._queues if ref.queue.topic == topic}
            wanted |= allocated
        for ref in [r for r in self._queues if r not in wanted]:
            await self._release(ref)
        for ref in sorted(wanted - set(self._queues), key=lambda r: r.queue):
            if self._stopping:
                return
            state = self._queues[ref] = QueueState(ref)
            log.info("%s %s takes %s", self.calls.group, self.core.client_id, ref.queue)
            self._start_loop(ref, self._pull_loop(state), f"pull {ref.queue}")

    async def _release(self, ref: QueueRef) -> None:
        """Give a queue up: stop pulling, let its in-flight messages finish, commit, then unlock (orderly)."""
        state = self._queues.pop(ref)
        state.pq.dropped = True
        await self._stop_loop(ref)
        unfinished: set[asyncio.Task[None]] = set()
        if state.tasks:
            _, unfinished = await asyncio.wait(set(state.tasks), timeout=max(self.config.await_termination_s, 0.1))
        await self._persist_offsets([ref])
        self._committed.pop(ref, None)
        self._sent.pop(ref, None)
        if self.config.orderly:
            if unfinished:
                # a listener still runs on it: another member may take the queue when the lease expires, not now
                log.warning("%s: a batch of %s is still running; its lease is left to expire", self.calls.group, ref)
            else:
                await self._unlock([ref])
        log.info("%s %s gave up %s", self.calls.group, self.core.client_id, ref.queue)

    # -- offsets ------------------------------------------------------------------------------------------------

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.persist_offset_interval_s)
            await self._persist_offsets()

    async def _persist_offsets(self, refs: list[QueueRef] | None = None) -> None:
        for ref in refs if refs is not None else list(self._committed):
            offset = self._committed.get(ref)
            if offset is None or self._sent.get(ref) == offset:
                continue
            try:
                await self.calls.update_offset(ref, offset)
                self._sent[ref] = offset
            except OMSException as exc:
                log.warning("committing offset %d of %s failed: %s", offset, ref.queue, exc)

    async def _initial_offset(self, state: QueueState) -> int:
        cfg = self.config
        # a new group reads its retry topic from the start: nothing is in it before its first send-back
        where = (
            ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET if is_retry_topic(state.queue.topic) else cfg.consume_from_where
        )
        while True:
            try:
                stored = await self.calls.get_offset(state.ref)
                offset = (
                    stored
                    if stored is not None
                    else await self.calls.start_offset(state.ref, where, cfg.consume_timestamp_ms)
                )
                break
            except OMSException as exc:
                log.info("start offset of %s unavailable: %s", state.queue, exc)
                await asyncio.sleep(ERROR_PAUSE_S)
        self._committed[state.ref] = offset
        if stored is not None:
            self._sent[state.ref] = offset
        return offset

    def _done(self, state: QueueState, generation: int, messages: list[BytesMessage]) -> None:
        """Consumed (or handed back): the queue's offset may move past them."""
        if generation != state.generation:
            return  # consumed before an offset reset: the reset position stands
        state.pq.remove(messages)
        offset = state.pq.commit_offset(state.queue.queue_id)
        if offset is not None and offset > self._committed.get(state.ref, -1):
            self._committed[state.ref] = offset

    def _reset_to(self, state: QueueState, offset: int) -> None:
        """An admin reset: what this queue holds is forgotten and the offset moves (also backwards)."""
        log.info("%s: offset of %s reset to %d", self.calls.group, state.queue, offset)
        state.pq.dropped = True
        state.pq = ProcessQueue()
        state.generation += 1
        state.offset = offset
        self._committed[state.ref] = offset
        self._sent[state.ref] = offset  # the broker committed it already
        self.stats.extra["offset_resets"] = self.stats.extra.get("offset_resets", 0) + 1

    # -- leases (orderly) ---------------------------------------------------------------------------------------

    def _lease_held(self, state: QueueState) -> bool:
        return time.monotonic() < state.lease_until

    async def _lock(self, refs: list[QueueRef]) -> float | None:
        """Lock or renew ``refs``; the broker's lease in seconds (None when no broker answered)."""
        lease_s: float | None = None
        by_target: dict[tuple[Endpoint, str], list[QueueRef]] = {}
        for ref in refs:
            by_target.setdefault((ref.endpoint, ref.queue.topic), []).append(ref)
        for (endpoint, topic), group in by_target.items():
            sent = time.monotonic()
            try:
                held, lease_ms = await self.calls.lock_queues(endpoint, topic, [r.queue.queue_id for r in group])
            except OMSException as exc:
                log.info("locking %s on %s failed: %s", topic, endpoint, exc)
                continue
            lease_s = self._lease_s = lease_ms / 1000
            for ref in group:
                state = self._queues.get(ref)
                if state is None:
                    continue
                # counted from before the request: the broker's lease started later, never earlier
                state.lease_until = sent + lease_s * LEASE_TRUST_FRACTION if ref.queue.queue_id in held else 0.0
        return lease_s

    async def _unlock(self, refs: list[QueueRef]) -> None:
        by_target: dict[tuple[Endpoint, str], list[int]] = {}
        for ref in refs:
            by_target.setdefault((ref.endpoint, ref.queue.topic), []).append(ref.queue.queue_id)
        for (endpoint, topic), ids in by_target.items():
            try:
                await self.calls.unlock_queues(endpoint, topic, ids)
            except OMSException as exc:
                log.info("unlocking %s %s on %s failed (the lease expires): %s", topic, ids, endpoint, exc)

    async def _lock_loop(self) -> None:
        while True:
            # renew well inside the trusted half of the lease; 1 s until a broker told its lease time
            lease_s = self._lease_s
            await asyncio.sleep(min(self.config.lock_interval_s, lease_s / 3 if lease_s else 1.0))
            await self._lock(list(self._queues))

    async def _lease_lapsed(self, state: QueueState) -> None:
        """Our trusted half of the lease is over: commit while the broker's lease surely still stands (nobody
        else can have consumed), then forget the position; it is read again under the next lease."""
        lease_s = self._lease_s
        if state.lease_until and lease_s and time.monotonic() < state.lease_until + lease_s * LEASE_TRUST_FRACTION:
            await self._persist_offsets([state.ref])
        state.lease_until = 0.0
        state.offset = -1

    async def _ensure_lease(self, state: QueueState) -> bool:
        if self._lease_held(state):
            return True
        await self._lock([state.ref])
        if self._lease_held(state):
            return True
        await asyncio.sleep(LOCK_RETRY_S)
        return False

    # -- pulling ------------------------------------------------------------------------------------------------

    def _decode(self, raw: bytes, pulled_topic: str) -> list[Pulled]:
        out: list[Pulled] = []
        arrived = time.monotonic()
        try:
            for record in iter_records(raw):
                message = record_to_message(record)
                listener_topic = pulled_topic
                if is_retry_topic(pulled_topic):
                    # RocketMQ's resetRetryAndNamespace: the listener sees the message's own topic
                    listener_topic = record.properties.get(mc.PROPERTY_RETRY_TOPIC, pulled_topic)
                    message.destination = listener_topic
                out.append(Pulled(message, record.commitlog_offset, listener_topic, record.queue_offset, arrived))
        except RecordFormatError as exc:
            raise OMSRuntimeException(Code.MESSAGE_CORRUPTED, f"PullBatch records do not decode: {exc}") from exc
        return out

    def _selector(self, topic: str) -> MessageSelector | None:
        if is_retry_topic(topic):
            return None  # RocketMQ subscribes the retry topic with "*"
        sub = self._subscriptions().get(topic)
        return sub.selector if sub is not None else None

    async def _pull_loop(self, state: QueueState) -> None:
        cfg = self.config
        if not cfg.orderly:
            state.offset = await self._initial_offset(state)
        while not state.pq.dropped:
            await self._resumed.wait()
            if self._stopping or state.pq.dropped:
                return
            if cfg.orderly:
                if not self._lease_held(state):
                    await self._lease_lapsed(state)
                    if not await self._ensure_lease(state):
                        continue
                if state.offset < 0:
                    # read only under the lease: the previous holder committed before it unlocked (RocketMQ 4
                    # locks an orderly queue before it computes the pull offset)
                    state.offset = await self._initial_offset(state)
            if state.pq.flow_control(
                cfg.pull_threshold_for_queue, cfg.pull_threshold_size_for_queue, cfg.consume_concurrently_max_span
            ):
                self.stats.flow_controlled += 1
                await asyncio.sleep(FLOW_CONTROL_PAUSE_S)
                continue
            pulled = await self._pull(state)
            if pulled is None:
                continue
            if not pulled:
                continue
            generation = state.generation
            state.pq.put([p.message for p in pulled])
            if cfg.orderly:
                task = self._spawn_for(state, self._consume_in_order(state, generation, pulled))
                await asyncio.shield(task)
            else:
                size = cfg.consume_message_batch_max_size
                for i in range(0, len(pulled), size):
                    self._spawn_for(state, self._consume_chunk(state, generation, pulled[i : i + size]))

    def _spawn_for(self, state: QueueState, coro: object) -> asyncio.Task[None]:
        task: asyncio.Task[None] = self._spawn(coro, f"consume {state.queue}", self._consuming)  # type: ignore[arg-type]
        state.tasks.add(task)
        task.add_done_callback(state.tasks.discard)
        return task

    async def _pull(self, state: QueueState) -> list[Pulled] | None:
        """One PullBatch; the wanted messages (offsets and resets applied), or None after an error pause."""
        topic = state.queue.topic
        selector = self._selector(topic)
        if selector is None and not is_retry_topic(topic):
            await asyncio.sleep(self.config.rebalance_interval_s)  # detached: the next rebalance gives it up
            return None
        try:
            response = await self.calls.pull_batch(
                state.ref,
                state.offset,
                self.config.pull_batch_size,
                self.long_polling_ms,
                selector,
                use_reset_offset=True,
            )
            pulled = self._decode(response.records, topic) if response.status.code == Code.OK else []
        except PullBatchError as exc:
            if exc.code != Code.ILLEGAL_OFFSET:
                log.info("pull from %s failed: %s", state.queue, exc)
                await asyncio.sleep(ERROR_PAUSE_S)
                return None
            # retention removed it, or the queue was recreated: RocketMQ corrects to the nearest valid offset
            low, high = int(exc.response.min_offset), int(exc.response.max_offset)
            corrected = low if state.offset < low else high
            log.warning("offset %d of %s is illegal, going on at %d", state.offset, state.queue, corrected)
            state.offset = corrected
            self._committed[state.ref] = corrected
            return None
        except OMSException as exc:
            if not self._stopping:
                log.info("pull from %s failed: %s", state.queue, exc)
                await asyncio.sleep(ERROR_PAUSE_S)
            return None
        next_offset = int(response.next_offset)
        if response.offset_reset:
            first = pulled[0].message.queue_offset if pulled else None
            self._reset_to(state, first if first is not None else next_offset)
        wanted = [p for p in pulled if selector is None or selector.accepts_tag(p.message.tags)]
        self.stats.received += len(wanted)
        state.pq.advance(state.queue.queue_id, next_offset)
        if not state.pq.count and not wanted:
            self._committed[state.ref] = max(self._committed.get(state.ref, -1), next_offset)
        state.offset = max(state.offset, next_offset)
        if len(wanted) < len(pulled):  # filtered out: consumed as far as the offset goes
            kept = {id(p) for p in wanted}
            skipped = [p.message for p in pulled if id(p) not in kept]
            state.pq.put(skipped)
            self._done(state, state.generation, skipped)
        return wanted

    # -- consuming ----------------------------------------------------------------------------------------------

    async def _consume_chunk(self, state: QueueState, generation: int, chunk: list[Pulled]) -> None:
        """Concurrent: run the listener; failures go back to the broker (retry topic or DLQ)."""
        messages = [p.message for p in chunk]
        oks, context = await self.consume(chunk[0].listener_topic, messages, state.queue, False, chunk[0].arrived)
        failed = [p for p, ok in zip(chunk, oks, strict=True) if not ok]
        self.stats.consumed_ok += len(chunk) - len(failed)
        self.stats.consumed_failed += len(failed)
        handed_back = [p.message for p, ok in zip(chunk, oks, strict=True) if ok]
        for p in failed:
            if await self._send_back(state, p, context.delay_level_when_next_consume):
                handed_back.append(p.message)
            else:
                # the broker did not take it: consume it here again later, its offset stays (RocketMQ does the same)
                self._spawn_for(state, self._consume_later(state, generation, p))
        self._done(state, generation, handed_back)

    async def _consume_later(self, state: QueueState, generation: int, p: Pulled) -> None:
        await asyncio.sleep(ERROR_PAUSE_S)
        if not state.pq.dropped:
            await self._consume_chunk(state, generation, [p])

    async def _send_back(self, state: QueueState, p: Pulled, delay_level: int) -> bool:
        max_times = self.config.max_reconsume_times
        level = -1 if max_times == 0 else delay_level  # 0 would mean the group's default on the broker
        try:
            result = await self.calls.send_back(
                state.ref.endpoint, state.queue.topic, p.commitlog_offset, p.queue_offset, level, max_times
            )
        except OMSException as exc:
            log.warning("sending %s back failed: %s", p.message.message_id, exc)
            return False
        if is_dlq_topic(result.destination):
            self.stats.dead_lettered += 1
        else:
            self.stats.retried += 1
        return True

    async def _consume_in_order(self, state: QueueState, generation: int, pulled: list[Pulled]) -> None:
        """Orderly: one batch at a time while the lease is held; a failure suspends the queue, then the same
        message comes again; past ``max_reconsume_times`` it is dead-lettered and the queue moves on."""
        size = self.config.consume_message_batch_max_size
        i, tries = 0, 0
        while i < len(pulled):
            if self._stopping or state.pq.dropped or generation != state.generation or not self._lease_held(state):
                break
            chunk = pulled[i : i + size]
            messages = [p.message for p in chunk]
            oks, context = await self.consume(chunk[0].listener_topic, messages, state.queue, True, chunk[0].arrived)
            done = next((n for n, ok in enumerate(oks) if not ok), len(oks))
            self.stats.consumed_ok += done
            self._done(state, generation, [p.message for p in chunk[:done]])
            i += done
            if done == len(chunk):
                tries = 0
                continue
            self.stats.consumed_failed += 1
            tries += 1
            if tries > self.config.max_reconsume_times and await self._send_back(state, pulled[i], -1):
                self._done(state, generation, [pulled[i].message])
                i, tries = i + 1, 0
                continue
            self.stats.retried += 1
            await asyncio.sleep(context.suspend_current_queue_time_millis / 1000)
        if i < len(pulled) and generation == state.generation:
            # not consumed (lease lost, given up, stopping): pull them again from the committed position
            state.pq.remove([p.message for p in pulled[i:]])
            state.offset = self._committed.get(state.ref, state.offset)
