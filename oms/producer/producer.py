"""The OMS ``Producer``: send, send_async, send_oneway, send_batch, ordered (selector) and transactional sends.

Sync calls validate on the caller's thread and wait for the loop; async results and hooks run on callback threads.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import logging
import platform
import random
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from google.protobuf import duration_pb2
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from oms.client.core import ClientCore
from oms.client.endpoints import Endpoint
from oms.client.identity import local_host, new_message_id
from oms.client.routes import RouteQueue, TopicRoute
from oms.client.rpc import SUCCESS_CODES
from oms.convert import WireMessage, from_wire, to_wire
from oms.errors import (
    OMSConnectionException,
    OMSException,
    OMSIllegalStateException,
    OMSMessageFormatException,
    OMSRuntimeException,
    OMSTimeOutException,
    OMSTransactionException,
    exception_for,
)
from oms.future import Future
from oms.keys import BuiltinKeys, NonStandardKeys, OMSBuiltinKeys
from oms.keyvalue import KeyValue
from oms.message import BytesMessage
from oms.plugins import ClientPluginManager, Hooks
from oms.producer.fault import LatencyFaultTolerance
from oms.producer.result import STATUS_OF_CODE, SendResult, TransactionResolution
from oms.producer.selector import QueueSelector, group_for_queue
from oms.producer.transaction import (
    Checker,
    Executor,
    LocalTransactionExecutor,
    TransactionalResult,
    TransactionContext,
    checker_fn,
    decide,
    executor_fn,
)
from oms.queue import ANY_QUEUE, MessageQueue
from oms.version import CLIENT_VERSION
from orbitmq.errors import Code
from orbitmq.limits import DEFAULT_OPERATION_TIMEOUT_MS, MAX_BATCH_SIZE, MAX_MESSAGE_BODY_SIZE, MAX_SEND_BATCH_MESSAGES

if TYPE_CHECKING:
    from oms.access_point import MessagingAccessPoint
    from oms.producer.aio import AsyncProducer

T = TypeVar("T")
log = logging.getLogger("oms.producer")

DEFAULT_RETRIES = 2  # RocketMQ retryTimesWhenSendFailed
DEFAULT_COMPRESS_OVER = 4096  # RocketMQ compressMsgBodyOverHowmuch
DEFAULT_CALLBACK_THREADS = 4
RUN_GUARD_S = 2.0  # extra wait on the loop beyond the send deadline, for the answer to travel back
SHUTDOWN_GRACE_S = 3.0  # how long shutdown waits for in-flight async sends
START_TIMEOUT_S = 10.0
# Failures where another broker (or a second try) may succeed; everything else is the caller's to fix.
RETRY_CODES = frozenset(
    {
        Code.INTERNAL_ERROR,
        Code.INTERNAL_SERVER_ERROR,
        Code.FORBIDDEN,  # no writable queue on that broker (RocketMQ retries NO_PERMISSION)
        Code.TOPIC_NOT_FOUND,  # the topic is not (yet) on that broker
        Code.PROXY_TIMEOUT,
        Code.REQUEST_TIMEOUT,
    }
)


@dataclass(frozen=True)
class ProducerConfig:
    timeout_s: float = DEFAULT_OPERATION_TIMEOUT_MS / 1000
    retry_times_when_send_failed: int = DEFAULT_RETRIES
    send_latency_fault_enable: bool = False
    compress_msg_body_over_howmuch: int = DEFAULT_COMPRESS_OVER
    max_message_size: int = MAX_MESSAGE_BODY_SIZE
    callback_threads: int = DEFAULT_CALLBACK_THREADS
    group: str = ""

    @classmethod
    def from_attributes(cls, kv: KeyValue) -> ProducerConfig:
        cfg = cls(
            timeout_s=kv.get_int(OMSBuiltinKeys.OPERATION_TIMEOUT, DEFAULT_OPERATION_TIMEOUT_MS) / 1000,
            retry_times_when_send_failed=kv.get_int(NonStandardKeys.RETRY_TIMES_WHEN_SEND_FAILED, DEFAULT_RETRIES),
            send_latency_fault_enable=kv.get_boolean(NonStandardKeys.SEND_LATENCY_FAULT_ENABLE, False),
            compress_msg_body_over_howmuch=kv.get_int(
                NonStandardKeys.COMPRESS_MSG_BODY_OVER_HOWMUCH, DEFAULT_COMPRESS_OVER
            ),
            max_message_size=kv.get_int(NonStandardKeys.MAX_MESSAGE_SIZE, MAX_MESSAGE_BODY_SIZE),
            callback_threads=kv.get_int(NonStandardKeys.CALLBACK_THREAD_NUMS, DEFAULT_CALLBACK_THREADS),
            group=kv.get_string(NonStandardKeys.PRODUCER_GROUP) or kv.get_string(OMSBuiltinKeys.PRODUCER_ID) or "",
        )
        if cfg.timeout_s <= 0:
            raise ValueError(f"{OMSBuiltinKeys.OPERATION_TIMEOUT} must be positive, got {cfg.timeout_s * 1000} ms")
        if cfg.retry_times_when_send_failed < 0:
            raise ValueError(f"{NonStandardKeys.RETRY_TIMES_WHEN_SEND_FAILED} must be >= 0")
        if cfg.max_message_size <= 0:
            raise ValueError(f"{NonStandardKeys.MAX_MESSAGE_SIZE} must be positive")
        if cfg.callback_threads <= 0:
            raise ValueError(f"{NonStandardKeys.CALLBACK_THREAD_NUMS} must be positive")
        return cfg


def split_batches(wires: Sequence[WireMessage], max_bytes: int, max_count: int) -> list[list[int]]:
    """Indexes of ``wires`` grouped per topic (first-seen order) into requests of at most ``max_bytes`` of bodies
    and ``max_count`` messages; a single larger message gets a request of its own."""
    by_topic: dict[str, list[int]] = {}
    for i, wire in enumerate(wires):
        by_topic.setdefault(wire.topic, []).append(i)
    chunks: list[list[int]] = []
    for indexes in by_topic.values():
        current: list[int] = []
        size = 0
        for i in indexes:
            body = wires[i].body_size
            if current and (size + body > max_bytes or len(current) >= max_count):
                chunks.append(current)
                current, size = [], 0
            current.append(i)
            size += body
        if current:
            chunks.append(current)
    return chunks


def _retryable(error: OMSException) -> bool:
    return isinstance(error, OMSConnectionException) or error.code in RETRY_CODES


def _is_executor(value: object) -> bool:
    if isinstance(value, Mapping):
        return False
    return isinstance(value, LocalTransactionExecutor) or callable(getattr(value, "execute", None)) or callable(value)


class Producer:
    """Created by ``MessagingAccessPoint.create_producer``; ``startup()`` (or ``with``) before sending."""

    def __init__(
        self, access_point: MessagingAccessPoint, attributes: KeyValue, transaction_checker: Checker | None = None
    ) -> None:
        self._ap = access_point
        self._attributes = attributes
        self.config = ProducerConfig.from_attributes(attributes)
        self._checker = transaction_checker
        self._interceptors = ClientPluginManager(load_entry_points=False)
        self._hooks = Hooks(access_point.plugin_manager, self._interceptors)
        self._fault = LatencyFaultTolerance(self.config.send_latency_fault_enable)
        self._counters: dict[str, Iterator[int]] = {}  # loop-only: round-robin position per topic
        self._lock = threading.Lock()
        self._core: ClientCore | None = None
        self._callbacks: concurrent.futures.ThreadPoolExecutor | None = None
        self._closed = False
        self._inflight: set[concurrent.futures.Future[Any]] = set()
        self._inflight_lock = threading.Lock()
        self._born_host = local_host(access_point.url.endpoints[0])

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def attributes(self) -> KeyValue:
        return self._attributes

    @property
    def client_id(self) -> str | None:
        return self._core.client_id if self._core is not None else None

    @property
    def is_running(self) -> bool:
        return self._core is not None and not self._closed

    def startup(self) -> Producer:
        """Start (idempotent): the access point's loop, routes, heartbeats and Telemetry on first use."""
        with self._lock:
            if self._closed:
                raise OMSIllegalStateException("the producer was shut down; create a new one")
            if self._core is not None:
                return self
            runtime = self._ap._start_for(self)
            core = ClientCore(
                runtime,
                definition_pb2.ClientType.PRODUCER,
                self._settings,
                self._on_command,
                self.config.timeout_s,
            )
            runtime.loop.run(core.start(), START_TIMEOUT_S)
            self._callbacks = concurrent.futures.ThreadPoolExecutor(
                max_workers=self.config.callback_threads, thread_name_prefix=f"oms-producer-{id(self):x}"
            )
            self._core = core
        return self

    def shutdown(self) -> None:
        """Stop (idempotent): waits briefly for async sends, says goodbye to brokers, stops callback threads."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            core, callbacks = self._core, self._callbacks
        self._ap._forget(self)
        if core is None:
            return
        with self._inflight_lock:
            inflight = list(self._inflight)
        if inflight:
            concurrent.futures.wait(inflight, timeout=min(self.config.timeout_s, SHUTDOWN_GRACE_S))
        loop = core.runtime.loop
        if loop.running and not loop.in_loop():
            try:
                loop.run(core.shutdown(), START_TIMEOUT_S)
            except Exception as exc:  # the loop stops with the access point anyway; say what was skipped
                log.warning("producer %s did not shut down cleanly: %r", core.client_id, exc)
        if callbacks is not None:
            # from one of its own threads (a listener shutting down the producer) it cannot wait for itself
            own = threading.current_thread().name.startswith(f"oms-producer-{id(self):x}")
            callbacks.shutdown(wait=not own)

    def __enter__(self) -> Producer:
        return self.startup()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    def _running_core(self) -> ClientCore:
        core = self._core
        if core is None or self._closed:
            state = "shut down" if self._closed else "not started (call startup() or use it in a with block)"
            raise OMSIllegalStateException(f"the producer is {state}")
        return core

    # -- interceptors -------------------------------------------------------------------------------------------

    def add_interceptor(self, interceptor: object) -> Producer:
        """Register an object implementing ``oms.hookspecs`` hooks (``oms_before_send``, ``oms_after_send``)."""
        self._interceptors.register(interceptor)
        return self

    def remove_interceptor(self, interceptor: object) -> Producer:
        self._interceptors.unregister(interceptor)
        return self

    # -- messages -----------------------------------------------------------------------------------------------

    def create_bytes_message(self, destination: str, body: bytes | str) -> BytesMessage:
        return BytesMessage(body, destination)

    def _wire(self, message: BytesMessage, message_id: str, transactional: bool = False) -> WireMessage:
        return to_wire(
            message,
            namespace=self._ap.namespace,
            born_host=self._born_host,
            max_message_size=self.config.max_message_size,
            compress_over=self.config.compress_msg_body_over_howmuch,
            transactional=transactional,
            message_id=message_id,
        )

    def _prepare(self, message: BytesMessage, transactional: bool = False) -> WireMessage:
        """Give the message its id, run ``oms_before_send`` (it may add headers), then validate and convert.

        From here on every outcome reaches ``oms_after_send``: a refused message too.
        """
        if not isinstance(message, BytesMessage):
            raise TypeError(f"expected an oms.BytesMessage, got {type(message).__name__}")
        message_id = new_message_id()
        message.sys_headers()[BuiltinKeys.MESSAGE_ID] = message_id
        self._hooks.before_send(message)
        try:
            return self._wire(message, message_id, transactional)
        except OMSException as exc:
            self._hooks.after_send(message, None, exc)
            raise

    def _timeout(self, attributes: Mapping[str, Any] | None, timeout: float | None) -> float:
        if timeout is not None:
            if timeout <= 0:
                raise ValueError(f"timeout must be positive, got {timeout}")
            return float(timeout)
        if attributes:
            ms = KeyValue(attributes).get_int(OMSBuiltinKeys.TIMEOUT, 0)
            if ms > 0:
                return ms / 1000
        return self.config.timeout_s

    # -- running on the loop ------------------------------------------------------------------------------------

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        core = self._running_core()
        try:
            return core.runtime.loop.run(coro, timeout_s + RUN_GUARD_S)
        except OMSException:
            raise
        except TimeoutError:
            raise OMSTimeOutException(Code.REQUEST_TIMEOUT, f"no answer within {timeout_s:.3f}s") from None
        except concurrent.futures.CancelledError:
            raise OMSIllegalStateException("the producer was shut down during the call") from None

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        core = self._running_core()
        inner = core.runtime.loop.submit(coro)
        with self._inflight_lock:
            self._inflight.add(inner)
        inner.add_done_callback(self._forget_inflight)
        return inner

    def _forget_inflight(self, inner: concurrent.futures.Future[Any]) -> None:
        with self._inflight_lock:
            self._inflight.discard(inner)

    def _dispatch(self, fn: Callable[..., object], *args: Any, inline_ok: bool = True) -> None:
        """Run user-facing work (hooks, listeners, checkers) on a callback thread, never on the loop."""
        callbacks = self._callbacks
        try:
            if callbacks is None:
                raise RuntimeError("no callback threads")
            callbacks.submit(fn, *args)
        except RuntimeError:  # shutting down: finish the work here so no future is left pending
            if inline_ok:
                fn(*args)
            else:
                log.info("dropped %s during shutdown", getattr(fn, "__name__", fn))

    # -- queue choice -------------------------------------------------------------------------------------------

    def _select(self, topic: str, candidates: Sequence[RouteQueue], last_broker: str | None) -> RouteQueue:
        """Round robin over ``candidates``, avoiding the broker that just failed and (if enabled) slow ones."""
        counter = self._counters.get(topic)
        if counter is None:
            counter = self._counters[topic] = itertools.count(random.randrange(1 << 16))
        start = next(counter)
        n = len(candidates)
        brokers = {q.broker_name for q in candidates}
        avoid = last_broker if len(brokers) > 1 else None
        ordered = [candidates[(start + i) % n] for i in range(n)]
        if self._fault.enabled:
            for q in ordered:
                if q.broker_name != avoid and self._fault.is_available(q.broker_name):
                    return q
            best = self._fault.least_bad(sorted(brokers - {avoid} if avoid else brokers))
            for q in ordered:
                if q.broker_name == best:
                    return q
        for q in ordered:
            if q.broker_name != avoid:
                return q
        return ordered[0]

    def _pin(self, wire: WireMessage, selector: QueueSelector, arg: Any, timeout_s: float) -> RouteQueue:
        """Let ``selector`` choose among the writable queues, and make the broker store the message there."""
        self._check_pinnable(wire)
        core = self._running_core()
        return self._pin_on(wire, selector, arg, self._run(core.routes.get(wire.topic), timeout_s))

    @staticmethod
    def _check_pinnable(wire: WireMessage) -> None:
        if wire.message_type not in (definition_pb2.NORMAL, definition_pb2.FIFO):
            raise OMSMessageFormatException(
                Code.BAD_REQUEST, "a selector cannot be combined with a delay or a transaction"
            )

    def _pin_on(self, wire: WireMessage, selector: QueueSelector, arg: Any, route: TopicRoute) -> RouteQueue:
        """``_pin`` once the route is known (the asyncio producer awaits the route instead of blocking)."""
        writable = route.writable()
        if not writable:
            raise OMSRuntimeException(Code.FORBIDDEN, f"topic {wire.topic!r} has no writable queue")
        chosen = selector([q.queue for q in writable], wire.source, arg)
        by_queue = {q.queue: q for q in writable}
        target = by_queue.get(chosen) if isinstance(chosen, MessageQueue) else None
        if target is None:
            raise OMSRuntimeException(Code.BAD_REQUEST, f"the selector returned {chosen!r}, not one of the queues")
        if not target.accepts(definition_pb2.FIFO):
            raise OMSMessageFormatException(
                Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                f"ordered sends to topic {wire.topic!r} need a FIFO or MIXED topic: the broker places messages by "
                "message group (it ignores queue ids), and this topic does not accept FIFO messages",
            )
        sp = wire.pb.system_properties
        sp.queue_id = target.queue.queue_id
        # a message group the broker hashes onto exactly this queue; the message's own sharding key gives way
        sp.message_group = group_for_queue(target.queue.queue_id, len(route.writable_on(target.broker_name)))
        sp.message_type = definition_pb2.FIFO
        wire.message_type = definition_pb2.FIFO
        return target

    # -- the send itself (on the loop) --------------------------------------------------------------------------

    async def _send_wire(
        self, wires: Sequence[WireMessage], deadline: float, pinned: RouteQueue | None, attempts: int
    ) -> tuple[list[SendResult], RouteQueue]:
        # The caller checked that the producer runs; shutdown() waits for sends already submitted (one-way ones
        # included), so a send that starts after shutdown began must still go out rather than fail.
        core = self._core
        if core is None:
            raise OMSIllegalStateException("the producer is not started")
        topic = wires[0].topic
        route = await core.routes.get(topic)
        if pinned is not None:
            candidates: tuple[RouteQueue, ...] = (pinned,)
        else:
            writable = route.writable()
            if not writable:
                raise OMSRuntimeException(Code.FORBIDDEN, f"topic {topic!r} has no writable queue")
            types = {w.message_type for w in wires}
            candidates = tuple(q for q in writable if all(q.accepts(t) for t in types))
            if not candidates:
                names = ", ".join(sorted(definition_pb2.MessageType.Name(t) for t in types))
                accepted = ", ".join(
                    sorted({definition_pb2.MessageType.Name(t) for q in writable for t in q.accept_types})
                )
                raise OMSMessageFormatException(
                    Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                    f"topic {topic!r} accepts {accepted} messages, not {names}",
                )
        request = service_pb2.SendMessageRequest(messages=[w.pb for w in wires])
        last_error: OMSException | None = None
        last_broker: str | None = None
        for attempt in range(1, attempts + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            queue = pinned or self._select(topic, candidates, last_broker)
            started = time.monotonic()
            try:
                response = await core.rpc.call(queue.endpoint, "SendMessage", request, remaining, check=False)
                results = self._results(response, wires, queue, pinned is not None)
            except OMSException as exc:
                retryable = _retryable(exc)
                self._fault.update(queue.broker_name, (time.monotonic() - started) * 1000, isolation=retryable)
                last_error, last_broker = exc, queue.broker_name
                if not retryable:
                    raise
                core.refresh_route_soon(topic)
                log.info(
                    "send to %s on %s failed (attempt %d/%d): %s", topic, queue.broker_name, attempt, attempts, exc
                )
                continue
            self._fault.update(queue.broker_name, (time.monotonic() - started) * 1000, isolation=False)
            return results, queue
        if last_error is not None:
            raise last_error
        raise OMSTimeOutException(Code.REQUEST_TIMEOUT, f"send to topic {topic!r}: the deadline passed before sending")

    @staticmethod
    def _results(
        response: service_pb2.SendMessageResponse, wires: Sequence[WireMessage], queue: RouteQueue, pinned: bool
    ) -> list[SendResult]:
        where = f"SendMessage to {queue.broker_name}"
        top = int(response.status.code)
        if top == 0:
            raise OMSRuntimeException(Code.INTERNAL_ERROR, f"{where}: the response carries no status")
        if top not in SUCCESS_CODES and top not in STATUS_OF_CODE:
            raise exception_for(top, f"{where}: {response.status.message}")
        if len(response.entries) != len(wires):
            raise OMSRuntimeException(
                Code.INTERNAL_ERROR, f"{where}: {len(response.entries)} results for {len(wires)} messages"
            )
        results = []
        for entry, wire in zip(response.entries, wires, strict=True):
            code = int(entry.status.code) if entry.HasField("status") else top
            status = STATUS_OF_CODE.get(code)
            if status is None:
                raise exception_for(code, f"{where}: message {wire.message_id}: {entry.status.message}")
            queue_id = int(wire.pb.system_properties.queue_id) if pinned else ANY_QUEUE
            results.append(
                SendResult(
                    message_id=entry.message_id or wire.message_id,
                    topic=wire.topic,
                    queue=MessageQueue(wire.topic, queue.broker_name, queue_id),
                    queue_offset=int(entry.offset),
                    status=status,
                    transaction_id=entry.transaction_id or None,
                    recall_handle=entry.recall_handle or None,
                )
            )
        return results

    def _attempts(self) -> int:
        return 1 + self.config.retry_times_when_send_failed

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
        if executor is None and attributes is not None and _is_executor(attributes):
            executor, attributes = attributes, transaction_attributes  # type: ignore[assignment]
        attrs: Mapping[str, Any] | None = attributes  # type: ignore[assignment]
        if executor is not None:
            if selector is not None:
                raise OMSMessageFormatException(Code.BAD_REQUEST, "a transactional send cannot use a selector")
            return self._send_transactional(message, executor, attrs, timeout)
        self._running_core()
        timeout_s = self._timeout(attrs, timeout)
        wire = self._prepare(message)
        try:
            pinned = self._pin(wire, selector, arg, timeout_s) if selector is not None else None
            results, _ = self._run(
                self._send_wire([wire], time.monotonic() + timeout_s, pinned, self._attempts()), timeout_s
            )
        except OMSException as exc:
            self._hooks.after_send(message, None, exc)
            raise
        self._hooks.after_send(message, results[0], None)
        return results[0]

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
        self._running_core()
        timeout_s = self._timeout(attributes, timeout)
        wire = self._prepare(message)
        try:
            pinned = self._pin(wire, selector, arg, timeout_s) if selector is not None else None
            inner = self._submit(self._send_wire([wire], time.monotonic() + timeout_s, pinned, self._attempts()))
        except OMSException as exc:
            self._hooks.after_send(message, None, exc)
            raise
        future: Future[SendResult] = Future()
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
            self._running_core()
            timeout_s = self._timeout(attributes, None)
            wire = self._prepare(message)
            inner = self._submit(self._send_wire([wire], time.monotonic() + timeout_s, None, 1))
        except Exception as exc:
            log.warning("oneway send of %r not sent: %s", message, exc)
            return
        inner.add_done_callback(lambda done: self._dispatch(self._complete_oneway, message, done))

    def _complete_oneway(
        self, message: BytesMessage, inner: concurrent.futures.Future[tuple[list[SendResult], RouteQueue]]
    ) -> None:
        try:
            result = inner.result()[0][0]
        except concurrent.futures.CancelledError:
            log.warning("oneway send of message %s cancelled by shutdown", message.message_id)
            return
        except Exception as exc:
            log.warning("oneway send of message %s failed: %s", message.message_id, exc)
            self._hooks.after_send(message, None, exc)
            return
        self._hooks.after_send(message, result, None)

    def send_batch(
        self,
        messages: Iterable[BytesMessage],
        attributes: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
    ) -> list[SendResult]:
        """Send many messages in as few requests as possible: split per topic and at 4 MiB of bodies.

        Results come back in input order. If a request fails, its exception is raised; requests sent before it
        stay stored (their ``oms_after_send`` hooks saw their results). ``timeout`` applies per request.
        """
        self._running_core()
        batch = list(messages)
        if not batch:
            return []
        timeout_s = self._timeout(attributes, timeout)
        results: list[SendResult | None] = [None] * len(batch)
        wires: list[WireMessage] = []
        try:
            for m in batch:
                wires.append(self._prepare(m))  # a refused member stops the batch before anything is sent
        except OMSException as exc:
            for m in batch[: len(wires)]:  # already seen by oms_before_send: they will not be sent
                self._hooks.after_send(m, None, exc)
            raise
        chunks = split_batches(wires, MAX_BATCH_SIZE, MAX_SEND_BATCH_MESSAGES)
        try:
            for chunk in chunks:
                sent, _ = self._run(
                    self._send_wire([wires[i] for i in chunk], time.monotonic() + timeout_s, None, self._attempts()),
                    timeout_s,
                )
                for i, result in zip(chunk, sent, strict=True):
                    results[i] = result
                    self._hooks.after_send(batch[i], result, None)
        except OMSException as exc:
            for i, m in enumerate(batch):
                if results[i] is None:
                    self._hooks.after_send(m, None, exc)
            raise
        return [r for r in results if r is not None]

    # -- transactions -------------------------------------------------------------------------------------------

    def prepare(
        self, message: BytesMessage, attributes: Mapping[str, Any] | None = None, *, timeout: float | None = None
    ) -> TransactionalResult:
        """Send ``message`` as a half (invisible) message; commit or roll back the returned transaction.

        ``with producer.prepare(msg) as txn:`` commits when the block succeeds and rolls back on an exception.
        """
        self._running_core()
        timeout_s = self._timeout(attributes, timeout)
        wire = self._prepare(message, transactional=True)
        try:
            results, queue = self._run(
                self._send_wire([wire], time.monotonic() + timeout_s, None, self._attempts()), timeout_s
            )
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
        execute = executor_fn(executor)
        txn = self.prepare(message, attributes, timeout=timeout)
        context = TransactionContext(message, txn.transaction_id)
        resolution = decide(execute, message, context, "local transaction")
        if resolution is not TransactionResolution.UNKNOWN:
            try:
                if resolution is TransactionResolution.COMMIT:
                    txn.commit()
                else:
                    txn.rollback()
            except OMSException as exc:  # RocketMQ's choice too: the broker's check-back settles it later
                log.warning("ending transaction %s failed, the broker will check back: %s", txn.transaction_id, exc)
        return dataclasses.replace(txn.send_result, transaction_resolution=resolution)

    def _end_transaction(
        self,
        topic: str,
        message_id: str,
        transaction_id: str,
        endpoint: Endpoint,
        resolution: TransactionResolution,
        from_check: bool,
    ) -> None:
        core = self._running_core()
        request = service_pb2.EndTransactionRequest(
            topic=core.resource(topic),
            message_id=message_id,
            transaction_id=transaction_id,
            resolution=(
                definition_pb2.COMMIT if resolution is TransactionResolution.COMMIT else definition_pb2.ROLLBACK
            ),
            source=definition_pb2.SOURCE_SERVER_CHECK if from_check else definition_pb2.SOURCE_CLIENT,
        )
        timeout_s = self.config.timeout_s
        self._run(core.rpc.call(endpoint, "EndTransaction", request, timeout_s), timeout_s)

    def _on_command(self, endpoint: Endpoint, command: service_pb2.TelemetryCommand) -> None:
        """Telemetry commands from a broker (on the loop): orphan checks go to a callback thread."""
        if command.HasField("recover_orphaned_transaction_command"):
            orphan = command.recover_orphaned_transaction_command
            message = from_wire(orphan.message)
            message.sys_headers()[BuiltinKeys.TRANSACTION_ID] = orphan.transaction_id
            self._dispatch(self._check_orphan, endpoint, message, orphan.transaction_id, inline_ok=False)
        else:
            log.debug("telemetry command %s from %s ignored", command.WhichOneof("command"), endpoint)

    def _check_orphan(self, endpoint: Endpoint, message: BytesMessage, transaction_id: str) -> None:
        if self._checker is None:
            log.warning(
                "broker %s asks about transaction %s but the producer has no transaction_checker",
                endpoint,
                transaction_id,
            )
            return
        context = TransactionContext(message, transaction_id)
        resolution = decide(checker_fn(self._checker), message, context, "transaction check")
        if resolution is TransactionResolution.UNKNOWN:
            return  # asked again later
        try:
            self._end_transaction(
                message.destination or "", message.message_id or "", transaction_id, endpoint, resolution, True
            )
        except OMSException as exc:
            log.warning("answering the check of transaction %s failed: %s", transaction_id, exc)

    # -- settings -----------------------------------------------------------------------------------------------

    def _settings(self, core: ClientCore) -> definition_pb2.Settings:
        timeout_ms = int(self.config.timeout_s * 1000)
        return definition_pb2.Settings(
            client_type=definition_pb2.ClientType.PRODUCER,
            access_point=core.runtime.access_point.to_pb(),
            request_timeout=duration_pb2.Duration(seconds=timeout_ms // 1000, nanos=(timeout_ms % 1000) * 1_000_000),
            publishing=definition_pb2.Publishing(
                topics=[core.resource(t) for t in core.topics],
                max_body_size=self.config.max_message_size,
                validate_message_type=True,
            ),
            user_agent=definition_pb2.UA(
                language=definition_pb2.Language.PYTHON,
                version=CLIENT_VERSION,
                platform=platform.platform(),
                hostname=self._born_host,
            ),
        )

    def aio(self) -> AsyncProducer:
        """The same producer for asyncio code: ``await p.send(...)``, ``send_batch``, ``send_oneway``;
        ``async with producer.aio() as p:`` starts and shuts it down without blocking the event loop."""
        from oms.producer.aio import AsyncProducer

        return AsyncProducer(self)

    def __repr__(self) -> str:
        return f"Producer(client_id={self.client_id!r}, running={self.is_running})"
