"""What the blocking ``Producer`` and its asyncio face share: config, start/stop, message preparation, the sender.

Sends run on the access point's loop; user code (hooks, async listeners, transaction checks) on callback threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf import duration_pb2
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from oms.client.core import ClientCore, Runtime
from oms.client.endpoints import Endpoint
from oms.client.identity import new_message_id
from oms.client.routes import RouteQueue
from oms.context import ClientContext
from oms.convert import WireMessage, to_wire
from oms.errors import OMSException
from oms.keys import BuiltinKeys, NonStandardKeys, OMSBuiltinKeys
from oms.keyvalue import KeyValue
from oms.lifecycle import MessagingClient, callback_pool, stop_callback_pool
from oms.message import BytesMessage
from oms.producer.coalesce import Coalesced, SendCoalescer
from oms.producer.columns import plain_message_runs
from oms.producer.plain_run import PlainRun, in_input_order
from oms.producer.result import SendResult, TransactionResolution
from oms.producer.sender import Sender
from oms.producer.transaction import Checker, answer_check, end_transaction_request, orphan_of
from orbitmq.limits import DEFAULT_OPERATION_TIMEOUT_MS, MAX_MESSAGE_BODY_SIZE

T = TypeVar("T")
log = logging.getLogger("oms.producer")

DEFAULT_RETRIES = 2  # RocketMQ retryTimesWhenSendFailed
DEFAULT_COMPRESS_OVER = 4096  # RocketMQ compressMsgBodyOverHowmuch
DEFAULT_CALLBACK_THREADS = 4
SHUTDOWN_GRACE_S = 3.0  # how long shutdown waits for in-flight async sends
START_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class LoopWaiter:
    """The token of an asyncio face's batched send: its message, and the future its caller awaits on ``loop``."""

    message: BytesMessage
    future: asyncio.Future[SendResult]
    loop: asyncio.AbstractEventLoop


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


class ProducerBase(MessagingClient):
    """Start/stop, message preparation and hooks, loop and callback-thread plumbing; ``Producer`` adds the sends."""

    KIND = "producer"

    def __init__(
        self, context: ClientContext, attributes: KeyValue, transaction_checker: Checker | None = None
    ) -> None:
        self.config = ProducerConfig.from_attributes(attributes)
        super().__init__(context, attributes)
        self._namespace = context.namespace
        self._checker = transaction_checker
        self._sender = Sender(self.config.retry_times_when_send_failed, self.config.send_latency_fault_enable)
        self._coalescer = SendCoalescer(self._sender, self._coalesced_done)  # send_async's natural batching
        self._callbacks: concurrent.futures.ThreadPoolExecutor | None = None
        self._inflight: set[concurrent.futures.Future[Any]] = set()
        self._inflight_lock = threading.Lock()
        self._coalesced_pending = 0  # batched send_async messages not completed yet (shutdown waits for them)
        self._coalesced_idle = threading.Condition(self._inflight_lock)

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def _open(self, runtime: Runtime) -> ClientCore:
        """The access point's loop, then routes, heartbeats and Telemetry on first use."""
        core = ClientCore(
            runtime, definition_pb2.ClientType.PRODUCER, self._settings, self._on_command, self.config.timeout_s
        )
        runtime.loop.run(core.start(), START_TIMEOUT_S)
        self._callbacks = callback_pool(self, "producer", self.config.callback_threads)
        return core

    def _close(self, core: ClientCore) -> None:
        """Waits briefly for async sends, says goodbye to brokers, stops callback threads."""
        grace = min(self.config.timeout_s, SHUTDOWN_GRACE_S)
        deadline = time.monotonic() + grace
        with self._inflight_lock:
            inflight = list(self._inflight)
            self._coalesced_idle.wait_for(lambda: not self._coalesced_pending, grace)
        if inflight:
            concurrent.futures.wait(inflight, timeout=max(0.0, deadline - time.monotonic()))
        self._stop_step(core, core.shutdown, START_TIMEOUT_S, "goodbye to brokers")
        if self._callbacks is not None:
            stop_callback_pool(self._callbacks, self, "producer")

    # -- messages -----------------------------------------------------------------------------------------------

    def _plain_runs(self, batch: list[BytesMessage]) -> list[PlainRun] | None:
        """Plain messages, with no hook watching sends, checked and encoded together (``plain_message_runs``:
        the same checks and ids as ``_prepare``, a fraction of the per-message work); None for other batches."""
        if self._namespace or self._hooks.observes_sends():
            return None
        return plain_message_runs(
            batch,
            born_host=self._born_host,
            max_message_size=self.config.max_message_size,
            compress_over=self.config.compress_msg_body_over_howmuch,
        )

    def _prepare_batch(self, batch: list[BytesMessage], runs: list[PlainRun] | None) -> list[WireMessage]:
        """``_prepare`` for every message of a batch, in input order (the rows of ``runs`` if it was plain); a
        refused one stops the batch before anything is sent."""
        if runs is not None:
            return in_input_order(runs, [list(run) for run in runs], len(batch))
        wires: list[WireMessage] = []
        try:
            for m in batch:
                wires.append(self._prepare(m))
        except OMSException as exc:
            for m in batch[: len(wires)]:  # already seen by oms_before_send: they will not be sent
                self._hooks.after_send(m, None, exc)
            raise
        return wires

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
            return to_wire(
                message,
                namespace=self._namespace,
                born_host=self._born_host,
                max_message_size=self.config.max_message_size,
                compress_over=self.config.compress_msg_body_over_howmuch,
                transactional=transactional,
                message_id=message_id,
            )
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

    # -- the loop and the callback threads ----------------------------------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop without waiting; shutdown waits (a little) for what is in flight."""
        inner = super()._submit(coro)
        with self._inflight_lock:
            self._inflight.add(inner)
        inner.add_done_callback(self._forget_inflight)
        return inner

    def _coalesced_started(self) -> None:
        with self._inflight_lock:
            self._coalesced_pending += 1

    def _coalesced_done(
        self, items: Sequence[Coalesced], results: Sequence[SendResult] | None, error: BaseException | None
    ) -> None:
        """On the loop, once per request of batched sends: the blocking face's hooks and futures on a callback
        thread, the asyncio face's on each caller's loop (one wake-up per loop and request)."""
        on_loops: dict[asyncio.AbstractEventLoop, list[int]] = {}
        on_threads: list[int] = []
        for i, item in enumerate(items):
            if isinstance(item.token, LoopWaiter):
                on_loops.setdefault(item.token.loop, []).append(i)
            else:
                on_threads.append(i)
        if not on_loops:  # the usual request: all from the blocking face
            self._dispatch(self._finish_coalesced, items, results, error)
            return

        def rows_of(rows: list[int]) -> tuple[list[Coalesced], list[SendResult] | None]:
            return [items[i] for i in rows], [results[i] for i in rows] if results is not None else None

        if on_threads:
            self._dispatch(self._finish_coalesced, *rows_of(on_threads), error)
        for loop, rows in on_loops.items():
            # The sends are over once answered: what is left runs on a loop the producer does not own, which may
            # close before it runs a callback handed to it, so shutdown does not wait for it.
            self._coalesced_finished(len(rows))
            try:
                loop.call_soon_threadsafe(self._finish_on_loop, *rows_of(rows), error)
            except RuntimeError:  # the caller's loop is closed: nobody awaits these any more
                log.info("%d sends completed after their event loop closed", len(rows))

    def _finish_coalesced(
        self, items: Sequence[Coalesced], results: Sequence[SendResult] | None, error: BaseException | None
    ) -> None:
        try:
            for i, item in enumerate(items):
                message, future = item.token
                result = results[i] if results is not None else None
                self._hooks.after_send(message, result, error)
                if not future.set_running_or_notify_cancel():
                    continue  # the caller cancelled the future: nobody waits for the outcome
                if error is not None:
                    future.set_exception(error)
                else:
                    future.set_result(result)
        finally:
            self._coalesced_finished(len(items))

    def _finish_on_loop(
        self, items: Sequence[Coalesced], results: Sequence[SendResult] | None, error: BaseException | None
    ) -> None:
        """``_finish_coalesced`` for the asyncio face, on its caller's loop (where its hooks run)."""
        for i, item in enumerate(items):
            waiter: LoopWaiter = item.token
            result = results[i] if results is not None else None
            self._hooks.after_send(waiter.message, result, error)
            if waiter.future.done():
                continue  # the caller was cancelled: nobody waits for the outcome
            if error is not None:
                waiter.future.set_exception(error)
            else:
                assert result is not None  # no error: the request's results, one per message
                waiter.future.set_result(result)

    def _coalesced_finished(self, n: int) -> None:
        with self._inflight_lock:
            self._coalesced_pending -= n
            if not self._coalesced_pending:
                self._coalesced_idle.notify_all()

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

    # -- transactions: ending them, and the broker's check-back -------------------------------------------------

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
        request = end_transaction_request(core, topic, message_id, transaction_id, resolution, from_check)
        timeout_s = self.config.timeout_s
        self._run(core.rpc.call(endpoint, "EndTransaction", request, timeout_s), timeout_s)

    def _on_command(self, endpoint: Endpoint, command: service_pb2.TelemetryCommand) -> None:
        """Telemetry commands from a broker (on the loop): orphan checks go to a callback thread."""
        orphan = orphan_of(command)
        if orphan is None:
            log.debug("telemetry command %s from %s ignored", command.WhichOneof("command"), endpoint)
            return
        message, transaction_id = orphan
        self._dispatch(answer_check, self._checker, self, endpoint, message, transaction_id, inline_ok=False)

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
            user_agent=self._user_agent(),
        )
