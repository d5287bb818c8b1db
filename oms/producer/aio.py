"""asyncio face of the producer: ``await send``, ``send_batch``, ``send_oneway`` from any event loop.

``Producer.aio()`` (or ``MessagingAccessPoint.create_async_producer``) wraps a ``Producer``; the sends run on the
access point's loop exactly as the blocking calls do (same retries, fault avoidance, hooks, batching), and this
side only awaits their futures, so nothing blocks the caller's loop. Hooks run on the caller's loop, as the
blocking calls run them on the caller's thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from oms.client.core import ClientCore
from oms.client.routes import RouteQueue
from oms.convert import WireMessage
from oms.errors import OMSException, OMSTimeOutException
from oms.lifecycle import RUN_GUARD_S
from oms.message import BytesMessage
from oms.producer.base import LoopWaiter, ProducerBase
from oms.producer.coalesce import Coalesced, SendCoalescer
from oms.producer.plain_run import in_input_order
from oms.producer.result import SendResult
from oms.producer.selector import QueueSelector
from oms.producer.sender import check_pinnable, pin, split_batches
from orbitmq.errors import Code
from orbitmq.limits import MAX_BATCH_SIZE, MAX_SEND_BATCH_MESSAGES

log = logging.getLogger("oms.producer.aio")

T = TypeVar("T")


class AsyncProducer:
    """A view of a ``Producer`` for asyncio code; ``async with`` starts and shuts down the producer."""

    def __init__(self, producer: ProducerBase) -> None:
        self.producer = producer

    # -- lifecycle ----------------------------------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        return self.producer.is_running

    async def startup(self) -> AsyncProducer:
        # startup/shutdown wait on the access point's loop (channels, Telemetry): in a worker thread, never here
        await asyncio.to_thread(self.producer.startup)
        return self

    async def shutdown(self) -> None:
        await asyncio.to_thread(self.producer.shutdown)

    async def __aenter__(self) -> AsyncProducer:
        return await self.startup()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.shutdown()

    # -- running on the access point's loop ---------------------------------------------------------------------

    async def _await(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        return await self.producer._await_on_loop(coro, timeout_s)  # tracked: shutdown() waits for sends in flight

    async def _send(
        self,
        core: ClientCore,
        wires: Sequence[WireMessage],
        timeout_s: float,
        pinned: RouteQueue | None,
        fast_batch: bool = False,
    ) -> list[SendResult]:
        coro = self.producer._sender.send(core, wires, time.monotonic() + timeout_s, pinned, fast_batch=fast_batch)
        results, _ = await self._await(coro, timeout_s)
        return results

    # -- sends --------------------------------------------------------------------------------------------------

    async def send(
        self,
        message: BytesMessage,
        attributes: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
    ) -> SendResult:
        """``Producer.send`` awaited: the ``SendResult``, or an ``OMSException`` subclass (transactions: use the
        blocking producer's ``prepare``/``send(msg, executor)``)."""
        p = self.producer
        core = p._running_core()
        timeout_s = p._timeout(attributes, timeout)
        wire = p._prepare(message)
        if selector is None and SendCoalescer.takes(wire, None):
            return await self._send_coalesced(core, message, wire, timeout_s)
        try:
            pinned = None
            if selector is not None:
                check_pinnable(wire)
                route = await self._await(core.routes.get(wire.topic), timeout_s)
                pinned = pin(wire, selector, arg, route)
            result = (await self._send(core, [wire], timeout_s, pinned))[0]
        except OMSException as exc:
            p._hooks.after_send(message, None, exc)
            raise
        p._hooks.after_send(message, result, None)
        return result

    async def _send_coalesced(
        self, core: ClientCore, message: BytesMessage, wire: WireMessage, timeout_s: float
    ) -> SendResult:
        """A plain message batched with the other sends waiting for its topic (``oms/producer/coalesce.py``, as
        ``send_async``): alone when nothing waits. Its hooks and its future complete on this loop."""
        p = self.producer
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SendResult] = loop.create_future()
        p._coalesced_started()
        p._coalescer.submit(core, Coalesced(wire, time.monotonic() + timeout_s, LoopWaiter(message, future, loop)))
        try:
            async with asyncio.timeout(timeout_s + RUN_GUARD_S):  # the coalescer completes it; this is the backstop
                return await future
        except TimeoutError:
            raise OMSTimeOutException(Code.REQUEST_TIMEOUT, f"no answer within {timeout_s:.3f}s") from None

    async def send_batch(
        self,
        messages: Iterable[BytesMessage],
        attributes: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> list[SendResult]:
        """``Producer.send_batch`` awaited: per topic and 4 MiB requests, results in input order; a failed
        request raises and the requests before it stay stored. ``timeout`` applies per request."""
        p = self.producer
        core = p._running_core()
        batch = list(messages)
        if not batch:
            return []
        timeout_s = p._timeout(attributes, timeout)
        runs = p._plain_runs(batch)
        if runs is not None:  # no hook watches these sends; one request per run, in order
            per_run = [await self._send(core, run, timeout_s, None, fast_batch=True) for run in runs]
            return in_input_order(runs, per_run, len(batch))
        results: list[SendResult | None] = [None] * len(batch)
        wires = p._prepare_batch(batch, None)
        try:
            for chunk in split_batches(wires, MAX_BATCH_SIZE, MAX_SEND_BATCH_MESSAGES):
                sent = await self._send(core, [wires[i] for i in chunk], timeout_s, None, fast_batch=True)
                for i, result in zip(chunk, sent, strict=True):
                    results[i] = result
                    p._hooks.after_send(batch[i], result, None)
        except OMSException as exc:
            for i, m in enumerate(batch):
                if results[i] is None:
                    p._hooks.after_send(m, None, exc)
            raise
        return [r for r in results if r is not None]

    async def send_oneway(self, message: BytesMessage, attributes: Mapping[str, Any] | None = None) -> None:
        """Fire and forget (one attempt): returns once the send is handed to the loop; errors are logged."""
        p = self.producer
        try:
            core = p._running_core()
            timeout_s = p._timeout(attributes, None)
            wire = p._prepare(message)
            inner = p._submit(p._sender.send(core, [wire], time.monotonic() + timeout_s, attempts=1))
        except Exception as exc:
            log.warning("oneway send of %r not sent: %s", message, exc)
            return
        # the hooks still hear the outcome, on a producer callback thread as for the blocking send_oneway
        inner.add_done_callback(lambda done: p._dispatch(p._complete_oneway, message, done))

    def __repr__(self) -> str:
        return f"AsyncProducer({self.producer!r})"
