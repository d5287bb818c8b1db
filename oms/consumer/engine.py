"""The part of every push engine that is not about the wire: subscriptions, pausing, running listeners on threads.

Listeners run on the consumer's thread pool with the consume hooks around them; loops and settling stay on the loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

from oms.client.metrics import ClientMetrics
from oms.consumer.config import ConsumerConfig
from oms.consumer.listener import ConsumeContext, ListenerAdapter
from oms.consumer.process_queue import ProcessQueue
from oms.consumer.selector import MessageSelector
from oms.message import BytesMessage
from oms.plugins import Hooks
from oms.queue import MessageQueue

log = logging.getLogger("oms.consumer")

FLOW_CONTROL_PAUSE_S = 0.05  # RocketMQ PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL
ERROR_PAUSE_S = 1.0  # after a failed receive/pull (RocketMQ waits 3 s; the v5 clients 1 s)
FLOW_CONTROL_LOG_EVERY = 1000


@dataclass(frozen=True)
class Subscription:
    topic: str
    selector: MessageSelector
    listener: ListenerAdapter


@dataclass
class EngineStats:
    """Counters a consumer exposes as ``stats`` (tests and benchmarks read them)."""

    received: int = 0
    consumed_ok: int = 0
    consumed_failed: int = 0
    acked: int = 0
    retried: int = 0
    dead_lettered: int = 0
    dropped: int = 0
    flow_controlled: int = 0
    extra: dict[str, int] = field(default_factory=dict)


class EngineBase:
    """Loop-bound, except ``_consume_blocking`` which runs on a pool thread."""

    def __init__(
        self,
        config: ConsumerConfig,
        subscriptions: Callable[[], dict[str, Subscription]],
        pool: concurrent.futures.ThreadPoolExecutor,
        hooks: Hooks,
    ) -> None:
        self.config = config
        self._subscriptions = subscriptions
        self._pool = pool
        self._hooks = hooks
        self.stats = EngineStats()
        self.metrics: ClientMetrics | None = None  # the client's own metrics (await and process time)
        self._loop = asyncio.get_running_loop()  # engines are created on the access point's loop
        self._resumed = asyncio.Event()
        self._resumed.set()
        self._resume_timer: asyncio.TimerHandle | None = None
        self._kick = asyncio.Event()  # wakes the rebalance loop early (attach/detach)
        self._loops: dict[Any, asyncio.Task[None]] = {}
        self._consuming: set[asyncio.Task[Any]] = set()
        self._background: set[asyncio.Task[Any]] = set()
        self._stopping = False

    # -- what is held -------------------------------------------------------------------------------------------

    def _process_queues(self) -> list[tuple[str, ProcessQueue]]:
        """(topic, process queue) of every assignment (each engine keeps them its own way)."""
        raise NotImplementedError

    def cached(self) -> dict[str, tuple[int, int]]:
        """Topic -> (messages, body bytes) held and not yet consumed: rocketmq_consumer_cached_messages/_bytes.
        Read by an exporter thread: a snapshot of ints, no loop state changed."""
        out: dict[str, tuple[int, int]] = {}
        for topic, pq in self._process_queues():
            count, size = out.get(topic, (0, 0))
            out[topic] = (count + pq.count, size + pq.size)
        return out

    # -- pause / resume -----------------------------------------------------------------------------------------

    def pause(self, seconds: float | None) -> None:
        self._resumed.clear()
        if self._resume_timer is not None:
            self._resume_timer.cancel()
            self._resume_timer = None
        if seconds is not None:
            self._resume_timer = asyncio.get_running_loop().call_later(max(0.0, seconds), self.resume)

    def resume(self) -> None:
        if self._resume_timer is not None:
            self._resume_timer.cancel()
            self._resume_timer = None
        self._resumed.set()

    @property
    def paused(self) -> bool:
        return not self._resumed.is_set()

    def kick(self) -> None:
        self._kick.set()

    async def _sleep_or_kick(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._kick.wait(), seconds)
        self._kick.clear()

    # -- tasks --------------------------------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str, into: set[asyncio.Task[Any]]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        into.add(task)
        task.add_done_callback(self._task_done(into))
        return task

    @staticmethod
    def _task_done(into: set[asyncio.Task[Any]]) -> Callable[[asyncio.Task[Any]], None]:
        def done(task: asyncio.Task[Any]) -> None:
            into.discard(task)
            if not task.cancelled() and task.exception() is not None:
                log.error("consumer task %s failed: %r", task.get_name(), task.exception())

        return done

    def _start_loop(self, key: Any, coro: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._loops[key] = task

        def done(t: asyncio.Task[None]) -> None:
            if self._loops.get(key) is t:
                del self._loops[key]
            if not t.cancelled() and t.exception() is not None:
                log.error("consumer loop %s failed: %r", name, t.exception())

        task.add_done_callback(done)

    async def _stop_loop(self, key: Any) -> None:
        task = self._loops.pop(key, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def stop_tasks(self, grace_s: float) -> None:
        """Stop receiving, give in-flight listeners ``grace_s`` to finish (and settle), then cancel the rest."""
        self._stopping = True
        self._resumed.set()  # paused loops must run into their cancellation, not wait forever
        for key in list(self._loops):
            await self._stop_loop(key)
        for group in (self._background,):
            for task in list(group):
                task.cancel()
        if self._consuming:
            _, pending = await asyncio.wait(set(self._consuming), timeout=grace_s)
            for task in pending:
                task.cancel()
            if pending:
                log.warning("%d consume batch(es) still running at shutdown: their messages come again", len(pending))
                await asyncio.wait(pending, timeout=1.0)
        for task in list(self._background):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    # -- listeners ----------------------------------------------------------------------------------------------

    async def consume(
        self,
        topic: str,
        messages: Sequence[BytesMessage],
        queue: MessageQueue,
        stop_on_failure: bool,
        arrived: float | None = None,
    ) -> tuple[list[bool], ConsumeContext]:
        """Run the topic's listener on a pool thread; outcomes per message. ``arrived``: ``time.monotonic()`` when
        the messages reached this client (rocketmq_await_time)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self._pool, self._consume_blocking, topic, list(messages), queue, stop_on_failure, arrived
        )

    def _run_coroutine(self, awaitable: Awaitable[object]) -> object:
        """An ``async def`` listener runs on the access point's loop; this pool thread waits for it."""

        async def run() -> object:
            return await awaitable

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result()

    def _consume_blocking(
        self,
        topic: str,
        messages: list[BytesMessage],
        queue: MessageQueue,
        stop_on_failure: bool,
        arrived: float | None = None,
    ) -> tuple[list[bool], ConsumeContext]:
        sub = self._subscriptions().get(topic)
        if sub is None:  # detached while the messages were on their way: they come again to whoever subscribes
            return [False] * len(messages), ConsumeContext(queue, messages, self.config.suspend_ms)
        try:
            self._hooks.before_consume(messages)
        except Exception:
            log.exception("oms_before_consume hook failed: the messages are consumed again later")
            return [False] * len(messages), ConsumeContext(queue, messages, self.config.suspend_ms)
        started = time.monotonic()
        oks, context = sub.listener(
            messages, queue, self.config.suspend_ms, self.config.auto_ack, stop_on_failure, self._run_coroutine
        )
        metrics = self.metrics
        if metrics is not None:  # one update per listener call
            waited_ms = (started - arrived) * 1000 if arrived is not None else -1.0
            metrics.on_consume(topic, self.config.group, waited_ms, time.monotonic() - started, oks)
        self._hooks.after_consume(messages, all(oks))
        return oks, context
