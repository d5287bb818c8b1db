"""One lifecycle for every client an access point creates: idempotent startup/shutdown, ``with``, state checks.

Producers, push and pull consumers and the resource manager differ only in what they open and close.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import platform
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from rocketmq.grpc_protocol import definition_pb2

from oms.client.core import ClientCore, Runtime
from oms.client.loop import LoopThread
from oms.client.metrics import ClientMetrics
from oms.context import ClientContext
from oms.errors import OMSException, OMSIllegalStateException, OMSTimeOutException
from oms.keyvalue import KeyValue
from oms.plugins import ClientPluginManager, Hooks
from oms.version import CLIENT_VERSION
from orbitmq.errors import Code

T = TypeVar("T")
log = logging.getLogger("oms")

RUN_GUARD_S = 2.0  # extra wait on the loop beyond an RPC's own deadline, for the answer to travel back


class HasRuntime(Protocol):
    """What a client opens on start: a loop-bound core holding the access point's runtime."""

    @property
    def runtime(self) -> Runtime: ...


CoreT = TypeVar("CoreT", bound=HasRuntime)


class ClientLifecycle(Generic[CoreT]):
    """Start opens a core (``_open``) once; shutdown closes it (``_close``) once; ``with`` does both.

    A start that fails shuts the client down (a half-started client is never left running); a shut down client
    cannot start again. Subclasses name themselves in ``KIND`` for the errors users read.
    """

    KIND: ClassVar[str] = "client"
    RENEW_HINT: ClassVar[str] = "create a new one"

    def __init__(self, context: ClientContext) -> None:
        self._context = context
        self._lock = threading.Lock()
        self._core: CoreT | None = None
        self._closed = False

    @property
    def is_running(self) -> bool:
        return self._core is not None and not self._closed

    def startup(self) -> Self:
        """Start (idempotent): the access point's loop first, then this client's own work."""
        with self._lock:
            if self._closed:
                raise OMSIllegalStateException(f"the {self.KIND} was shut down; {self.RENEW_HINT}")
            if self._core is not None:
                return self
            runtime = self._context.start_client(self)
            try:
                self._core = self._open(runtime)
            except BaseException:
                self._closed = True
                self._context.forget_client(self)
                raise
        return self

    def shutdown(self) -> None:
        """Stop (idempotent); the access point and its other clients keep running."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            core = self._core
        self._context.forget_client(self)
        if core is not None:
            self._close(core)

    def _open(self, runtime: Runtime) -> CoreT:
        """Subclass: build and start the core (under the lock); clean up what it started before raising."""
        raise NotImplementedError

    def _close(self, core: CoreT) -> None:
        """Subclass: stop what ``_open`` started (off the loop, once)."""

    def __enter__(self) -> Self:
        return self.startup()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    def _running_core(self) -> CoreT:
        core = self._core
        if core is None or self._closed:
            state = "shut down" if self._closed else "not started (call startup() or use it in a with block)"
            raise OMSIllegalStateException(f"the {self.KIND} is {state}")
        return core

    def _wait(self, core: CoreT, coro: Coroutine[Any, Any, T], wait_s: float, timeout_message: str) -> T:
        try:
            return core.runtime.loop.run(coro, wait_s)
        except OMSException:
            raise
        except TimeoutError:
            raise OMSTimeOutException(Code.REQUEST_TIMEOUT, timeout_message) from None
        except concurrent.futures.CancelledError:
            raise OMSIllegalStateException(f"the {self.KIND} was shut down during the call") from None

    def _submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop without waiting (closed, never started, when the client does not run)."""
        try:
            core = self._running_core()
        except OMSException:
            coro.close()
            raise
        return core.runtime.loop.submit(coro)

    def loop_thread(self) -> LoopThread:
        """The access point's loop thread this client's calls run on (shared by every client of the access point).

        A coroutine started there (``loop_thread().submit(coro)``) awaits the ``aio()`` calls of these clients
        inline, without the two thread hand-overs per call an other event loop pays. It must never block (no sync
        client call: they raise there); ``call_soon`` wakes it from other threads. What it starts there is its own
        to stop: the loop cancels what is left only when the access point shuts down, and a client's shutdown does
        not wait for calls made from the loop itself."""
        return self._running_core().runtime.loop

    async def _await_on_loop(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """``coro`` run on the loop and awaited from the caller's event loop (the asyncio faces), so nothing blocks
        it; as in ``_run``, the last resort is ``RUN_GUARD_S`` beyond the call's own deadline, then a cancel.

        Awaited from the loop itself (a coroutine started through ``loop_thread()``), ``coro`` runs inline: no
        hand-over to the loop and back (a self-pipe write and a thread wake-up each way), and a cancel of the caller
        is a cancel of the call, as for any coroutine."""
        try:
            loop = self._running_core().runtime.loop
        except OMSException:
            coro.close()
            raise
        if loop.in_loop():
            try:
                async with asyncio.timeout(timeout_s + RUN_GUARD_S):
                    return await coro
            except TimeoutError:
                raise OMSTimeOutException(Code.REQUEST_TIMEOUT, f"no answer within {timeout_s:.3f}s") from None
        inner = self._submit(coro)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(inner), timeout_s + RUN_GUARD_S)
        except TimeoutError:
            inner.cancel()
            raise OMSTimeOutException(Code.REQUEST_TIMEOUT, f"no answer within {timeout_s:.3f}s") from None
        except concurrent.futures.CancelledError:
            raise OMSIllegalStateException(f"the {self.KIND} was shut down during the call") from None

    def _stop_step(
        self, core: CoreT, step: Callable[[], Coroutine[Any, Any, Any]], timeout_s: float, what: str
    ) -> None:
        """Run one stopping step on the loop if it still runs; a failure is logged and shutting down goes on
        (the loop stops with the access point anyway)."""
        loop = core.runtime.loop
        if loop.running and not loop.in_loop():
            try:
                loop.run(step(), timeout_s)
            except Exception as exc:
                log.warning("%s %r: %s did not finish cleanly: %r", self.KIND, self, what, exc)


class MessagingClient(ClientLifecycle[ClientCore]):
    """A client speaking v2 through a ``ClientCore`` (producers, consumers): attributes, interceptors, user agent.

    The counterpart of the RocketMQ 5 clients' ``ClientImpl``.
    """

    def __init__(self, context: ClientContext, attributes: KeyValue) -> None:
        super().__init__(context)
        self._attributes = attributes
        self._interceptors = ClientPluginManager(load_entry_points=False)
        self._hooks = Hooks(context.plugin_manager, self._interceptors)
        self._born_host = context.born_host()

    def attributes(self) -> KeyValue:
        return self._attributes

    @property
    def client_id(self) -> str | None:
        return self._core.client_id if self._core is not None else None

    @property
    def metrics(self) -> ClientMetrics | None:
        """This client's own metrics (``rocketmq_send_cost_time``, ``rocketmq_process_time``, ...): ``families()``,
        or ``histogram(name, **labels)``; None before the first startup."""
        return self._core.metrics if self._core is not None else None

    def add_interceptor(self, interceptor: object) -> Self:
        """Register an object implementing ``oms.hookspecs`` hooks (``oms_before_send``/``oms_after_send`` for a
        producer, ``oms_before_consume``/``oms_after_consume`` for a consumer)."""
        self._interceptors.register(interceptor)
        return self

    def remove_interceptor(self, interceptor: object) -> Self:
        self._interceptors.unregister(interceptor)
        return self

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """Run ``coro`` on the loop and wait for it (its own deadlines end it first; this is the last resort)."""
        try:
            core = self._running_core()
        except OMSException:
            coro.close()
            raise
        return self._wait(core, coro, timeout_s + RUN_GUARD_S, f"no answer within {timeout_s:.3f}s")

    def _user_agent(self) -> definition_pb2.UA:
        return definition_pb2.UA(
            language=definition_pb2.Language.PYTHON,
            version=CLIENT_VERSION,
            platform=platform.platform(),
            hostname=self._born_host,
        )


def callback_pool(owner: object, kind: str, workers: int) -> concurrent.futures.ThreadPoolExecutor:
    """Threads for user code (listeners, hooks, checkers): never run on the loop."""
    return concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix=_pool_prefix(owner, kind))


def stop_callback_pool(
    pool: concurrent.futures.ThreadPoolExecutor, owner: object, kind: str, *, cancel_futures: bool = False
) -> None:
    # from one of its own threads (a listener shutting its client down) the pool cannot wait for itself
    own = threading.current_thread().name.startswith(_pool_prefix(owner, kind))
    pool.shutdown(wait=not own, cancel_futures=cancel_futures)


def _pool_prefix(owner: object, kind: str) -> str:
    return f"oms-{kind}-{id(owner):x}"
