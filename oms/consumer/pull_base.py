"""The pull consumer's state and its loop-side calls, shared by ``PullConsumer`` and its asyncio face.

Received messages are held with their receipt handles until acked; queue-level pulls return ``PullResult``s.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from rocketmq.grpc_protocol import definition_pb2

from oms.client.core import ClientCore
from oms.client.endpoints import Endpoint
from oms.consumer.base import ConsumerBase
from oms.consumer.calls import PullBatchError, QueueRef, Receipt, code_name
from oms.consumer.columns import MessageColumns, decode_columns, tag_of
from oms.consumer.config import MAX_FRAMED_BODIES, MAX_RECEIVE_BATCH
from oms.consumer.framed import RECEIVE_BATCH_METHOD, FramedReceive
from oms.consumer.frames import RecordFrames, locate_frames
from oms.consumer.records import decode_records
from oms.consumer.selector import MessageSelector
from oms.context import ClientContext
from oms.errors import OMSRuntimeException, exception_for
from oms.keys import OMSBuiltinKeys
from oms.keyvalue import KeyValue
from oms.message import BytesMessage
from oms.queue import MessageQueue
from orbitmq.errors import Code
from orbitmq.proto import pop_pb2

EXPIRY_MARGIN_S = 2.0  # a prefetched message this close to becoming visible again is not handed out


class PullStatus(Enum):
    """RocketMQ's ``PullStatus``."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


class PullShape(Enum):
    """What a pull decodes its records into: ``PullResult.messages``, ``.columns`` or ``.frames``."""

    MESSAGES = "messages"
    COLUMNS = "columns"
    FRAMES = "frames"


@dataclass(frozen=True)
class PullResult:
    """One pull: ``messages`` in queue order and ``next_offset`` to pull from next (also on OFFSET_ILLEGAL:
    the nearest valid offset). A columnar pull (``pull_columns``) fills ``columns`` instead of ``messages``, a
    located one (``pull_frames``) ``frames``."""

    status: PullStatus
    queue: MessageQueue
    next_offset: int
    min_offset: int
    max_offset: int
    messages: list[BytesMessage] = field(default_factory=list)
    columns: MessageColumns | None = None
    frames: RecordFrames | None = None

    def __len__(self) -> int:
        if self.frames is not None:
            return len(self.frames)
        return len(self.columns) if self.columns is not None else len(self.messages)

    def __iter__(self) -> Iterator[BytesMessage]:
        return iter(self.messages)


def _no_rows(
    shape: PullShape, queue: MessageQueue, status: PullStatus, next_offset: int, low: int, high: int
) -> PullResult:
    """A pull with nothing in it, its ``columns``/``frames`` empty rather than None (readers need no None check)."""
    return PullResult(
        status,
        queue,
        next_offset,
        low,
        high,
        columns=MessageColumns() if shape is PullShape.COLUMNS else None,
        frames=RecordFrames() if shape is PullShape.FRAMES else None,
    )


@dataclass
class _Held:
    """A received, not yet acked message: where its ack goes and until when its handle is good."""

    endpoint: Endpoint
    topic: str
    message_id: str
    visible_again: float  # time.monotonic() when the broker redelivers it


def timestamp_ms(when: int | float | dt.datetime) -> int:
    if isinstance(when, dt.datetime):
        return int(when.timestamp() * 1000)
    return int(when)


class PullConsumerBase(ConsumerBase):
    """Receive/ack bookkeeping and the coroutines behind every ``PullConsumer`` call (blocking or awaited)."""

    CLIENT_TYPE = definition_pb2.ClientType.SIMPLE_CONSUMER
    KIND = "pull consumer"

    def __init__(self, context: ClientContext, attributes: KeyValue) -> None:
        super().__init__(context, attributes)
        self._cache: deque[BytesMessage] = deque()
        self._held: dict[str, _Held] = {}  # receipt handle -> where to ack
        self._next_expiry = math.inf  # no held message's invisible time ends before this (time.monotonic())
        self._by_id: dict[str, str] = {}  # message id -> receipt handle (ack by id, as RocketMQ's OMS)
        self._state_lock = threading.Lock()
        self._round_robin = itertools.count()
        # framed_receive's reuse: the readable queues of the last route seen per topic, and request bodies by what
        # makes them (a worker sends the same few receives thousands of times a second)
        self._framed_refs: dict[str, tuple[object, list[QueueRef]]] = {}
        self._framed_bodies: dict[tuple[QueueRef, MessageSelector, int, float, int | None], bytes] = {}

    async def _resubscribe(self, core: ClientCore, topic: str) -> None:
        await core.routes.get(topic)
        await self._apply_consume_from(core, [topic])
        await self._sync_settings(core)

    async def _started(self, core: ClientCore) -> None:
        await self._apply_consume_from(core, sorted(self._selectors))

    def _wait_s(self, timeout: float | Mapping[str, Any] | None) -> float:
        if isinstance(timeout, Mapping):
            ms = KeyValue(timeout).get_int(OMSBuiltinKeys.TIMEOUT, 0)
            return ms / 1000 if ms > 0 else self.config.timeout_s
        if timeout is None:
            return self.config.timeout_s
        if timeout < 0:
            raise ValueError(f"timeout must not be negative, got {timeout}")
        return float(timeout)

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
        polled = False
        for n in range(len(topics)):
            topic = topics[(start + n) % len(topics)]
            selector = self._selectors.get(topic)
            if selector is None:
                continue
            refs = await self._readable_queues(core, topic)
            if not refs:
                continue
            polled = True
            ref = refs[(start // len(topics)) % len(refs)]
            left = max(0.0, deadline - time.monotonic())
            share = left / (len(topics) - n)  # every attached topic gets its turn within the timeout
            got = await calls.receive(
                ref, selector, min(batch, MAX_RECEIVE_BATCH), share, invisible_ms=self.config.invisible_ms
            )
            if got.receipts:
                return self._hold(ref, got.receipts)
        if not polled:
            # no queue to read (none of the topics' queues is readable: write-only permission): the receive still
            # takes its time, as a long poll with nothing would, or a caller's loop would spin on empty answers
            await asyncio.sleep(max(0.0, deadline - time.monotonic()))
        return []

    def framed_receive(self, topic: str, max_messages: int, wait_s: float) -> FramedReceive | None:
        """A receive of up to ``max_messages`` from ``topic`` (long-polling ``wait_s``) for the caller to send over
        its own frame connection (``oms/consumer/framed.py``); callable from any thread, it never waits. None when
        that is not possible yet or here: the topic's route or the broker's frame listener not known yet, or a
        broker without ``Pop/ReceiveBatch``. A receive through the client (``batch_receive``) learns them."""
        core = self._running_core()
        calls = self._running_calls()
        selector = self._selectors.get(topic)
        route = core.routes.cached(topic)
        if selector is None or route is None:
            return None
        seen = self._framed_refs.get(topic)
        if seen is None or seen[0] is not route:  # a new route (brokers moved, queues changed)
            readable = [QueueRef(q.queue, q.endpoint) for q in route.queues if q.readable]
            seen = self._framed_refs[topic] = (route, readable)
        refs = seen[1]
        if not refs:
            return None
        ref = refs[next(self._round_robin) % len(refs)]
        address = core.runtime.pool.frame_address(ref.endpoint)
        if address is None or not calls.serves_receive_batch(ref.endpoint):
            return None
        batch = min(max_messages, MAX_RECEIVE_BATCH)
        invisible_ms = self.config.invisible_ms
        key = (ref, selector, batch, wait_s, invisible_ms)
        body = self._framed_bodies.get(key)
        if body is None:
            if len(self._framed_bodies) >= MAX_FRAMED_BODIES:
                self._framed_bodies.clear()
            # no attempt id: a framed receive is never retried as it is (its caller receives anew), and an id would
            # cost a uuid here and a remembered attempt on the broker per receive, and make every body different
            request = calls.receive_batch_request(ref, selector, batch, wait_s, invisible_ms)
            body = self._framed_bodies[key] = request.SerializeToString()
        timeout_s = wait_s + self.config.timeout_s
        return FramedReceive(address[0], address[1], RECEIVE_BATCH_METHOD, body, core.headers.build(), timeout_s, ref)

    def framed_answer(self, call: FramedReceive, body: bytes) -> list[BytesMessage]:
        """The messages of a ``framed_receive``'s answer (its serialized body), held for ack like any received
        message; an ``OMSException`` when the broker refused the receive."""
        response = pop_pb2.ReceiveBatchResponse.FromString(body)
        received = self._running_calls().receive_batch_result(response, call.what)
        return self._hold(call.ref, received.receipts) if received.receipts else []

    def _hold(self, ref: QueueRef, receipts: list[Receipt]) -> list[BytesMessage]:
        now = time.monotonic()
        visible_again = now + self.config.invisible_ms / 1000
        out = []
        with self._state_lock:
            if self._next_expiry < now:  # a scan of everything held only when something can have expired
                self._prune(now)
            for r in receipts:
                self._held[r.handle] = _Held(ref.endpoint, ref.queue.topic, r.message_id, visible_again)
                self._by_id[r.message_id] = r.handle
                out.append(r.message)
            self._next_expiry = min(self._next_expiry, visible_again)
        return out

    def _prune(self, now: float) -> None:
        for handle in [h for h, held in self._held.items() if held.visible_again < now]:
            self._forget(handle)
        self._next_expiry = min((held.visible_again for held in self._held.values()), default=math.inf)

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

    async def _ack_async(self, handle: str, held: _Held) -> None:
        failures = await self._running_calls().ack(held.endpoint, held.topic, [(held.message_id, handle)])
        with self._state_lock:
            self._forget(handle)
        if failures:
            code = failures[0][1]
            raise exception_for(code, f"ack of {held.message_id} refused: {code_name(code)}")

    async def _change_async(self, handle: str, held: _Held, invisible_ms: int) -> str:
        calls = self._running_calls()
        new = await calls.change_invisible(held.endpoint, held.topic, handle, held.message_id, invisible_ms)
        with self._state_lock:
            self._forget(handle)
            held.visible_again = time.monotonic() + invisible_ms / 1000
            self._next_expiry = min(self._next_expiry, held.visible_again)
            self._held[new] = held
            self._by_id[held.message_id] = new
        return new

    async def _queues_async(self, topic: str) -> list[MessageQueue]:
        return [r.queue for r in await self._readable_queues(self._running_core(), topic)]

    async def _pull_async(
        self,
        queue: MessageQueue,
        offset: int,
        max_messages: int,
        timeout: float,
        expression: str | MessageSelector | None,
        expression_type: str | None,
        max_bytes: int,
        shape: PullShape = PullShape.MESSAGES,
        properties: bool = False,
    ) -> PullResult:
        if offset < 0 or max_messages <= 0 or timeout < 0:
            raise ValueError("offset and timeout must not be negative, max_messages must be positive")
        selector = MessageSelector.of(expression, expression_type) if expression is not None else None
        core = self._running_core()
        return await self._pull(core, queue, offset, max_messages, timeout, selector, max_bytes, shape, properties)

    async def _pull(
        self,
        core: ClientCore,
        queue: MessageQueue,
        offset: int,
        max_messages: int,
        timeout: float,
        selector: MessageSelector | None,
        max_bytes: int,
        shape: PullShape = PullShape.MESSAGES,
        properties: bool = False,
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
            nearest = low if offset < low else high
            return _no_rows(shape, queue, PullStatus.OFFSET_ILLEGAL, nearest, low, high)
        next_offset = int(response.next_offset)
        low, high = int(response.min_offset), int(response.max_offset)
        if response.status.code != Code.OK:
            status = PullStatus.NO_MATCHED_MSG if next_offset > offset else PullStatus.NO_NEW_MSG
            return _no_rows(shape, queue, status, next_offset, low, high)
        if shape is PullShape.FRAMES:
            frames = locate_frames(response.records)
            if selector is not None and selector.tags:  # the client-side tag recheck needs each record's tag
                frames = frames.take(
                    [i for i in range(len(frames)) if selector.accepts_tag(tag_of(frames.raw_properties(i)))]
                )
            status = PullStatus.FOUND if len(frames) else PullStatus.NO_MATCHED_MSG
            return PullResult(status, queue, next_offset, low, high, frames=frames)
        if shape is PullShape.COLUMNS:
            cols = decode_columns(response.records, properties)
            if selector is not None:
                cols = cols.take([i for i, tag in enumerate(cols.tags) if selector.accepts_tag(tag)])
            status = PullStatus.FOUND if len(cols) else PullStatus.NO_MATCHED_MSG
            return PullResult(status, queue, next_offset, low, high, columns=cols)
        messages = decode_records(response.records)
        if selector is not None:
            messages = [m for m in messages if selector.accepts_tag(m.tags)]
        status = PullStatus.FOUND if messages else PullStatus.NO_MATCHED_MSG
        return PullResult(status, queue, next_offset, low, high, messages)

    async def _commit_async(self, queue: MessageQueue, offset: int) -> None:
        calls = self._running_calls()
        await calls.update_offset(await self._queue_ref(self._running_core(), queue), offset)

    async def _committed_async(self, queue: MessageQueue) -> int | None:
        calls = self._running_calls()
        return await calls.get_offset(await self._queue_ref(self._running_core(), queue))

    async def _query_async(self, queue: MessageQueue, policy: int, timestamp_ms: int | None = None) -> int:
        calls = self._running_calls()
        return await calls.query_offset(await self._queue_ref(self._running_core(), queue), policy, timestamp_ms)
