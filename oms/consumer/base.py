"""What push and pull consumers share: lifecycle around a ``ClientCore``, Settings with the subscriptions, hooks.

The grpc.aio work runs on the access point's loop thread; sync methods submit to it and wait (bounded).
"""

from __future__ import annotations

import concurrent.futures
import logging
import platform
import threading
from collections.abc import Coroutine
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from rocketmq.grpc_protocol import definition_pb2, service_pb2

from oms.client.core import ClientCore
from oms.client.endpoints import Endpoint
from oms.client.identity import local_host
from oms.consumer.calls import ConsumerCalls, QueueRef, duration_ms
from oms.consumer.config import ConsumerConfig
from oms.consumer.selector import MessageSelector
from oms.errors import OMSException, OMSIllegalStateException, OMSResourceNotExistException, OMSTimeOutException
from oms.keyvalue import KeyValue
from oms.plugins import ClientPluginManager, Hooks
from oms.queue import MessageQueue
from oms.version import CLIENT_VERSION
from orbitmq.errors import Code

if TYPE_CHECKING:
    from oms.access_point import MessagingAccessPoint

T = TypeVar("T")
log = logging.getLogger("oms.consumer")

START_TIMEOUT_S = 15.0
RUN_GUARD_S = 2.0  # extra wait on the loop beyond an RPC's own deadline, for the answer to travel back


class ConsumerBase:
    """Lifecycle and plumbing; subclasses set ``CLIENT_TYPE`` and implement ``_started``/``_stopping``."""

    CLIENT_TYPE: int = definition_pb2.ClientType.PUSH_CONSUMER
    KIND = "consumer"

    def __init__(self, access_point: MessagingAccessPoint, attributes: KeyValue) -> None:
        self._ap = access_point
        self._attributes = attributes
        self.config = ConsumerConfig.from_attributes(attributes)
        self._interceptors = ClientPluginManager(load_entry_points=False)
        self._hooks = Hooks(access_point.plugin_manager, self._interceptors)
        self._lock = threading.Lock()
        self._core: ClientCore | None = None
        self._calls: ConsumerCalls | None = None
        self._closed = False
        self._selectors: dict[str, MessageSelector] = {}  # topic -> subscription, as Settings tell the broker
        self._host = local_host(access_point.url.endpoints[0])

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def attributes(self) -> KeyValue:
        return self._attributes

    @property
    def group(self) -> str:
        return self.config.group

    @property
    def client_id(self) -> str | None:
        return self._core.client_id if self._core is not None else None

    @property
    def is_running(self) -> bool:
        return self._core is not None and not self._closed

    def startup(self) -> Self:
        """Start (idempotent): routes of the attached topics, Telemetry, heartbeats, then the subclass's work."""
        with self._lock:
            if self._closed:
                raise OMSIllegalStateException(f"the {self.KIND} was shut down; create a new one")
            if self._core is not None:
                return self
            runtime = self._ap._start_for(self)
            core = ClientCore(
                runtime, self.CLIENT_TYPE, self._settings, self._on_command, self.config.timeout_s, self.config.group
            )
            self._calls = ConsumerCalls(core, self.config.group)
            try:
                runtime.loop.run(self._start_async(core), START_TIMEOUT_S + self.config.timeout_s)
            except BaseException:
                self._closed = True
                self._stop_core(core)
                self._after_stop()
                self._ap._forget(self)
                raise
            self._core = core
        return self

    async def _start_async(self, core: ClientCore) -> None:
        await core.start()
        for topic in list(self._selectors):
            await core.routes.get(topic)  # opens Telemetry to its brokers; an unknown topic fails the start
        await self._started(core)

    async def _started(self, core: ClientCore) -> None:
        """Subclass hook, on the loop, once routes of the attached topics are known."""

    async def _stopping(self) -> None:
        """Subclass hook, on the loop, before the core says goodbye (stop loops, settle, commit)."""

    def _stop_timeout(self) -> float:
        return START_TIMEOUT_S

    def shutdown(self) -> None:
        """Stop (idempotent): the subclass's loops and commits first, then goodbye to brokers."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            core = self._core
        self._ap._forget(self)
        if core is None:
            return
        loop = core.runtime.loop
        if loop.running and not loop.in_loop():
            try:
                loop.run(self._stopping(), self._stop_timeout())
            except Exception as exc:  # shutting down continues: the core and threads must still stop
                log.warning("%s %s did not stop cleanly: %r", self.KIND, core.client_id, exc)
        self._stop_core(core)
        self._after_stop()

    def _stop_core(self, core: ClientCore) -> None:
        loop = core.runtime.loop
        if loop.running and not loop.in_loop():
            try:
                loop.run(core.shutdown(), START_TIMEOUT_S)
            except Exception as exc:  # the loop stops with the access point anyway; say what was skipped
                log.warning("%s %s did not say goodbye: %r", self.KIND, core.client_id, exc)

    def _after_stop(self) -> None:
        """Subclass hook, off the loop, after the core stopped (stop thread pools)."""

    def __enter__(self) -> Self:
        return self.startup()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.shutdown()

    def _running_core(self) -> ClientCore:
        core = self._core
        if core is None or self._closed:
            state = "shut down" if self._closed else "not started (call startup() or use it in a with block)"
            raise OMSIllegalStateException(f"the {self.KIND} is {state}")
        return core

    def _running_calls(self) -> ConsumerCalls:
        self._running_core()
        assert self._calls is not None
        return self._calls

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float) -> T:
        """Run ``coro`` on the loop and wait for it (its own deadlines end it first; this is the last resort)."""
        try:
            core = self._running_core()
        except OMSException:
            coro.close()
            raise
        try:
            return core.runtime.loop.run(coro, timeout_s + RUN_GUARD_S)
        except OMSException:
            raise
        except TimeoutError:
            raise OMSTimeOutException(Code.REQUEST_TIMEOUT, f"no answer within {timeout_s:.3f}s") from None
        except concurrent.futures.CancelledError:
            raise OMSIllegalStateException(f"the {self.KIND} was shut down during the call") from None

    # -- interceptors -------------------------------------------------------------------------------------------

    def add_interceptor(self, interceptor: object) -> Self:
        """Register an object implementing ``oms_before_consume``/``oms_after_consume`` (``oms.hookspecs``)."""
        self._interceptors.register(interceptor)
        return self

    def remove_interceptor(self, interceptor: object) -> Self:
        self._interceptors.unregister(interceptor)
        return self

    # -- settings and routes ------------------------------------------------------------------------------------

    def _settings(self, core: ClientCore) -> definition_pb2.Settings:
        subscription = definition_pb2.Subscription(
            group=core.resource(self.config.group),
            subscriptions=[
                definition_pb2.SubscriptionEntry(topic=core.resource(topic), expression=selector.to_pb())
                for topic, selector in sorted(self._selectors.items())
            ],
        )
        if self.config.long_polling_ms:
            subscription.long_polling_timeout.CopyFrom(duration_ms(self.config.long_polling_ms))
        return definition_pb2.Settings(
            client_type=self.CLIENT_TYPE,
            access_point=core.runtime.access_point.to_pb(),
            request_timeout=duration_ms(self.config.timeout_s * 1000),
            subscription=subscription,
            user_agent=definition_pb2.UA(
                language=definition_pb2.Language.PYTHON,
                version=CLIENT_VERSION,
                platform=platform.platform(),
                hostname=self._host,
            ),
        )

    def _on_command(self, endpoint: Endpoint, command: service_pb2.TelemetryCommand) -> None:
        log.debug("telemetry command %s from %s ignored by a %s", command.WhichOneof("command"), endpoint, self.KIND)

    async def _sync_settings(self, core: ClientCore) -> None:
        """Tell every broker the current subscriptions (after attach/detach)."""
        for endpoint in core.routes.endpoints():
            session = core.telemetry(endpoint)
            if session is not None:
                await session.sync_settings()

    async def _readable_queues(self, core: ClientCore, topic: str) -> list[QueueRef]:
        route = await core.routes.get(topic)
        return [QueueRef(q.queue, q.endpoint) for q in route.queues if q.readable]

    async def _queue_ref(self, core: ClientCore, queue: MessageQueue) -> QueueRef:
        """The endpoint of ``queue``'s broker (from the topic's route; fetched again once if the broker is new)."""
        for attempt in range(2):
            route = await (core.routes.get(queue.topic) if attempt == 0 else core.routes.fetch(queue.topic))
            for q in route.queues:
                if q.queue.broker_name == queue.broker_name:
                    return QueueRef(queue, q.endpoint)
        raise OMSResourceNotExistException(
            Code.NOT_FOUND, f"broker {queue.broker_name!r} serves no queue of topic {queue.topic!r}"
        )

    async def _apply_consume_from(self, core: ClientCore, topics: list[str]) -> None:
        """A queue the group never consumed starts where ``consume_from_where`` says (the broker's offset wins).

        The broker starts a receive/ack group at its committed offset; for a new group the client commits the
        chosen start first (QueryOffset, then UpdateOffset).
        """
        assert self._calls is not None
        cfg = self.config
        for topic in topics:
            for ref in await self._readable_queues(core, topic):
                try:
                    if await self._calls.get_offset(ref) is not None:
                        continue
                    offset = await self._calls.start_offset(ref, cfg.consume_from_where, cfg.consume_timestamp_ms)
                    await self._calls.update_offset(ref, offset)
                    log.info("%s starts %s at %d (%s)", cfg.group, ref.queue, offset, cfg.consume_from_where.value)
                except OMSException as exc:  # the broker's default (first message) applies then
                    log.warning("start position of %s on %s not set: %s", cfg.group, ref.queue, exc)
