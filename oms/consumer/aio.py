"""asyncio face of the pull consumer: the same calls, awaited from any event loop (``PullConsumer.aio()``).

The work still runs on the access point's loop; this side only awaits it, so nothing blocks the caller's loop.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from rocketmq.grpc_protocol import definition_pb2

from oms.client.endpoints import Endpoint
from oms.consumer.calls import code_name
from oms.consumer.config import MAX_RECEIVE_BATCH
from oms.consumer.pull_base import PullConsumerBase, PullResult, PullShape, timestamp_ms
from oms.consumer.selector import MessageSelector
from oms.errors import OMSException, exception_for
from oms.keys import BuiltinKeys
from oms.message import BytesMessage
from oms.queue import MessageQueue

T = TypeVar("T")


class AsyncPullConsumer:
    """A view of a started ``PullConsumer``; lifecycle stays with it (``startup``/``shutdown``, ``with``)."""

    def __init__(self, consumer: PullConsumerBase) -> None:
        self.consumer = consumer

    async def _await(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        return await self.consumer._await_on_loop(coro, timeout_s)

    # -- receive / ack ------------------------------------------------------------------------------------------

    async def receive(self, timeout: float | Mapping[str, Any] | None = None) -> BytesMessage | None:
        got = await self.batch_receive(1, timeout)
        return got[0] if got else None

    async def batch_receive(
        self, max_messages: int = MAX_RECEIVE_BATCH, timeout: float | Mapping[str, Any] | None = None
    ) -> list[BytesMessage]:
        c = self.consumer
        wait_s, cached = c._receive_plan(max_messages, timeout)
        if cached:
            return cached
        fetched = await self._await(c._fetch(max_messages, wait_s), wait_s + c.config.timeout_s)
        return c._after_fetch(fetched, max_messages)

    async def ack(self, target: BytesMessage | str) -> None:
        c = self.consumer
        await self._await(c._ack_async(*c._resolve(target)), c.config.timeout_s)

    async def ack_batch(self, targets: Sequence[BytesMessage | str]) -> list[tuple[BytesMessage | str, OMSException]]:
        """Acknowledge several received messages with one call per broker and topic (AckBatch where the broker has
        it); returns the ones refused, with why. Unknown or expired handles are refused without a call."""
        c = self.consumer
        refused: list[tuple[BytesMessage | str, OMSException]] = []
        calls: dict[tuple[Endpoint, str], list[tuple[BytesMessage | str, str, str]]] = {}
        for target in targets:
            try:
                handle, held = c._resolve(target)
            except OMSException as exc:
                refused.append((target, exc))
                continue
            calls.setdefault((held.endpoint, held.topic), []).append((target, held.message_id, handle))
        for (endpoint, topic), entries in calls.items():
            refused.extend(await self._await(self._ack_entries(endpoint, topic, entries), c.config.timeout_s))
        return refused

    async def _ack_entries(
        self, endpoint: Endpoint, topic: str, entries: list[tuple[BytesMessage | str, str, str]]
    ) -> list[tuple[BytesMessage | str, OMSException]]:
        c = self.consumer
        failures = dict(await c._running_calls().ack(endpoint, topic, [(mid, handle) for _, mid, handle in entries]))
        with c._state_lock:
            for _, _, handle in entries:
                c._forget(handle)
        return [
            (target, exception_for(failures[handle], f"ack of {mid} refused: {code_name(failures[handle])}"))
            for target, mid, handle in entries
            if handle in failures
        ]

    async def change_invisible_duration(self, target: BytesMessage | str, invisible_ms: int) -> None:
        c = self.consumer
        handle, held = c._resolve(target)
        new = await self._await(c._change_async(handle, held, invisible_ms), c.config.timeout_s)
        if isinstance(target, BytesMessage):
            target.sys_headers()[BuiltinKeys.RECEIPT_HANDLE] = new

    async def nack(self, target: BytesMessage | str, delay_ms: int = 0) -> None:
        await self.change_invisible_duration(target, delay_ms)

    def __aiter__(self) -> AsyncIterator[BytesMessage]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[BytesMessage]:
        while self.consumer.is_running:
            message = await self.receive()
            if message is not None:
                yield message

    # -- queue level --------------------------------------------------------------------------------------------

    async def queues(self, topic: str) -> list[MessageQueue]:
        c = self.consumer
        return await self._await(c._queues_async(topic), c.config.timeout_s)

    async def pull(
        self,
        queue: MessageQueue,
        offset: int,
        max_messages: int = 32,
        timeout: float = 0.0,
        *,
        expression: str | MessageSelector | None = None,
        expression_type: str | None = None,
        max_bytes: int = 0,
    ) -> PullResult:
        c = self.consumer
        coro = c._pull_async(queue, offset, max_messages, timeout, expression, expression_type, max_bytes)
        return await self._await(coro, timeout + c.config.timeout_s)

    async def pull_columns(
        self,
        queue: MessageQueue,
        offset: int,
        max_messages: int = 32,
        timeout: float = 0.0,
        *,
        expression: str | MessageSelector | None = None,
        expression_type: str | None = None,
        max_bytes: int = 0,
        properties: bool = False,
    ) -> PullResult:
        c = self.consumer
        coro = c._pull_async(
            queue, offset, max_messages, timeout, expression, expression_type, max_bytes, PullShape.COLUMNS, properties
        )
        return await self._await(coro, timeout + c.config.timeout_s)

    async def pull_frames(
        self,
        queue: MessageQueue,
        offset: int,
        max_messages: int = 32,
        timeout: float = 0.0,
        *,
        expression: str | MessageSelector | None = None,
        expression_type: str | None = None,
        max_bytes: int = 0,
    ) -> PullResult:
        c = self.consumer
        coro = c._pull_async(
            queue, offset, max_messages, timeout, expression, expression_type, max_bytes, PullShape.FRAMES
        )
        return await self._await(coro, timeout + c.config.timeout_s)

    async def commit(self, queue: MessageQueue, offset: int) -> None:
        c = self.consumer
        await self._await(c._commit_async(queue, offset), c.config.timeout_s)

    async def committed(self, queue: MessageQueue) -> int | None:
        c = self.consumer
        return await self._await(c._committed_async(queue), c.config.timeout_s)

    async def _query(self, queue: MessageQueue, policy: int, timestamp_ms: int | None = None) -> int:
        c = self.consumer
        return await self._await(c._query_async(queue, policy, timestamp_ms), c.config.timeout_s)

    async def offset_for_time(self, queue: MessageQueue, timestamp: int | float | dt.datetime) -> int:
        return await self._query(queue, definition_pb2.QueryOffsetPolicy.TIMESTAMP, timestamp_ms(timestamp))

    async def earliest_offset(self, queue: MessageQueue) -> int:
        return await self._query(queue, definition_pb2.QueryOffsetPolicy.BEGINNING)

    async def latest_offset(self, queue: MessageQueue) -> int:
        return await self._query(queue, definition_pb2.QueryOffsetPolicy.END)
