"""The OMS ``PushConsumer``: ``attach_queue(topic, listener, expression)``, then messages arrive on listener threads.

CLUSTERING runs on receive/ack (``clustering.py``; orderly needs a FIFO group) or, with ``rmq.consume.mode=PULL``,
on offset pulls of allocated queues with broker-side offsets and queue leases (``offset_clustering.py``);
BROADCASTING on offset pulls with local offsets (``broadcasting.py``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from rocketmq.grpc_protocol import definition_pb2

from oms.client.core import ClientCore
from oms.consumer.base import START_TIMEOUT_S, ConsumerBase
from oms.consumer.broadcasting import BroadcastEngine
from oms.consumer.clustering import ReceiveEngine, ServerPolicy
from oms.consumer.config import ConsumeMode, ConsumerKeys, MessageModel
from oms.consumer.engine import EngineStats, Subscription
from oms.consumer.listener import ListenerAdapter
from oms.consumer.offset_clustering import OffsetClusteringEngine
from oms.consumer.offset_store import LocalFileOffsetStore
from oms.consumer.selector import MessageSelector
from oms.context import ClientContext
from oms.errors import OMSIllegalStateException
from oms.keyvalue import KeyValue
from oms.lifecycle import callback_pool, stop_callback_pool
from oms.queue import MessageQueue

F = TypeVar("F", bound=Callable[..., Any])
log = logging.getLogger("oms.consumer.push")

SETTINGS_WAIT_S = 10.0  # the official push consumer waits as long for the broker's answer to its Settings


class PushConsumer(ConsumerBase):
    """Created by ``MessagingAccessPoint.create_push_consumer(consumer_id=...)``; not started."""

    CLIENT_TYPE = definition_pb2.ClientType.PUSH_CONSUMER
    KIND = "push consumer"

    def __init__(self, context: ClientContext, attributes: KeyValue) -> None:
        super().__init__(context, attributes)
        self._subs: dict[str, Subscription] = {}  # replaced, never mutated: the loop reads it without a lock
        self._engine: ReceiveEngine | BroadcastEngine | OffsetClusteringEngine | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending_pause: tuple[bool, float | None] = (False, None)  # suspend() before startup: (paused, timeout)
        self._policy = ServerPolicy()

    # -- subscriptions ------------------------------------------------------------------------------------------

    def attach_queue(
        self,
        topic: str,
        listener: Any,
        expression: str | MessageSelector | Mapping[str, Any] | None = "*",
        attributes: Mapping[str, Any] | None = None,
        *,
        expression_type: str | None = None,
        batch: bool | None = None,
    ) -> PushConsumer:
        """Subscribe ``topic``: ``expression`` is a tag expression (``"*"``, ``"TagA || TagB"``), a
        ``MessageSelector.by_sql(...)``, or SQL92 text with ``expression_type="SQL92"``.

        ``listener`` is a callable ``(message, context)`` or an object with ``on_received(message, context)``; with
        ``batch=True`` (or an ``on_received_batch`` method) it gets lists of up to ``consume_message_batch_max_size``
        messages. OMS Java's ``attach_queue(queue, listener, attributes)`` also works (a mapping in third place).
        """
        if isinstance(expression, Mapping):
            attributes, expression = expression, None
        if attributes:
            kv = KeyValue(attributes)
            expression = expression or kv.get_string("rmq.expression") or kv.get_string("EXPRESSION")
            expression_type = expression_type or kv.get_string("rmq.expression.type")
        selector = MessageSelector.of(expression if expression is not None else "*", expression_type)
        sub = Subscription(topic, selector, ListenerAdapter(listener, batch))
        previous = self._subs.get(topic)
        self._selectors = {**self._selectors, topic: selector}
        self._subs = {**self._subs, topic: sub}
        try:
            self._subscriptions_changed(topic)
        except BaseException:
            if previous is None:
                self.detach_queue(topic)  # a topic that cannot be consumed is not left half attached
            raise
        return self

    def listener(
        self, topic: str, expression: str | MessageSelector = "*", *, expression_type: str | None = None
    ) -> Callable[[F], F]:
        """Decorator form: ``@consumer.listener("TopicA", "TagA || TagB")`` over ``def on(message, context)``."""

        def register(fn: F) -> F:
            self.attach_queue(topic, fn, expression, expression_type=expression_type)
            return fn

        return register

    def detach_queue(self, topic: str) -> PushConsumer:
        if topic in self._subs:
            self._subs = {t: s for t, s in self._subs.items() if t != topic}
            self._selectors = {t: s for t, s in self._selectors.items() if t != topic}
            self._subscriptions_changed(None)
        return self

    def subscriptions(self) -> dict[str, Subscription]:
        return self._subs

    def _subscriptions_changed(self, new_topic: str | None) -> None:
        core = self._core
        if core is None or self._closed:
            return
        # a first topic may wait for the brokers' Settings answer (the group's policy)
        self._run(self._resubscribe(core, new_topic), SETTINGS_WAIT_S + 2 * self.config.timeout_s)

    async def _resubscribe(self, core: ClientCore, new_topic: str | None) -> None:
        if new_topic is not None:
            await core.routes.get(new_topic)
            if isinstance(self._engine, ReceiveEngine):
                await self._ensure_policy(core)
                await self._apply_consume_from(core, [new_topic])
        await self._sync_settings(core)
        if self._engine is not None:
            self._engine.kick()

    # -- suspend / resume ---------------------------------------------------------------------------------------

    def suspend(self, timeout: float | None = None) -> None:
        """Stop fetching messages (listeners finish what they hold); resume after ``timeout`` seconds if given."""
        engine, core = self._engine, self._core
        if engine is None or core is None:
            self._pending_pause = (True, timeout)
            return
        self._on_loop(core, engine.pause, timeout)

    def resume(self) -> None:
        engine, core = self._engine, self._core
        if engine is None or core is None:
            self._pending_pause = (False, None)
            return
        self._on_loop(core, engine.resume)

    def _on_loop(self, core: ClientCore, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn`` on the loop (engines are loop-bound) and return when it ran."""
        loop = core.runtime.loop
        if loop.in_loop():
            fn(*args)
            return
        done: concurrent.futures.Future[None] = concurrent.futures.Future()

        def run() -> None:
            try:
                fn(*args)
                done.set_result(None)
            except BaseException as exc:  # handed to the caller below
                done.set_exception(exc)

        loop.loop.call_soon_threadsafe(run)
        done.result(self.config.timeout_s)

    @property
    def is_suspended(self) -> bool:
        engine = self._engine
        return engine.paused if engine is not None else self._pending_pause[0]

    @property
    def policy(self) -> ServerPolicy:
        """What the broker said about the group: FIFO, retry ladder, max attempts, long polling."""
        engine = self._engine
        return engine.policy if isinstance(engine, ReceiveEngine) else self._policy

    # -- state for callers --------------------------------------------------------------------------------------

    @property
    def stats(self) -> EngineStats:
        """Counters: received, consumed_ok/failed, acked, retried, dead_lettered, dropped, flow_controlled."""
        engine = self._engine
        return engine.stats if engine is not None else EngineStats()

    @property
    def message_model(self) -> MessageModel:
        return self.config.message_model

    def assignments(self) -> list[MessageQueue]:
        """The queues this consumer receives from now (clustering: ``queue_id`` -1 = every queue of a broker)."""
        engine = self._engine
        return engine.assignments if engine is not None else []

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def _started(self, core: ClientCore) -> None:
        assert self._calls is not None
        cfg = self.config
        self._pool = callback_pool(self, "consumer", cfg.consume_thread_nums)
        hooks_args = (cfg, self.subscriptions, self._pool, self._hooks)
        engine: ReceiveEngine | BroadcastEngine | OffsetClusteringEngine
        if cfg.message_model is MessageModel.BROADCASTING:
            store = LocalFileOffsetStore(cfg.offset_store_dir, cfg.instance_name, cfg.group)
            engine = BroadcastEngine(*hooks_args, core, self._calls, store)
        elif cfg.consume_mode is ConsumeMode.PULL:
            # queue leases make orderly work on any group: no FIFO flag needed (RocketMQ 4 semantics)
            engine = OffsetClusteringEngine(*hooks_args, core, self._calls)
        else:
            await self._ensure_policy(core)
            await self._apply_consume_from(core, list(self._subs))
            engine = ReceiveEngine(*hooks_args, core, self._calls, self._policy)
        engine.metrics = core.metrics
        core.metrics.watch_cache(cfg.group, engine.cached)
        if self._pending_pause[0]:
            engine.pause(self._pending_pause[1])
        self._engine = engine
        try:
            await engine.start()
        except BaseException:
            await engine.stop(0)
            raise

    async def _ensure_policy(self, core: ClientCore) -> None:
        """Learn the group's policy from the first broker that answers (again while none has)."""
        if self.policy.known:
            return
        self._policy = await self._server_policy(core)
        if isinstance(self._engine, ReceiveEngine):
            self._engine.apply_policy(self._policy)
        cfg = self.config
        if cfg.orderly and self.policy.known and not self.policy.fifo:
            raise OMSIllegalStateException(
                f"orderly consumption in CLUSTERING mode needs a FIFO group: group {cfg.group!r} is not "
                "consume_message_orderly on the broker (mqadmin updateSubGroup -g <group> -o true), or use "
                f"{ConsumerKeys.MESSAGE_MODEL}=BROADCASTING"
            )

    async def _server_policy(self, core: ClientCore) -> ServerPolicy:
        """The group's FIFO flag, retry ladder and long polling, from the first broker answering our Settings."""
        sessions = [s for e in sorted(core.routes.endpoints(), key=str) if (s := core.telemetry(e)) is not None]
        if not sessions:
            return ServerPolicy()
        waits = {asyncio.ensure_future(s.settings_received.wait()): s for s in sessions}
        try:
            done, _ = await asyncio.wait(waits, timeout=SETTINGS_WAIT_S, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in waits:
                task.cancel()
        for task in done:
            return ServerPolicy.from_settings(waits[task].server_settings)
        log.warning(
            "no broker answered the Settings of %s within %.0fs: default retry policy, not FIFO",
            self.config.group,
            SETTINGS_WAIT_S,
        )
        return ServerPolicy()

    def _stop_timeout(self) -> float:
        return self.config.await_termination_s + START_TIMEOUT_S

    async def _stopping(self) -> None:
        engine = self._engine
        if engine is not None:
            await engine.stop(self.config.await_termination_s)

    def _after_stop(self) -> None:
        pool = self._pool
        if pool is not None:
            stop_callback_pool(pool, self, "consumer", cancel_futures=True)

    def startup(self) -> PushConsumer:
        if not self._subs:
            log.info("push consumer %s starts with no attached queue", self.config.group)
        super().startup()
        return self

    def __repr__(self) -> str:
        cfg = self.config
        return f"PushConsumer(group={cfg.group!r}, model={cfg.message_model.value}, topics={sorted(self._subs)})"
