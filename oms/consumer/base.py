"""What push and pull consumers share: lifecycle around a ``ClientCore``, Settings with the subscriptions, hooks.

The grpc.aio work runs on the access point's loop thread; sync methods submit to it and wait (bounded).
"""

from __future__ import annotations

import logging

from rocketmq.grpc_protocol import definition_pb2, service_pb2

from oms.client.core import ClientCore, Runtime
from oms.client.endpoints import Endpoint
from oms.consumer.calls import ConsumerCalls, QueueRef, duration_ms
from oms.consumer.config import ConsumerConfig
from oms.consumer.selector import MessageSelector
from oms.context import ClientContext
from oms.errors import OMSException, OMSResourceNotExistException
from oms.keyvalue import KeyValue
from oms.lifecycle import MessagingClient
from oms.queue import MessageQueue
from orbitmq.errors import Code

log = logging.getLogger("oms.consumer")

START_TIMEOUT_S = 15.0


class ConsumerBase(MessagingClient):
    """Lifecycle and plumbing; subclasses set ``CLIENT_TYPE`` and implement ``_started``/``_stopping``."""

    CLIENT_TYPE: int = definition_pb2.ClientType.PUSH_CONSUMER
    KIND = "consumer"

    def __init__(self, context: ClientContext, attributes: KeyValue) -> None:
        self.config = ConsumerConfig.from_attributes(attributes)
        super().__init__(context, attributes)
        self._calls: ConsumerCalls | None = None
        self._selectors: dict[str, MessageSelector] = {}  # topic -> subscription, as Settings tell the broker

    # -- lifecycle ----------------------------------------------------------------------------------------------

    @property
    def group(self) -> str:
        return self.config.group

    def _open(self, runtime: Runtime) -> ClientCore:
        """Routes of the attached topics, Telemetry, heartbeats, then the subclass's work."""
        core = ClientCore(
            runtime, self.CLIENT_TYPE, self._settings, self._on_command, self.config.timeout_s, self.config.group
        )
        self._calls = ConsumerCalls(core, self.config.group)
        try:
            runtime.loop.run(self._start_async(core), START_TIMEOUT_S + self.config.timeout_s)
        except BaseException:
            self._stop_core(core)
            self._after_stop()
            raise
        return core

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

    def _close(self, core: ClientCore) -> None:
        """The subclass's loops and commits first, then goodbye to brokers, then its threads."""
        self._stop_step(core, self._stopping, self._stop_timeout(), "stopping")
        self._stop_core(core)
        self._after_stop()

    def _stop_core(self, core: ClientCore) -> None:
        self._stop_step(core, core.shutdown, START_TIMEOUT_S, "goodbye to brokers")

    def _after_stop(self) -> None:
        """Subclass hook, off the loop, after the core stopped (stop thread pools)."""

    def _running_calls(self) -> ConsumerCalls:
        self._running_core()
        assert self._calls is not None
        return self._calls

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
            user_agent=self._user_agent(),
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
                    # a topic not created yet has no messages to skip: nothing to warn about
                    level = logging.DEBUG if exc.code == Code.TOPIC_NOT_FOUND else logging.WARNING
                    log.log(level, "start position of %s on %s not set: %s", cfg.group, ref.queue, exc)
