"""The OMS ``Producer``: send, send_async, send_oneway, send_batch, ordered (selector) and transactional sends.

Sync calls validate on the caller's thread and wait for the loop; async results and hooks run on callback threads.
The send path (queue choice, retries) is ``sender.py``; transactions are ``transaction.py``; plumbing ``base.py``.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from oms.client.core import ClientCore
from oms.client.routes import RouteQueue, TopicRoute
from oms.convert import WireMessage
from oms.errors import (
    OMSException,
    OMSIllegalStateException,
    OMSMessageFormatException,
    OMSRuntimeException,
    OMSTransactionException,
)
from oms.future import Future
from oms.keys import BuiltinKeys
from oms.message import BytesMessage
from oms.producer.aio import AsyncProducer
from oms.producer.base import ProducerBase
from oms.producer.coalesce import Coalesced, SendCoalescer
from oms.producer.columns import Keys, column_messages, plain_column_runs
from oms.producer.plain_run import PlainRun, in_input_order
from oms.producer.result import SendResult
from oms.producer.selector import QueueSelector
from oms.producer.sender import DirectAttemptFailed, check_pinnable, partition_pinned, pin, split_batches, topic_of
from oms.producer.transaction import Executor, TransactionalResult, is_executor, run_local_transaction
from orbitmq.errors import Code
from orbitmq.limits import MAX_BATCH_SIZE, MAX_SEND_BATCH_MESSAGES

log = logging.getLogger("oms.producer")


class Producer(ProducerBase):
    """Created by ``MessagingAccessPoint.create_producer``; ``startup()`` (or ``with``) before sending."""

    def create_bytes_message(self, destination: str, body: bytes | str) -> BytesMessage:
        return BytesMessage(body, destination)

    def _pin_all(
        self, wires: list[WireMessage], selector: QueueSelector, arg: Any, timeout_s: float, batch: list[BytesMessage]
    ) -> RouteQueue:
        """One queue for every message of a selector batch (they share the topic, the selector and its ``arg``).
        The route is fetched once for the batch (a log appender pins thousands of messages a second)."""
        try:
            if len({w.topic for w in wires}) != 1:
                raise OMSMessageFormatException(Code.BAD_REQUEST, "a selector batch must have one topic")
            for w in wires:
                check_pinnable(w)
            route = self._route(wires[0].topic, timeout_s)
            chosen = [pin(w, selector, arg, route) for w in wires]
            if len({c.queue for c in chosen}) != 1:
                raise OMSRuntimeException(
                    Code.BAD_REQUEST, f"the selector chose {len({c.queue for c in chosen})} queues for one batch"
                )
        except OMSException as exc:
            for m in batch:
                self._hooks.after_send(m, None, exc)
            raise
        return chosen[0]

    def _pin(self, wire: WireMessage, selector: QueueSelector, arg: Any, timeout_s: float) -> RouteQueue:
        """Let ``selector`` choose among the writable queues, and make the broker store the message there."""
        check_pinnable(wire)
        return pin(wire, selector, arg, self._route(wire.topic, timeout_s))

    def _route(self, topic: str, timeout_s: float) -> TopicRoute:
        """The topic's route: the cached one read here (no trip through the loop), else fetched on the loop."""
        core = self._running_core()
        return core.routes.cached(topic) or self._run(core.routes.get(topic), timeout_s)

    # -- public sends -------------------------------------------------------------------------------------------

    def send(
        self,
        message: BytesMessage,
        attributes: Mapping[str, Any] | Executor | None = None,
        transaction_attributes: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
        executor: Executor | None = None,
    ) -> SendResult:
        """Send and wait for the broker's answer; raises an ``OMSException`` subclass on failure.

        ``send(msg, executor, attributes)`` is the OMS transactional form (see ``LocalTransactionExecutor``).
        ``selector``/``arg`` choose the queue (ordered sends). ``timeout`` (seconds) beats the ``TIMEOUT``
        attribute (ms) and the producer's ``OPERATION_TIMEOUT``; retries share it.
        """
        if executor is None and attributes is not None and is_executor(attributes):
            executor, attributes = attributes, transaction_attributes  # type: ignore[assignment]
        attrs: Mapping[str, Any] | None = attributes  # type: ignore[assignment]
        if executor is not None:
            if selector is not None:
                raise OMSMessageFormatException(Code.BAD_REQUEST, "a transactional send cannot use a selector")
            return self._send_transactional(message, executor, attrs, timeout)
        core = self._running_core()
        timeout_s = self._timeout(attrs, timeout)
        wire = self._prepare(message)
        try:
            pinned = self._pin(wire, selector, arg, timeout_s) if selector is not None else None
            result = self._send_and_wait(core, [wire], timeout_s, pinned)[0]
        except OMSException as exc:
            self._hooks.after_send(message, None, exc)
            raise
        self._hooks.after_send(message, result, None)
        return result

    def _send_and_wait(
        self,
        core: ClientCore,
        wires: Sequence[WireMessage],
        timeout_s: float,
        pinned: RouteQueue | None,
        fast_batch: bool = False,
    ) -> Sequence[SendResult]:
        """One request sent and its answer awaited: on this thread over the broker's frame listener where it can
        (``Sender.send_direct``: no hand-over to the loop and back); else, and for the retries of a direct attempt
        that failed, on the loop."""
        deadline = time.monotonic() + timeout_s
        sender = self._sender
        attempts: int | None = None
        last_broker: str | None = None
        started: float | None = None
        if not core.runtime.loop.in_loop():  # on the loop, _run refuses the call below
            started = time.monotonic()
            try:
                direct = sender.send_direct(core, wires, deadline, pinned, fast_batch)
            except DirectAttemptFailed as failed:
                if sender.attempts <= 1:
                    raise failed.error from None
                log.info(
                    "send to %s on %s failed (attempt 1/%d): %s",
                    topic_of(wires),
                    failed.broker,
                    sender.attempts,
                    failed.error,
                )
                attempts, last_broker = sender.attempts - 1, failed.broker
            else:
                if direct is not None:
                    return direct[0]
                started = None
        send = sender.send(
            core, wires, deadline, pinned, attempts, fast_batch, last_broker=last_broker, started=started
        )
        results, _ = self._run(send, timeout_s)
        return results

    def send_async(
        self,
        message: BytesMessage,
        attributes: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
    ) -> Future[SendResult]:
        """Send without waiting: the ``oms.Future`` completes with the ``SendResult`` or the exception.

        Invalid messages raise here, before anything is sent; listeners run on a producer callback thread.
        """
        core = self._running_core()
        timeout_s = self._timeout(attributes, timeout)
        wire = self._prepare(message)
        try:
            pinned = self._pin(wire, selector, arg, timeout_s) if selector is not None else None
            deadline = time.monotonic() + timeout_s
            future: Future[SendResult] = Future()
            if SendCoalescer.takes(wire, pinned):  # batched with what else is waiting (oms/producer/coalesce.py)
                self._coalesced_started()
                self._coalescer.submit(core, Coalesced(wire, deadline, (message, future)))
                return future
            inner = self._submit(self._sender.send(core, [wire], deadline, pinned))
        except OMSException as exc:
            self._hooks.after_send(message, None, exc)
            raise
        inner.add_done_callback(lambda done: self._dispatch(self._complete_async, message, done, future))
        return future

    def _complete_async(
        self,
        message: BytesMessage,
        inner: concurrent.futures.Future[tuple[list[SendResult], RouteQueue]],
        future: Future[SendResult],
    ) -> None:
        result: SendResult | None = None
        error: BaseException | None = None
        try:
            result = inner.result()[0][0]
        except concurrent.futures.CancelledError:
            error = OMSIllegalStateException("the producer shut down before the send finished")
        except OMSException as exc:
            error = exc
        except Exception as exc:  # a bug, not a broker answer: still complete the future
            error = OMSRuntimeException(Code.INTERNAL_ERROR, f"send failed: {exc!r}")
        self._hooks.after_send(message, result, error)
        if not future.set_running_or_notify_cancel():
            return  # the caller cancelled the future: nobody waits for the outcome
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def send_oneway(self, message: BytesMessage, attributes: Mapping[str, Any] | None = None) -> None:
        """Fire and forget: one attempt, no answer awaited; any error is logged, never raised."""
        try:
            core = self._running_core()
            timeout_s = self._timeout(attributes, None)
            wire = self._prepare(message)
            inner = self._submit(self._sender.send(core, [wire], time.monotonic() + timeout_s, attempts=1))
        except Exception as exc:
            log.warning("oneway send of %r not sent: %s", message, exc)
            return
        inner.add_done_callback(lambda done: self._dispatch(self._complete_oneway, message, done))

    def send_batch(
        self,
        messages: Iterable[BytesMessage],
        attributes: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        selector: QueueSelector | None = None,
        arg: Any = None,
    ) -> list[SendResult]:
        """Send many messages in as few requests as possible: split per topic and at 4 MiB of bodies.

        Results come back in input order. If a request fails, its exception is raised; requests sent before it
        stay stored (their ``oms_after_send`` hooks saw their results). ``timeout`` applies per request.
        ``selector``/``arg`` put every message (one topic) in the queue the selector picks, in order, as ``send``
        does for one message (RocketMQ's ``send(msgs, mq)``).
        """
        core = self._running_core()
        batch = list(messages)
        if not batch:
            return []
        timeout_s = self._timeout(attributes, timeout)
        runs = self._plain_runs(batch)
        if runs is not None and selector is None:
            return self._send_runs(core, runs, len(batch), timeout_s)
        wires = self._prepare_batch(batch, runs)
        pinned = self._pin_all(wires, selector, arg, timeout_s, batch) if selector is not None else None
        if runs is not None and partition_pinned(pinned):  # stored plain in the chosen queue: the runs as encoded
            return self._send_runs(core, runs, len(batch), timeout_s, pinned)
        results: list[SendResult | None] = [None] * len(batch)
        chunks = split_batches(wires, MAX_BATCH_SIZE, MAX_SEND_BATCH_MESSAGES)
        try:
            for chunk in chunks:
                deadline = time.monotonic() + timeout_s
                send = self._sender.send(core, [wires[i] for i in chunk], deadline, pinned, fast_batch=True)
                sent, _ = self._run(send, timeout_s)
                for i, result in zip(chunk, sent, strict=True):
                    results[i] = result
                    self._hooks.after_send(batch[i], result, None)
        except OMSException as exc:
            for i, m in enumerate(batch):
                if results[i] is None:
                    self._hooks.after_send(m, None, exc)
            raise
        return [r for r in results if r is not None]

    def _send_runs(
        self, core: ClientCore, runs: list[PlainRun], n: int, timeout_s: float, pinned: RouteQueue | None = None
    ) -> list[SendResult]:
        """One request per run, in order; results in the rows' input positions. No hook watches these sends."""
        sent = [self._send_and_wait(core, run, timeout_s, pinned, fast_batch=True) for run in runs]
        return in_input_order(runs, sent, n)

    def send_columns(
        self,
        topic: str,
        bodies: Sequence[bytes],
        *,
        tags: Sequence[str | None] | None = None,
        keys: Sequence[Keys] | None = None,
        properties: Sequence[Mapping[str, str] | None] | None = None,
        property_columns: Mapping[str, Sequence[str | None]] | None = None,
        timeout: float | None = None,
    ) -> list[SendResult]:
        """``send_batch`` for tabular writers: plain messages to ``topic`` given as columns (row ``i`` of each list
        is one message; ``keys`` a list or a space-separated string per row), with no message object per row.
        ``property_columns`` maps a user property's name to its value per row (None: not on that row), checked
        per column rather than per row; on a row it comes after that row's ``properties`` and wins a name clash.

        Each row is validated as ``send_batch`` validates a message (errors name the row). Rows that need more
        than a plain message (a body over the compression threshold, a namespace, ``oms_before_send`` /
        ``oms_after_send`` hooks, which see messages) make the call take ``send_batch``'s path, same results.
        """
        core = self._running_core()
        if not bodies:
            return []
        timeout_s = self._timeout(None, timeout)
        runs = None
        if not self._namespace and not self._hooks.observes_sends():
            runs = plain_column_runs(
                topic,
                bodies,
                tags,
                keys,
                properties,
                property_columns=property_columns,
                born_host=self._born_host,
                max_message_size=self.config.max_message_size,
                compress_over=self.config.compress_msg_body_over_howmuch,
            )
        if runs is None:
            messages = column_messages(topic, bodies, tags, keys, properties, property_columns)
            return self.send_batch(messages, timeout=timeout)
        return self._send_runs(core, runs, len(bodies), timeout_s)

    # -- transactions -------------------------------------------------------------------------------------------

    def prepare(
        self, message: BytesMessage, attributes: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> TransactionalResult:
        """Send ``message`` as a half (invisible) message; commit or roll back the returned transaction.

        ``with producer.prepare(msg) as txn:`` commits when the block succeeds and rolls back on an exception.
        """
        core = self._running_core()
        timeout_s = self._timeout(attributes, timeout)
        wire = self._prepare(message, transactional=True)
        try:
            results, queue = self._run(self._sender.send(core, [wire], time.monotonic() + timeout_s), timeout_s)
            result = results[0]
            if not result.transaction_id:
                raise OMSTransactionException(
                    Code.INVALID_TRANSACTION_ID,
                    f"the broker returned no transaction id for message {result.message_id}",
                )
        except OMSException as exc:
            self._hooks.after_send(message, None, exc)
            raise
        self._hooks.after_send(message, result, None)
        message.sys_headers()[BuiltinKeys.TRANSACTION_ID] = result.transaction_id
        return TransactionalResult(self, result, queue.endpoint)

    def _send_transactional(
        self, message: BytesMessage, executor: Executor, attributes: Mapping[str, Any] | None, timeout: float | None
    ) -> SendResult:
        return run_local_transaction(self.prepare(message, attributes, timeout=timeout), executor, message)

    def aio(self) -> AsyncProducer:
        """The same producer for asyncio code: ``await p.send(...)``, ``send_batch``, ``send_oneway``;
        ``async with producer.aio() as p:`` starts and shuts it down without blocking the event loop."""
        from oms.producer.aio import AsyncProducer

        return AsyncProducer(self)

    def __repr__(self) -> str:
        return f"Producer(client_id={self.client_id!r}, running={self.is_running})"
