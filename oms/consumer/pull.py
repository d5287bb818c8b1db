"""The OMS ``PullConsumer``: ``receive()``/``ack(message)`` on receive/ack, and a queue-level API over offsets.

Queue level (what a stream processor drives): ``queues(topic)``, ``pull(queue, offset)``, ``commit``, ``committed``,
``offset_for_time``, ``earliest_offset``/``latest_offset``; pulls are ``Consume/PullBatch`` returning stored records.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from rocketmq.grpc_protocol import definition_pb2

from oms.client.core import ClientCore
from oms.client.endpoints import Endpoint
from oms.consumer.base import ConsumerBase
from oms.consumer.calls import PullBatchError, QueueRef, Receipt, code_name
from oms.consumer.config import MAX_RECEIVE_BATCH
from oms.consumer.records import decode_records
from oms.consumer.selector import MessageSelector
from oms.errors import OMSRuntimeException, exception_for
from oms.keys import BuiltinKeys, OMSBuiltinKeys
from oms.keyvalue import KeyValue
from oms.message import BytesMessage
from oms.queue import MessageQueue
from orbitmq.errors import Code

if TYPE_CHECKING:
    from oms.access_point import MessagingAccessPoint
    from oms.consumer.aio import AsyncPullConsumer

log = logging.getLogger("oms.consumer.pull")

EXPIRY_MARGIN_S = 2.0  # a prefetched message this close to becoming visible again is not handed out


class PullStatus(Enum):
    """RocketMQ's ``PullStatus``."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(frozen=True)
class PullResult:
    """One pull: ``messages`` in queue order and ``next_offset`` to pull from next (also on OFFSET_ILLEGAL:
    the nearest valid offset)."""

    status: PullStatus
    queue: MessageQueue
    next_offset: int
    min_offset: int
    max_offset: int
    messages: list[BytesMessage] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.messages)

    def __iter__(self) -> Iterator[BytesMessage]:
        return iter(self.messages)


@dataclass
class _Held:
    """A received, not yet acked message: where its ack goes and until when its handle is good."""

    endpoint: Endpoint
    topic: str
    message_id: str
    visible_again: float  # time.monotonic() when the broker redelivers it


def _timestamp_ms(when: int | float | dt.datetime) -> int:
    if isinstance(when, dt.datetime):
        return int(when.timestamp() * 1000)
    return int(when)


class PullConsumer(ConsumerBase):
    """Created by ``MessagingAccessPoint.create_pull_consumer(consumer_id=...)``; not started."""

    CLIENT_TYPE = definition_pb2.ClientType.SIMPLE_CONSUMER
    KIND = "pull consumer"

    def __init__(self, access_point: MessagingAccessPoint, attributes: KeyValue) -> None:
        super().__init__(access_point, attributes)
        self._cache: deque[BytesMessage] = deque()
        self._held: dict[str, _Held] = {}  # receipt handle -> where to ack
        self._by_id: dict[str, str] = {}  # message id -> receipt handle (ack by id, as RocketMQ's OMS)
        self._state_lock = threading.Lock()
        self._round_robin = itertools.count()

    # -- subscriptions ------------------------------------------------------------------------------------------

    def attach_queue(
        self,
        topic: str,
        expression: str | MessageSelector | Mapping[str, Any] | None = "*",
        attributes: Mapping[str, Any] | None = None,
        *,
        expression_type: str | None = None,
    ) -> PullConsumer:
        """Receive from ``topic`` with ``receive()`` (tag expression, or SQL92 with ``expression_type``).

        A group that never consumed the topic starts where ``consume_from_where`` says (default: its end).
        """
        if isinstance(expression, Mapping):
            attributes, expression = expression, None
        if attributes:
            kv = KeyValue(attributes)
            expression = expression or kv.get_string("rmq.expression")
            expression_type = expression_type or kv.get_string("rmq.expression.type")
        selector = MessageSelector.of(expression if expression is not None else "*", expression_type)
        self._selectors = {**self._selectors, topic: selector}
        core = self._core
        if core is not None and not self._closed:
            self._run(self._resubscribe(core, topic), self.config.timeout_s)
        return self

    def detach_queue(self, topic: str) -> PullConsumer:
        self._selectors = {t: s for t, s in self._selectors.items() if t != topic}
        with self._state_lock:
            self._cache = deque(m for m in self._cache if m.destination != topic)
        return self

    async def _resubscribe(self, core: ClientCore, topic: str) -> None:
        await core.routes.get(topic)
        await self._apply_consume_from(core, [topic])
        await self._sync_settings(core)

    async def _started(self, core: ClientCore) -> None:
        await self._apply_consume_from(core, sorted(self._selectors))

    # -- receive / ack ------------------------------------------------------------------------------------------

    def _wait_s(self, timeout: float | Mapping[str, Any] | None) -> float:
        if isinstance(timeout, Mapping):
            ms = KeyValue(timeout).get_int(OMSBuiltinKeys.TIMEOUT, 0)
            return ms / 1000 if ms > 0 else self.config.timeout_s
        if timeout is None:
            return self.config.timeout_s
        if timeout < 0:
            raise ValueError(f"timeout must not be negative, got {timeout}")
        return float(timeout)

    def receive(self, timeout: float | Mapping[str, Any] | None = None) -> BytesMessage | None:
        """The next message of an attached topic, or None after ``timeout`` seconds (default OPERATION_TIMEOUT;
        OMS's ``receive(attributes)`` with ``TIMEOUT`` in ms works too). Ack it within the invisible time
        (``rmq.invisible.time``, 30 s) or it is delivered again."""
        got = self.batch_receive(1, timeout)
        return got[0] if got else None

    def batch_receive(
        self, max_messages: int = MAX_RECEIVE_BATCH, timeout: float | Mapping[str, Any] | None = None
    ) -> list[BytesMessage]:
        wait_s, cached = self._receive_plan(max_messages, timeout)
        if cached:
            return cached
        fetched = self._run(self._fetch(max_messages, wait_s), wait_s + self.config.timeout_s)
        return self._after_fetch(fetched, max_messages)

    def _receive_plan(
        self, max_messages: int, timeout: float | Mapping[str, Any] | None
    ) -> tuple[float, list[BytesMessage]]:
        """How long to wait, and what the consumer already holds (served first)."""
        if max_messages <= 0:
            raise ValueError(f"max_messages must be positive, got {max_messages}")
        wait_s = self._wait_s(timeout)
        cached = self._from_cache(max_messages)
        if not cached and not self._selectors:
            raise OMSRuntimeException(Code.PRECONDITION_FAILED, "no topic attached: call attach_queue(topic) first")
        return wait_s, cached

    def _fetch(self, max_messages: int, wait_s: float) -> Coroutine[Any, Any, list[BytesMessage]]:
        return self._receive_async(max(max_messages, min(self.config.pull_batch_size, MAX_RECEIVE_BATCH)), wait_s)

    def _after_fetch(self, fetched: list[BytesMessage], max_messages: int) -> list[BytesMessage]:
        with self._state_lock:
            self._cache.extend(fetched)
        return self._from_cache(max_messages)

    def _from_cache(self, n: int) -> list[BytesMessage]:
        now = time.monotonic()
        out: list[BytesMessage] = []
        with self._state_lock:
            while self._cache and len(out) < n:
                message = self._cache.popleft()
                held = self._held.get(message.receipt_handle or "")
                if held is None or held.visible_again - now < EXPIRY_MARGIN_S:
                    self._forget(message.receipt_handle or "")  # the broker hands it out again anyway
                    continue
                out.append(message)
        return out

    async def _receive_async(self, batch: int, wait_s: float) -> list[BytesMessage]:
        core = self._running_core()
        calls = self._running_calls()
        deadline = time.monotonic() + wait_s
        topics = sorted(self._selectors)
        start = next(self._round_robin)
        for n in range(len(topics)):
            topic = topics[(start + n) % len(topics)]
            selector = self._selectors.get(topic)
            if selector is None:
                continue
            refs = await self._readable_queues(core, topic)
            if not refs:
                continue
            ref = refs[(start // len(topics)) % len(refs)]
            left = max(0.0, deadline - time.monotonic())
            share = left / (len(topics) - n)  # every attached topic gets its turn within the timeout
            got = await calls.receive(
                ref, selector, min(batch, MAX_RECEIVE_BATCH), share, invisible_ms=self.config.invisible_ms
            )
            if got.receipts:
                return self._hold(ref, got.receipts)
        return []

    def _hold(self, ref: QueueRef, receipts: list[Receipt]) -> list[BytesMessage]:
        visible_again = time.monotonic() + self.config.invisible_ms / 1000
        out = []
        with self._state_lock:
            self._prune(time.monotonic())
            for r in receipts:
                self._held[r.handle] = _Held(ref.endpoint, ref.queue.topic, r.message_id, visible_again)
                self._by_id[r.message_id] = r.handle
                out.append(r.message)
        return out

    def _prune(self, now: float) -> None:
        for handle in [h for h, held in self._held.items() if held.visible_again < now]:
            self._forget(handle)

    def _forget(self, handle: str) -> _Held | None:
        held = self._held.pop(handle, None)
        if held is not None and self._by_id.get(held.message_id) == handle:
            del self._by_id[held.message_id]
        return held

    def _resolve(self, target: BytesMessage | str) -> tuple[str, _Held]:
        handle = target.receipt_handle if isinstance(target, BytesMessage) else target
        with self._state_lock:
            if handle is not None and handle not in self._held:
                handle = self._by_id.get(handle, handle)  # a message id (RocketMQ's OMS acked by id)
            held = self._held.get(handle or "")
        if handle is None or held is None:
            raise OMSRuntimeException(
                Code.INVALID_RECEIPT_HANDLE,
                "unknown receipt handle: not received by this consumer, already acked, or its invisible time ended",
            )
        return handle, held

    def ack(self, target: BytesMessage | str) -> None:
        """Acknowledge a received message (the message, its ``RECEIPT_HANDLE`` or its ``MESSAGE_ID``)."""
        self._run(self._ack_async(*self._resolve(target)), self.config.timeout_s)

    async def _ack_async(self, handle: str, held: _Held) -> None:
        failures = await self._running_calls().ack(held.endpoint, held.topic, [(held.message_id, handle)])
        with self._state_lock:
            self._forget(handle)
        if failures:
            code = failures[0][1]
            raise exception_for(code, f"ack of {held.message_id} refused: {code_name(code)}")

    def change_invisible_duration(self, target: BytesMessage | str, invisible_ms: int) -> None:
        """The message comes again after ``invisible_ms`` (0 = now) with its redelivery count + 1."""
        handle, held = self._resolve(target)
        new = self._run(self._change_async(handle, held, invisible_ms), self.config.timeout_s)
        if isinstance(target, BytesMessage):
            target.sys_headers()[BuiltinKeys.RECEIPT_HANDLE] = new

    async def _change_async(self, handle: str, held: _Held, invisible_ms: int) -> str:
        calls = self._running_calls()
        new = await calls.change_invisible(held.endpoint, held.topic, handle, held.message_id, invisible_ms)
        with self._state_lock:
            self._forget(handle)
            held.visible_again = time.monotonic() + invisible_ms / 1000
            self._held[new] = held
            self._by_id[held.message_id] = new
        return new

    def nack(self, target: BytesMessage | str, delay_ms: int = 0) -> None:
        """Give the message back: it is delivered again after ``delay_ms``."""
        self.change_invisible_duration(target, delay_ms)

    def __iter__(self) -> Iterator[BytesMessage]:
        """Blocks for messages until the consumer shuts down."""
        while self.is_running:
            message = self.receive()
            if message is not None:
                yield message

    def iter(self, timeout: float | None = None) -> Iterator[BytesMessage]:
        """Messages until none arrives within ``timeout`` seconds."""
        while True:
            message = self.receive(timeout)
            if message is None:
                return
            yield message

    # -- queue level --------------------------------------------------------------------------------------------

    def queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` on every broker (route from the access point)."""
        return self._run(self._queues_async(topic), self.config.timeout_s)

    async def _queues_async(self, topic: str) -> list[MessageQueue]:
        return [r.queue for r in await self._readable_queues(self._running_core(), topic)]

    def pull(
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
        """Up to ``max_messages`` from ``offset`` on (waiting up to ``timeout`` s at the queue's end), decoded as
        the producer sent them. Pulling does not commit: call ``commit``."""
        return self._run(
            self._pull_async(queue, offset, max_messages, timeout, expression, expression_type, max_bytes),
            timeout + self.config.timeout_s,
        )

    async def _pull_async(
        self,
        queue: MessageQueue,
        offset: int,
        max_messages: int,
        timeout: float,
        expression: str | MessageSelector | None,
        expression_type: str | None,
        max_bytes: int,
    ) -> PullResult:
        if offset < 0 or max_messages <= 0 or timeout < 0:
            raise ValueError("offset and timeout must not be negative, max_messages must be positive")
        selector = MessageSelector.of(expression, expression_type) if expression is not None else None
        return await self._pull(self._running_core(), queue, offset, max_messages, timeout, selector, max_bytes)

    async def _pull(
        self,
        core: ClientCore,
        queue: MessageQueue,
        offset: int,
        max_messages: int,
        timeout: float,
        selector: MessageSelector | None,
        max_bytes: int,
    ) -> PullResult:
        calls = self._running_calls()
        ref = await self._queue_ref(core, queue)
        try:
            response = await calls.pull_batch(ref, offset, max_messages, int(timeout * 1000), selector, max_bytes)
        except PullBatchError as exc:
            if exc.code != Code.ILLEGAL_OFFSET:
                raise
            policy = definition_pb2.QueryOffsetPolicy
            low = await calls.query_offset(ref, policy.BEGINNING)
            high = await calls.query_offset(ref, policy.END)
            return PullResult(PullStatus.OFFSET_ILLEGAL, queue, low if offset < low else high, low, high)
        next_offset = int(response.next_offset)
        low, high = int(response.min_offset), int(response.max_offset)
        if response.status.code != Code.OK:
            status = PullStatus.NO_MATCHED_MSG if next_offset > offset else PullStatus.NO_NEW_MSG
            return PullResult(status, queue, next_offset, low, high)
        messages = list(decode_records(response.records))
        if selector is not None:
            messages = [m for m in messages if selector.accepts_tag(m.tags)]
        status = PullStatus.FOUND if messages else PullStatus.NO_MATCHED_MSG
        return PullResult(status, queue, next_offset, low, high, messages)

    def commit(self, queue: MessageQueue, offset: int) -> None:
        """Commit ``offset`` (the next one to consume) for the group on ``queue`` (v2 UpdateOffset)."""
        self._run(self._commit_async(queue, offset), self.config.timeout_s)

    async def _commit_async(self, queue: MessageQueue, offset: int) -> None:
        calls = self._running_calls()
        await calls.update_offset(await self._queue_ref(self._running_core(), queue), offset)

    def committed(self, queue: MessageQueue) -> int | None:
        """The group's committed offset on ``queue``, None if it never committed one."""
        return self._run(self._committed_async(queue), self.config.timeout_s)

    async def _committed_async(self, queue: MessageQueue) -> int | None:
        calls = self._running_calls()
        return await calls.get_offset(await self._queue_ref(self._running_core(), queue))

    def _query(self, queue: MessageQueue, policy: int, timestamp_ms: int | None = None) -> int:
        return self._run(self._query_async(queue, policy, timestamp_ms), self.config.timeout_s)

    async def _query_async(self, queue: MessageQueue, policy: int, timestamp_ms: int | None = None) -> int:
        calls = self._running_calls()
        return await calls.query_offset(await self._queue_ref(self._running_core(), queue), policy, timestamp_ms)

    def offset_for_time(self, queue: MessageQueue, timestamp: int | float | dt.datetime) -> int:
        """The first offset stored at or after ``timestamp`` (ms since the epoch, or a datetime)."""
        return self._query(queue, definition_pb2.QueryOffsetPolicy.TIMESTAMP, _timestamp_ms(timestamp))

    def earliest_offset(self, queue: MessageQueue) -> int:
        return self._query(queue, definition_pb2.QueryOffsetPolicy.BEGINNING)

    def latest_offset(self, queue: MessageQueue) -> int:
        """One past the last stored message (where a new message will go)."""
        return self._query(queue, definition_pb2.QueryOffsetPolicy.END)

    def aio(self) -> AsyncPullConsumer:
        """The same consumer for asyncio code: ``await c.receive()``, ``async for m in c``, ``await c.pull(...)``."""
        from oms.consumer.aio import AsyncPullConsumer

        return AsyncPullConsumer(self)

    def __repr__(self) -> str:
        return f"PullConsumer(group={self.config.group!r}, topics={sorted(self._selectors)})"
