"""The OMS ``PullConsumer``: ``receive()``/``ack(message)`` on receive/ack, and a queue-level API over offsets.

Queue level (what a stream processor drives): ``queues(topic)``, ``pull(queue, offset)``, ``commit``, ``committed``,
``offset_for_time``, ``earliest_offset``/``latest_offset``; pulls are ``Consume/PullBatch`` returning stored records.
The state and the loop-side calls are in ``pull_base.py``, shared with the asyncio face (``aio.py``).
"""

from __future__ import annotations

import concurrent.futures
import datetime as dt
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from rocketmq.grpc_protocol import definition_pb2

from oms.consumer.aio import AsyncPullConsumer
from oms.consumer.config import MAX_RECEIVE_BATCH
from oms.consumer.pull_base import PullConsumerBase, PullResult, PullShape, PullStatus, timestamp_ms
from oms.consumer.selector import MessageSelector
from oms.errors import OMSIllegalStateException, OMSTimeOutException
from oms.keys import BuiltinKeys
from oms.keyvalue import KeyValue
from oms.lifecycle import RUN_GUARD_S
from oms.message import BytesMessage
from oms.queue import MessageQueue
from orbitmq.errors import Code

__all__ = ["PendingPull", "PullConsumer", "PullResult", "PullShape", "PullStatus"]


class PendingPull:
    """A pull started with ``PullConsumer.start_pull``, running on the client's loop: several can be outstanding
    from one thread with no thread per pull (a reader pipelining its pulls). ``result()`` waits as ``pull`` does."""

    def __init__(self, future: concurrent.futures.Future[PullResult], wait_s: float) -> None:
        self._future = future
        self._wait_s = wait_s

    def result(self) -> PullResult:
        try:
            return self._future.result(self._wait_s)
        except TimeoutError:
            self._future.cancel()
            raise OMSTimeOutException(Code.REQUEST_TIMEOUT, f"no answer within {self._wait_s:.3f}s") from None
        except concurrent.futures.CancelledError:
            raise OMSIllegalStateException("the pull consumer was shut down during the pull") from None

    def cancel(self) -> bool:
        """Nobody will read the answer: True if the pull was stopped, False if it had already answered (its
        answer then stays readable through ``result()``)."""
        return self._future.cancel()


class PullConsumer(PullConsumerBase):
    """Created by ``MessagingAccessPoint.create_pull_consumer(consumer_id=...)``; not started."""

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

    def ack(self, target: BytesMessage | str) -> None:
        """Acknowledge a received message (the message, its ``RECEIPT_HANDLE`` or its ``MESSAGE_ID``)."""
        self._run(self._ack_async(*self._resolve(target)), self.config.timeout_s)

    def change_invisible_duration(self, target: BytesMessage | str, invisible_ms: int) -> None:
        """The message comes again after ``invisible_ms`` (0 = now) with its redelivery count + 1."""
        handle, held = self._resolve(target)
        new = self._run(self._change_async(handle, held, invisible_ms), self.config.timeout_s)
        if isinstance(target, BytesMessage):
            target.sys_headers()[BuiltinKeys.RECEIPT_HANDLE] = new

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

    def queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` on every broker (route from the access point)."""
        return self._run(self._queues_async(topic), self.config.timeout_s)

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

    def pull_columns(
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
        """``pull`` for tabular readers: the result's ``columns`` (``MessageColumns``, one list per field) instead
        of message objects, several times cheaper per message; user properties only when ``properties``."""
        coro = self._pull_async(
            queue, offset, max_messages, timeout, expression, expression_type, max_bytes, PullShape.COLUMNS, properties
        )
        return self._run(coro, timeout + self.config.timeout_s)

    def pull_frames(
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
        """``pull`` for readers that build columns from the payload's bytes: the result's ``frames``
        (``RecordFrames``: the records located in the ``PullBatch`` payload, nothing decoded), e.g. for
        ``oms.consumer.arrow_columns.to_arrow``. ``frames.decoded()`` equals ``pull_columns``' columns."""
        coro = self._pull_async(
            queue, offset, max_messages, timeout, expression, expression_type, max_bytes, PullShape.FRAMES
        )
        return self._run(coro, timeout + self.config.timeout_s)

    def start_pull(
        self,
        queue: MessageQueue,
        offset: int,
        max_messages: int = 32,
        timeout: float = 0.0,
        *,
        shape: PullShape = PullShape.FRAMES,
        expression: str | MessageSelector | None = None,
        expression_type: str | None = None,
        max_bytes: int = 0,
        properties: bool = False,
    ) -> PendingPull:
        """``pull_frames`` (or, by ``shape``, ``pull_columns``/``pull``) started without waiting for it."""
        coro = self._pull_async(
            queue, offset, max_messages, timeout, expression, expression_type, max_bytes, shape, properties
        )
        return PendingPull(self._submit(coro), timeout + self.config.timeout_s + RUN_GUARD_S)

    def commit(self, queue: MessageQueue, offset: int) -> None:
        """Commit ``offset`` (the next one to consume) for the group on ``queue`` (v2 UpdateOffset)."""
        self._run(self._commit_async(queue, offset), self.config.timeout_s)

    def committed(self, queue: MessageQueue) -> int | None:
        """The group's committed offset on ``queue``, None if it never committed one."""
        return self._run(self._committed_async(queue), self.config.timeout_s)

    def _query(self, queue: MessageQueue, policy: int, timestamp_ms: int | None = None) -> int:
        return self._run(self._query_async(queue, policy, timestamp_ms), self.config.timeout_s)

    def offset_for_time(self, queue: MessageQueue, timestamp: int | float | dt.datetime) -> int:
        """The first offset stored at or after ``timestamp`` (ms since the epoch, or a datetime)."""
        return self._query(queue, definition_pb2.QueryOffsetPolicy.TIMESTAMP, timestamp_ms(timestamp))

    def earliest_offset(self, queue: MessageQueue) -> int:
        return self._query(queue, definition_pb2.QueryOffsetPolicy.BEGINNING)

    def latest_offset(self, queue: MessageQueue) -> int:
        """One past the last stored message (where a new message will go)."""
        return self._query(queue, definition_pb2.QueryOffsetPolicy.END)

    def aio(self) -> AsyncPullConsumer:
        """The same consumer for asyncio code: ``await c.receive()``, ``async for m in c``, ``await c.pull(...)``."""
        return AsyncPullConsumer(self)

    def __repr__(self) -> str:
        return f"PullConsumer(group={self.config.group!r}, topics={sorted(self._selectors)})"
