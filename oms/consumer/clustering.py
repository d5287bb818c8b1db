"""Clustering push consumption on receive/ack: assignments from QueryAssignment, one receive loop per assignment.

Concurrent groups ack or nack (ChangeInvisibleDuration with the retry ladder) each message; FIFO groups consume
each message group in order and pause a failing group for the suspend time. The broker dead-letters a message
after the group's max attempts; the client forwards it earlier when ``max_reconsume_times`` is lower.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import random
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from rocketmq.grpc_protocol import definition_pb2

from oms.client.core import ClientCore
from oms.client.endpoints import Endpoint
from oms.consumer.calls import ConsumerCalls, QueueRef, Receipt, code_name
from oms.consumer.config import MAX_RECEIVE_BATCH, TOPIC_PENDING_RETRY_S, ConsumerConfig
from oms.consumer.engine import (
    ERROR_PAUSE_S,
    FLOW_CONTROL_LOG_EVERY,
    FLOW_CONTROL_PAUSE_S,
    EngineBase,
    Subscription,
)
from oms.consumer.listener import ConsumeContext
from oms.consumer.process_queue import ProcessQueue
from oms.errors import OMSException
from oms.keys import BuiltinKeys
from oms.message import BytesMessage
from oms.plugins import Hooks
from oms.queue import MessageQueue
from orbitmq.delay import DEFAULT_DELAY_LEVELS_MS, delay_ms
from orbitmq.errors import Code
from orbitmq.limits import DEFAULT_LONG_POLLING_TIMEOUT_S

log = logging.getLogger("oms.consumer.clustering")

SETTLE_ATTEMPTS = 3  # ack/nack tries before giving up (the message then comes back after its invisible time)
RELEASED_MEMORY = 100_000
ACK_BATCH_MAX = 256  # entries per AckMessage  # message ids whose attempt count the client corrects (see _suspend)


@dataclass(frozen=True)
class ServerPolicy:
    """What the broker's Settings reply says about this group."""

    fifo: bool = False
    long_polling_s: float = DEFAULT_LONG_POLLING_TIMEOUT_S
    backoff_ms: tuple[int, ...] = DEFAULT_DELAY_LEVELS_MS  # the consumer retry ladder
    max_attempts: int = 17
    known: bool = False  # False: no broker answered yet (defaults)

    @classmethod
    def from_settings(cls, settings: definition_pb2.Settings | None) -> ServerPolicy:
        if settings is None:
            return cls()
        policy = settings.backoff_policy
        backoff = cls().backoff_ms
        if policy.HasField("customized_backoff") and policy.customized_backoff.next:
            backoff = tuple(d.seconds * 1000 + d.nanos // 1_000_000 for d in policy.customized_backoff.next)
        polling = settings.subscription.long_polling_timeout
        polling_s = polling.seconds + polling.nanos / 1e9
        return cls(
            fifo=bool(settings.subscription.fifo),
            long_polling_s=polling_s if polling_s > 0 else DEFAULT_LONG_POLLING_TIMEOUT_S,
            backoff_ms=backoff,
            max_attempts=int(policy.max_attempts) or 17,
            known=True,
        )


@dataclass
class Delivered:
    """A received message and what settling it needs."""

    message: BytesMessage
    topic: str
    endpoint: Endpoint
    handle: str
    message_id: str
    attempt: int  # the broker's delivery_attempt, corrected for releases that were no consumption
    message_group: str
    arrived: float = 0.0  # time.monotonic() when it reached this client (rocketmq_await_time)


@dataclass
class Assigned:
    ref: QueueRef
    pq: ProcessQueue = field(default_factory=ProcessQueue)


class ReceiveEngine(EngineBase):
    """Loop-bound; created by ``PushConsumer`` in CLUSTERING mode."""

    def __init__(
        self,
        config: ConsumerConfig,
        subscriptions: Callable[[], dict[str, Subscription]],
        pool: concurrent.futures.ThreadPoolExecutor,
        hooks: Hooks,
        core: ClientCore,
        calls: ConsumerCalls,
        policy: ServerPolicy,
    ) -> None:
        super().__init__(config, subscriptions, pool, hooks)
        self.core = core
        self.calls = calls
        self._assigned: dict[QueueRef, Assigned] = {}
        self._pending_topics: set[str] = set()  # subscribed, but the broker has no such topic yet
        self._ack_pending: dict[tuple[Endpoint, str], list[tuple[Delivered, asyncio.Future[None]]]] = {}
        self._ack_flushing: set[tuple[Endpoint, str]] = set()
        self._acking: set[asyncio.Task[object]] = set()
        self._released: collections.OrderedDict[str, int] = collections.OrderedDict()
        self.apply_policy(policy)

    def apply_policy(self, policy: ServerPolicy) -> None:
        cfg = self.config
        self.policy = policy
        self.fifo = policy.fifo
        self.long_polling_s = cfg.long_polling_ms / 1000 if cfg.long_polling_ms else policy.long_polling_s
        self.backoff_ms = cfg.retry_backoff_ms or policy.backoff_ms
        # the broker dead-letters after the group's max attempts anyway; forwarding at once saves the last backoff
        self.max_attempts = min(policy.max_attempts, cfg.max_reconsume_times + 1)

    @property
    def assignments(self) -> list[MessageQueue]:
        return sorted(a.ref.queue for a in self._assigned.values())

    def _process_queues(self) -> list[tuple[str, ProcessQueue]]:
        return [(a.ref.queue.topic, a.pq) for a in list(self._assigned.values())]

    # -- assignments ----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        await self.rebalance()
        self._spawn(self._rebalance_loop(), f"rebalance {self.calls.group}", self._background)

    async def _rebalance_loop(self) -> None:
        retry = TOPIC_PENDING_RETRY_S
        while True:
            interval = self.config.rebalance_interval_s
            if self._pending_topics:  # a topic not created yet: ask again soon, backing off
                interval, retry = min(retry, interval), retry * 2
            else:
                retry = TOPIC_PENDING_RETRY_S
            await self._sleep_or_kick(interval)
            try:
                await self.rebalance()
            except OMSException as exc:  # keep the current assignments; the next round tries again
                log.warning("rebalance of %s failed: %s", self.calls.group, exc)

    async def rebalance(self) -> None:
        """Ask each subscribed topic's brokers which queues this client serves now; start/stop receive loops."""
        if not self.policy.known:  # no broker had answered our Settings at start: maybe one has by now
            for known in sorted(self.core.routes.endpoints(), key=str):
                session = self.core.telemetry(known)
                if session is not None and session.server_settings is not None:
                    self.apply_policy(ServerPolicy.from_settings(session.server_settings))
                    break
        wanted: dict[QueueRef, None] = {}
        for topic in sorted(self._subscriptions()):
            try:
                route = await self.core.routes.get(topic)
                endpoints = sorted(route.endpoints(), key=str)
                if not endpoints:  # no broker serves it yet: asked for again soon, like a missing topic
                    self._pending_topics.add(topic)
                    continue
                items = await self.calls.query_assignment(topic, random.choice(endpoints))
            except OMSException as exc:
                if exc.code == Code.TOPIC_NOT_FOUND:  # expected until a producer creates it: asked again soon
                    self._pending_topics.add(topic)
                    log.debug("%s waits for topic %s to be created: %s", self.calls.group, topic, exc)
                else:
                    log.warning("QueryAssignment for %s/%s failed: %s", self.calls.group, topic, exc)
                wanted.update((ref, None) for ref in self._assigned if ref.queue.topic == topic)
                continue
            self._pending_topics.discard(topic)
            by_broker = {q.broker_name: q.endpoint for q in route.queues}
            for item in items:
                mq = item.message_queue
                endpoint = by_broker.get(mq.broker.name)
                if mq.broker.endpoints.addresses:
                    endpoint = Endpoint.from_pb(mq.broker.endpoints)
                if endpoint is None:
                    continue
                wanted[QueueRef(MessageQueue(topic, mq.broker.name, int(mq.id)), endpoint)] = None
        for ref in [r for r in self._assigned if r not in wanted]:
            log.info("%s no longer consumes %s", self.calls.group, ref.queue)
            assigned = self._assigned.pop(ref)
            assigned.pq.dropped = True
            await self._stop_loop(ref)
        for ref in wanted:
            if ref not in self._assigned and not self._stopping:
                log.info("%s consumes %s from %s", self.calls.group, ref.queue, ref.endpoint)
                assigned = self._assigned[ref] = Assigned(ref)
                self._start_loop(ref, self._receive_loop(assigned), f"receive {ref.queue}")

    # -- receiving ------------------------------------------------------------------------------------------------

    async def _receive_loop(self, a: Assigned) -> None:
        cfg = self.config
        pq = a.pq
        attempt_id: str | None = None
        while not pq.dropped:
            await self._resumed.wait()
            if pq.dropped or self._stopping:
                return
            limited = pq.flow_control(
                cfg.pull_threshold_for_queue,
                cfg.pull_threshold_size_for_queue,
                None if self.fifo else cfg.consume_concurrently_max_span,
            )
            if limited is not None:
                self.stats.flow_controlled += 1
                if self.stats.flow_controlled % FLOW_CONTROL_LOG_EVERY == 1:
                    log.info("flow control on %s (%s): %d msgs held", a.ref.queue, limited.value, pq.count)
                await asyncio.sleep(FLOW_CONTROL_PAUSE_S)
                continue
            sub = self._subscriptions().get(a.ref.queue.topic)
            if sub is None:
                return
            batch = max(1, min(MAX_RECEIVE_BATCH, cfg.pull_batch_size, cfg.pull_threshold_for_queue - pq.count))
            attempt_id = attempt_id or str(uuid.uuid4())
            try:
                got = await self.calls.receive(a.ref, sub.selector, batch, self.long_polling_s, attempt_id=attempt_id)
            except OMSException as exc:
                if self._stopping or pq.dropped:
                    return
                # the same attempt id again: the broker hands out what the failed call may have popped
                log.info("receive from %s failed: %s", a.ref.queue, exc)
                await asyncio.sleep(ERROR_PAUSE_S)
                continue
            attempt_id = None
            if not got.receipts:
                continue
            arrived = time.monotonic()
            if got.delivery_ms and self.metrics is not None:  # the broker stamped its delivery (v2 ReceiveMessage)
                latency_ms = time.time() * 1000 - got.delivery_ms
                self.metrics.on_delivery(a.ref.queue.topic, cfg.group, len(got.receipts), latency_ms)
            delivered = [self._delivered(a, r, arrived) for r in got.receipts]
            self.stats.received += len(delivered)
            pq.put(d.message for d in delivered)
            if self.fifo:
                task = self._spawn(self._consume_orderly(a, delivered), f"consume {a.ref.queue}", self._consuming)
                await asyncio.shield(task)  # shutdown waits for it (grace) instead of cutting it off
            else:
                size = cfg.consume_message_batch_max_size
                for i in range(0, len(delivered), size):
                    chunk = delivered[i : i + size]
                    self._spawn(self._consume_concurrently(a, chunk), f"consume {a.ref.queue}", self._consuming)

    def _delivered(self, a: Assigned, r: Receipt, arrived: float) -> Delivered:
        attempt = r.attempt - self._released.get(r.message_id, 0)
        r.message.sys_headers()[BuiltinKeys.REDELIVERED_NUMBER] = max(0, attempt - 1)
        return Delivered(
            message=r.message,
            topic=a.ref.queue.topic,
            endpoint=a.ref.endpoint,
            handle=r.handle,
            message_id=r.message_id,
            attempt=max(1, attempt),
            message_group=r.message_group,
            arrived=arrived,
        )

    # -- concurrent -----------------------------------------------------------------------------------------------

    async def _consume_concurrently(self, a: Assigned, chunk: list[Delivered]) -> None:
        try:
            messages = [d.message for d in chunk]
            oks, context = await self.consume(a.ref.queue.topic, messages, a.ref.queue, False, chunk[0].arrived)
            good = [d for d, ok in zip(chunk, oks, strict=True) if ok]
            bad = [d for d, ok in zip(chunk, oks, strict=True) if not ok]
            self.stats.consumed_ok += len(good)
            self.stats.consumed_failed += len(bad)
            await self._ack(good)
            if bad:
                await asyncio.gather(*(self._retry_later(d, context) for d in bad))
        finally:
            a.pq.remove(d.message for d in chunk)

    def _delay_ms(self, attempt: int, context: ConsumeContext) -> int:
        level = context.delay_level_when_next_consume
        if level > 0:
            return delay_ms(level)
        ladder = self.backoff_ms or (1000,)
        return ladder[min(attempt, len(ladder)) - 1]

    async def _retry_later(self, d: Delivered, context: ConsumeContext) -> None:
        if context.delay_level_when_next_consume < 0 or d.attempt >= self.max_attempts:
            await self._dead_letter(d)
            return
        delay = self._delay_ms(d.attempt, context)
        if await self._settle(self._nack_call(d, delay), f"nack of {d.message_id}"):
            self.stats.retried += 1

    def _nack_call(self, d: Delivered, delay_ms: int) -> Callable[[], Awaitable[object]]:
        def call() -> Awaitable[object]:
            return self.calls.change_invisible(d.endpoint, d.topic, d.handle, d.message_id, delay_ms)

        return call

    async def _dead_letter(self, d: Delivered) -> None:
        max_attempts = self.max_attempts
        if await self._settle(
            lambda: self.calls.forward_to_dlq(d.endpoint, d.topic, d.handle, d.message_id, d.attempt, max_attempts),
            f"dead-lettering of {d.message_id}",
        ):
            self.stats.dead_lettered += 1
            self._released.pop(d.message_id, None)
            log.info(
                "message %s of %s went to %%DLQ%%%s after %d attempts",
                d.message_id,
                d.topic,
                self.calls.group,
                d.attempt,
            )

    async def _ack(self, items: Sequence[Delivered]) -> None:
        """Ack ``items`` (returns once the broker answered); acks of concurrent batches share AckMessage calls."""
        if not items:
            return
        loop = asyncio.get_running_loop()
        waits: list[asyncio.Future[None]] = []
        for d in items:
            key = (d.endpoint, d.topic)
            done: asyncio.Future[None] = loop.create_future()
            self._ack_pending.setdefault(key, []).append((d, done))
            waits.append(done)
            if key not in self._ack_flushing:
                # one AckMessage in flight per broker and topic; what arrives meanwhile goes into the next one
                self._ack_flushing.add(key)
                self._spawn(self._flush_acks(key), f"ack {d.topic}", self._acking)
        await asyncio.gather(*waits)

    async def _flush_acks(self, key: tuple[Endpoint, str]) -> None:
        try:
            while self._ack_pending.get(key):
                pending = self._ack_pending[key]
                batch, pending[:] = pending[:ACK_BATCH_MAX], pending[ACK_BATCH_MAX:]
                try:
                    await self._ack_on(key[0], key[1], [d for d, _ in batch])
                finally:
                    for _, done in batch:
                        if not done.done():
                            done.set_result(None)
        finally:
            self._ack_flushing.discard(key)

    async def _ack_on(self, endpoint: Endpoint, topic: str, ds: list[Delivered]) -> None:
        entries = [(d.message_id, d.handle) for d in ds]
        failures: list[tuple[str, int]] = []

        async def call() -> None:
            failures[:] = await self.calls.ack(endpoint, topic, entries)

        if await self._settle(call, f"ack of {len(entries)} message(s) of {topic}"):
            self.stats.acked += len(entries) - len(failures)
            for handle, code in failures:
                # an expired/stale handle: the message was or will be delivered again (at least once)
                log.info("ack of %s refused (%s): it will be delivered again", handle, code_name(code))
        for d in ds:
            self._released.pop(d.message_id, None)

    async def _settle(self, call: Callable[[], Awaitable[object]], what: str) -> bool:
        for attempt in range(1, SETTLE_ATTEMPTS + 1):
            try:
                await call()
                return True
            except OMSException as exc:
                if exc.code == Code.INVALID_RECEIPT_HANDLE:
                    log.info("%s: the receipt handle expired; the message comes again", what)
                    return False
                if attempt == SETTLE_ATTEMPTS or self._stopping:
                    log.warning("%s failed (%s); the message comes again after its invisible time", what, exc)
                    return False
                await asyncio.sleep(ERROR_PAUSE_S)
        return False

    # -- orderly (FIFO groups) ------------------------------------------------------------------------------------

    async def _consume_orderly(self, a: Assigned, delivered: list[Delivered]) -> None:
        groups: dict[str, list[Delivered]] = {}
        for d in delivered:
            groups.setdefault(d.message_group, []).append(d)
        try:
            await asyncio.gather(*(self._consume_group(a, items) for items in groups.values()))
        finally:
            a.pq.remove(d.message for d in delivered)

    async def _consume_group(self, a: Assigned, items: list[Delivered]) -> None:
        """One message group, in order: a failure suspends the group (it and what follows come back later)."""
        size = self.config.consume_message_batch_max_size
        i = 0
        while i < len(items):
            chunk = items[i : i + size]
            messages = [d.message for d in chunk]
            oks, context = await self.consume(a.ref.queue.topic, messages, a.ref.queue, True, chunk[0].arrived)
            done = next((n for n, ok in enumerate(oks) if not ok), len(oks))
            self.stats.consumed_ok += done
            await self._ack(chunk[:done])
            i += done
            if done == len(chunk):
                continue
            self.stats.consumed_failed += 1
            failing = items[i]
            if failing.attempt >= self.max_attempts:
                await self._dead_letter(failing)  # RocketMQ orderly: past max reconsume times, the DLQ; then go on
                i += 1
                continue
            await self._suspend(items[i:], context.suspend_current_queue_time_millis)
            return

    async def _suspend(self, items: list[Delivered], suspend_ms: int) -> None:
        """The failing message and the rest of its group become visible after ``suspend_ms``, in order.

        The broker counts a delivery for each of them; the followers were never consumed, so the client remembers
        to subtract that when they come back (a way to give a message back without counting a delivery would make
        this bookkeeping unnecessary).
        """
        for n, d in enumerate(items):
            if await self._settle(self._nack_call(d, suspend_ms), f"suspend of {d.message_id}"):
                if n == 0:
                    self.stats.retried += 1
                else:
                    self._released[d.message_id] = self._released.get(d.message_id, 0) + 1
                    self._released.move_to_end(d.message_id)
                    while len(self._released) > RELEASED_MEMORY:
                        self._released.popitem(last=False)

    async def stop(self, grace_s: float) -> None:
        await self.stop_tasks(grace_s)
        if self._acking:  # acks of the batches that finished in time
            _, pending = await asyncio.wait(set(self._acking), timeout=self.core.timeout_s)
            for task in pending:
                task.cancel()
        self._assigned.clear()
