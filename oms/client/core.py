"""The lifecycle every v2 client object shares: id and headers, routes, Telemetry streams, heartbeats, goodbye.

Producers and consumers wrap one ``ClientCore``; all of it runs on the access point's loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from rocketmq.grpc_protocol import definition_pb2, service_pb2

from oms.client.endpoints import Endpoint
from oms.client.headers import Credentials, HeaderBuilder
from oms.client.identity import new_client_id
from oms.client.loop import LoopThread
from oms.client.metrics import ClientMetrics
from oms.client.routes import ROUTE_REFRESH_S, RouteCache, TopicRoute
from oms.client.rpc import ChannelPool, Rpc
from oms.client.telemetry import CommandHandler, TelemetrySession

log = logging.getLogger("oms.client")

HEARTBEAT_S = 10.0
FIRST_HEARTBEAT_S = 1.0
GOODBYE_TIMEOUT_S = 1.0  # NotifyClientTermination is a courtesy: never hold shutdown for long


@dataclass(frozen=True)
class Runtime:
    """What an access point shares with its clients: the loop, the channels, where and who."""

    loop: LoopThread
    pool: ChannelPool
    access_point: Endpoint
    namespace: str
    credentials: Credentials | None


class ClientCore:
    def __init__(
        self,
        runtime: Runtime,
        client_type: int,
        settings: Callable[[ClientCore], definition_pb2.Settings],
        on_command: CommandHandler,
        timeout_s: float,
        group: str = "",
    ) -> None:
        self.runtime = runtime
        self.client_type = client_type
        self.group = group
        self.timeout_s = timeout_s
        self.client_id = new_client_id()
        self.metrics = ClientMetrics(self.client_id)  # exported where the brokers' settings say (Settings.metric)
        self.headers = HeaderBuilder(self.client_id, runtime.namespace, runtime.credentials)
        self.rpc = Rpc(runtime.pool, self.headers)
        self.routes = RouteCache(
            self.rpc, runtime.access_point, runtime.namespace, lambda: self.timeout_s, on_route=self._on_route
        )
        self._settings = settings
        self._on_command = on_command
        self._sessions: dict[Endpoint, TelemetrySession] = {}
        self._retired: set[TelemetrySession] = set()  # closing after their broker left the routes
        self._known_topics: set[str] = set()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._closed = False

    # -- helpers ------------------------------------------------------------------------------------------------

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """A background task owned by this client (cancelled at shutdown, failures logged)."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("client task %s failed: %r", task.get_name(), task.exception())

    def settings(self) -> definition_pb2.Settings:
        return self._settings(self)

    def resource(self, name: str) -> definition_pb2.Resource:
        return definition_pb2.Resource(name=name, resource_namespace=self.runtime.namespace)

    @property
    def topics(self) -> list[str]:
        """Every topic this client has used (its Settings' ``publishing.topics``), sorted."""
        return sorted(self._known_topics)

    def telemetry(self, endpoint: Endpoint) -> TelemetrySession | None:
        return self._sessions.get(endpoint)

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        self.spawn(self._heartbeat_loop(), f"heartbeat {self.client_id}")
        self.spawn(self._route_loop(), f"routes {self.client_id}")

    async def shutdown(self) -> None:
        if self._closed:
            return
        self._closed = True
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        endpoints = self.routes.endpoints()
        if endpoints:
            await asyncio.gather(*(self._goodbye(e) for e in endpoints))
        for session in [*self._sessions.values(), *self._retired]:
            await session.close()  # idempotent: a retired session may have closed already
        self._sessions.clear()
        self._retired.clear()
        if self.metrics.exporter is not None:
            await asyncio.to_thread(self.metrics.close)

    async def _goodbye(self, endpoint: Endpoint) -> None:
        request = service_pb2.NotifyClientTerminationRequest()
        if self.group:
            request.group.CopyFrom(self.resource(self.group))
        try:
            await self.rpc.call(endpoint, "NotifyClientTermination", request, GOODBYE_TIMEOUT_S)
        except Exception as exc:  # the broker forgets us on expiry anyway
            log.info("NotifyClientTermination to %s failed: %s", endpoint, exc)

    # -- routes and telemetry -----------------------------------------------------------------------------------

    def _on_route(self, route: TopicRoute) -> None:
        if self._closed:
            return
        new_topic = route.topic not in self._known_topics
        self._known_topics.add(route.topic)
        for endpoint in route.endpoints():
            if endpoint not in self._sessions:
                session = TelemetrySession(
                    endpoint, self.rpc, self.settings, self._on_command, self._on_server_settings
                )
                self._sessions[endpoint] = session
                session.start()  # its first write carries the current settings, this topic included
            elif new_topic:
                self.spawn(self._sessions[endpoint].sync_settings(), f"settings {endpoint}")
        if new_topic:
            # brokers not serving this topic still learn it (publishing.topics is per client, not per broker)
            for endpoint, session in self._sessions.items():
                if endpoint not in route.endpoints():
                    self.spawn(session.sync_settings(), f"settings {endpoint}")
        live = self.routes.endpoints()
        for endpoint in [e for e in self._sessions if e not in live]:
            # a broker that left every route: stop reconnecting to it (it gets a new stream if it comes back)
            session = self._sessions.pop(endpoint)
            self._retired.add(session)
            self.spawn(session.close(), f"close telemetry {endpoint}")

    def _on_server_settings(self, settings: definition_pb2.Settings) -> None:
        if not self._closed:
            self.metrics.apply_settings(settings.metric)

    async def _route_loop(self) -> None:
        while True:
            await asyncio.sleep(ROUTE_REFRESH_S)
            await self.routes.refresh_all()

    def refresh_route_soon(self, topic: str) -> None:
        """Re-query a topic's route in the background (after a failure the route may have changed)."""
        if not self._closed:
            self.spawn(self._refresh(topic), f"route {topic}")

    async def _refresh(self, topic: str) -> None:
        try:
            await self.routes.fetch(topic)
        except Exception as exc:  # the old route stays; the periodic refresh tries again
            log.info("route refresh of %s failed: %s", topic, exc)

    # -- heartbeats ---------------------------------------------------------------------------------------------

    async def heartbeat_once(self) -> None:
        request = service_pb2.HeartbeatRequest(client_type=self.client_type)
        if self.group:
            request.group.CopyFrom(self.resource(self.group))
        for endpoint in self.routes.endpoints():
            try:
                await self.rpc.call(endpoint, "Heartbeat", request, self.timeout_s)
            except Exception as exc:  # a heartbeat failing has no other effect: the next one tries again
                log.debug("heartbeat to %s failed: %s", endpoint, exc)

    async def _heartbeat_loop(self) -> None:
        await asyncio.sleep(FIRST_HEARTBEAT_S)
        while True:
            await self.heartbeat_once()
            await asyncio.sleep(HEARTBEAT_S)
