"""Broadcasting push consumption: every consumer pulls every readable queue with ``Consume/PullBatch``.

Offsets live on the consumer's disk (``LocalFileOffsetStore``). As in RocketMQ there is no retry topic: a message
whose listener fails is logged and dropped (orderly consumers first retry it locally, up to max reconsume times).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketmq.grpc_protocol import definition_pb2

from oms.client.core import ClientCore
from oms.consumer.calls import ConsumerCalls, PullBatchError, QueueRef
from oms.consumer.config import PULL_LONG_POLLING_MS, ConsumerConfig
from oms.consumer.engine import (
    ERROR_PAUSE_S,
    FLOW_CONTROL_LOG_EVERY,
    FLOW_CONTROL_PAUSE_S,
    EngineBase,
    Subscription,
)
from oms.consumer.offset_store import LocalFileOffsetStore, OffsetStoreError
from oms.consumer.process_queue import ProcessQueue
from oms.consumer.records import decode_records
from oms.errors import OMSException
from oms.message import BytesMessage
from oms.plugins import Hooks
from oms.queue import MessageQueue
from orbitmq.errors import Code

log = logging.getLogger("oms.consumer.broadcasting")


@dataclass
class Pulled:
    ref: QueueRef
    pq: ProcessQueue = field(default_factory=ProcessQueue)

    @property
    def queue(self) -> MessageQueue:
        return self.ref.queue


class BroadcastEngine(EngineBase):
    """Loop-bound; created by ``PushConsumer`` in BROADCASTING mode."""

    def __init__(
        self,
        config: ConsumerConfig,
        subscriptions: Callable[[], dict[str, Subscription]],
        pool: concurrent.futures.ThreadPoolExecutor,
        hooks: Hooks,
        core: ClientCore,
        calls: ConsumerCalls,
        store: LocalFileOffsetStore,
    ) -> None:
        super().__init__(config, subscriptions, pool, hooks)
        self.core = core
        self.calls = calls
        self.store = store
        self._pulled: dict[QueueRef, Pulled] = {}
        self.long_polling_ms = config.long_polling_ms or PULL_LONG_POLLING_MS

    @property
    def assignments(self) -> list[MessageQueue]:
        return sorted(p.queue for p in self._pulled.values())

    def _process_queues(self) -> list[tuple[str, ProcessQueue]]:
        return [(p.queue.topic, p.pq) for p in list(self._pulled.values())]

    async def start(self) -> None:
        loaded = await asyncio.get_running_loop().run_in_executor(self._pool, self.store.load)
        log.info("broadcast consumer %s: %d local offsets from %s", self.calls.group, loaded, self.store.path)
        await self.sync_queues()
        self._spawn(self._queues_loop(), f"queues {self.calls.group}", self._background)
        self._spawn(self._persist_loop(), f"offsets {self.calls.group}", self._background)

    async def _queues_loop(self) -> None:
        while True:
            await self._sleep_or_kick(self.config.rebalance_interval_s)
            await self.sync_queues()

    async def sync_queues(self) -> None:
        """Every readable queue of every subscribed topic gets a pull loop (routes are refreshed every 30 s)."""
        wanted: set[QueueRef] = set()
        for topic in sorted(self._subscriptions()):
            try:
                route = await self.core.routes.get(topic)
                wanted.update(QueueRef(q.queue, q.endpoint) for q in route.queues if q.readable)
            except OMSException as exc:
                log.warning("route of %s unavailable: %s", topic, exc)
                wanted.update(ref for ref in self._pulled if ref.queue.topic == topic)
        for ref in [r for r in self._pulled if r not in wanted]:
            self._pulled.pop(ref).pq.dropped = True
            await self._stop_loop(ref)
        for ref in sorted(wanted, key=lambda r: r.queue):
            if ref not in self._pulled and not self._stopping:
                pulled = self._pulled[ref] = Pulled(ref)
                self._start_loop(ref, self._pull_loop(pulled), f"pull {ref.queue}")

    async def _persist_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.config.persist_offset_interval_s)
            try:
                await loop.run_in_executor(self._pool, self.store.persist)
            except OffsetStoreError as exc:
                log.error("%s", exc)

    async def _initial_offset(self, p: Pulled) -> int:
        stored = self.store.read(p.queue)
        if stored is not None:
            return stored
        cfg = self.config
        while True:
            try:
                offset = await self.calls.start_offset(p.ref, cfg.consume_from_where, cfg.consume_timestamp_ms)
                break
            except OMSException as exc:
                log.info("start offset of %s unavailable: %s", p.queue, exc)
                await asyncio.sleep(ERROR_PAUSE_S)
        log.info("%s starts %s at offset %d (%s)", self.calls.group, p.queue, offset, cfg.consume_from_where.value)
        self.store.update(p.queue, offset, increase_only=False)
        return offset

    async def _pull_loop(self, p: Pulled) -> None:
        cfg = self.config
        pq = p.pq
        offset = await self._initial_offset(p)
        while not pq.dropped:
            await self._resumed.wait()
            if self._stopping or pq.dropped:
                return
            limited = pq.flow_control(
                cfg.pull_threshold_for_queue, cfg.pull_threshold_size_for_queue, cfg.consume_concurrently_max_span
            )
            if limited is not None:
                self.stats.flow_controlled += 1
                if self.stats.flow_controlled % FLOW_CONTROL_LOG_EVERY == 1:
                    log.info("flow control on %s (%s): %d msgs held", p.queue, limited.value, pq.count)
                await asyncio.sleep(FLOW_CONTROL_PAUSE_S)
                continue
            sub = self._subscriptions().get(p.queue.topic)
            if sub is None:
                return
            try:
                response = await self.calls.pull_batch(
                    p.ref, offset, cfg.pull_batch_size, self.long_polling_ms, sub.selector
                )
                messages = list(decode_records(response.records)) if response.status.code == Code.OK else []
            except PullBatchError as exc:
                if exc.code != Code.ILLEGAL_OFFSET:
                    log.info("pull from %s failed: %s", p.queue, exc)
                    await asyncio.sleep(ERROR_PAUSE_S)
                    continue
                # retention removed it, or the queue was recreated: RocketMQ corrects to the nearest valid offset
                try:
                    corrected = await self._nearest_valid(p.ref, offset)
                except OMSException as query_exc:
                    log.info("offsets of %s unavailable: %s", p.queue, query_exc)
                    await asyncio.sleep(ERROR_PAUSE_S)
                    continue
                log.warning("offset %d of %s is illegal (%s), going on at %d", offset, p.queue, exc.message, corrected)
                offset = corrected
                self.store.update(p.queue, offset, increase_only=False)
                continue
            except OMSException as exc:
                if self._stopping:
                    return
                log.info("pull from %s failed: %s", p.queue, exc)
                await asyncio.sleep(ERROR_PAUSE_S)
                continue
            next_offset = int(response.next_offset)
            arrived = time.monotonic()
            wanted = [m for m in messages if sub.selector.accepts_tag(m.tags)]
            self.stats.received += len(wanted)
            pq.put(wanted)
            pq.advance(p.queue.queue_id, next_offset)
            if not pq.count:
                self.store.update(p.queue, next_offset)
            offset = max(offset, next_offset)
            if not wanted:
                continue
            if self.config.orderly:
                task = self._spawn(self._consume_in_order(p, wanted, arrived), f"consume {p.queue}", self._consuming)
                await asyncio.shield(task)
            else:
                size = cfg.consume_message_batch_max_size
                for i in range(0, len(wanted), size):
                    chunk = wanted[i : i + size]
                    self._spawn(self._consume_chunk(p, chunk, arrived), f"consume {p.queue}", self._consuming)

    async def _nearest_valid(self, ref: QueueRef, offset: int) -> int:
        policy = definition_pb2.QueryOffsetPolicy
        low = await self.calls.query_offset(ref, policy.BEGINNING)
        if offset < low:
            return low
        return await self.calls.query_offset(ref, policy.END)

    def _done(self, p: Pulled, messages: list[BytesMessage]) -> None:
        p.pq.remove(messages)
        offset = p.pq.commit_offset(p.queue.queue_id)
        if offset is not None:
            self.store.update(p.queue, offset)

    async def _consume_chunk(self, p: Pulled, chunk: list[BytesMessage], arrived: float) -> None:
        try:
            oks, _ = await self.consume(p.queue.topic, chunk, p.queue, False, arrived)
            failed = [m for m, ok in zip(chunk, oks, strict=True) if not ok]
            self.stats.consumed_ok += len(chunk) - len(failed)
            self.stats.consumed_failed += len(failed)
            if failed:
                self.stats.dropped += len(failed)
                log.warning(
                    "BROADCASTING: consuming %s of %s failed; dropped (broadcast messages are not retried)",
                    [m.message_id for m in failed],
                    p.queue,
                )
        finally:
            self._done(p, chunk)

    async def _consume_in_order(self, p: Pulled, messages: list[BytesMessage], arrived: float) -> None:
        """Orderly broadcasting: one batch at a time; a failure pauses the queue and retries the same message."""
        size = self.config.consume_message_batch_max_size
        i, tries = 0, 0
        try:
            while i < len(messages):
                chunk = messages[i : i + size]
                oks, context = await self.consume(p.queue.topic, chunk, p.queue, True, arrived)
                done = next((n for n, ok in enumerate(oks) if not ok), len(oks))
                self.stats.consumed_ok += done
                self._done(p, chunk[:done])
                i += done
                if done == len(chunk):
                    tries = 0
                    continue
                self.stats.consumed_failed += 1
                tries += 1
                if tries > self.config.max_reconsume_times:
                    self.stats.dropped += 1
                    log.warning(
                        "BROADCASTING: %s of %s failed %d times; dropped", messages[i].message_id, p.queue, tries
                    )
                    self._done(p, [messages[i]])
                    i, tries = i + 1, 0
                    continue
                self.stats.retried += 1
                await asyncio.sleep(context.suspend_current_queue_time_millis / 1000)
        finally:
            if i < len(messages):
                p.pq.remove(messages[i:])  # not consumed: the offset stays before them, a restart reads them again

    async def stop(self, grace_s: float) -> None:
        await self.stop_tasks(grace_s)
        self._pulled.clear()
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, self.store.persist)
        except OffsetStoreError as exc:
            log.error("%s", exc)
