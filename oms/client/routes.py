"""Topic routes from ``QueryRoute``: cached per topic, refreshed every 30 s and after a failure.

Only master queues (broker id 0) are kept, as the official clients do (protocol P16).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

from rocketmq.grpc_protocol import definition_pb2, service_pb2

from oms.client.endpoints import Endpoint
from oms.client.rpc import Rpc
from oms.queue import MessageQueue

log = logging.getLogger("oms.client.routes")

ROUTE_REFRESH_S = 30.0
_WRITABLE = frozenset({definition_pb2.Permission.WRITE, definition_pb2.Permission.READ_WRITE})
_READABLE = frozenset({definition_pb2.Permission.READ, definition_pb2.Permission.READ_WRITE})


@dataclass(frozen=True)
class RouteQueue:
    queue: MessageQueue
    permission: int
    endpoint: Endpoint
    accept_types: frozenset[int]

    @property
    def broker_name(self) -> str:
        return self.queue.broker_name

    @property
    def writable(self) -> bool:
        return self.permission in _WRITABLE

    @property
    def readable(self) -> bool:
        return self.permission in _READABLE

    def accepts(self, message_type: int) -> bool:
        # an empty list means the server did not say: let the broker decide
        return not self.accept_types or message_type in self.accept_types


@dataclass(frozen=True)
class TopicRoute:
    topic: str
    queues: tuple[RouteQueue, ...]
    fetched_at: float

    def writable(self) -> tuple[RouteQueue, ...]:
        return tuple(q for q in self.queues if q.writable)

    def endpoints(self) -> set[Endpoint]:
        return {q.endpoint for q in self.queues}

    def writable_on(self, broker_name: str) -> tuple[RouteQueue, ...]:
        return tuple(q for q in self.queues if q.writable and q.broker_name == broker_name)


def route_from_response(topic: str, response: service_pb2.QueryRouteResponse) -> TopicRoute:
    queues = []
    for mq in response.message_queues:
        if mq.broker.id != 0:
            continue
        queues.append(
            RouteQueue(
                queue=MessageQueue(topic, mq.broker.name, int(mq.id)),
                permission=int(mq.permission),
                endpoint=Endpoint.from_pb(mq.broker.endpoints),
                accept_types=frozenset(int(t) for t in mq.accept_message_types),
            )
        )
    queues.sort(key=lambda q: (q.broker_name, q.queue.queue_id))
    return TopicRoute(topic, tuple(queues), time.monotonic())


class RouteCache:
    """Loop-bound. ``on_route(route)`` runs after every successful fetch (opens Telemetry streams, etc.)."""

    def __init__(
        self,
        rpc: Rpc,
        access_point: Endpoint,
        namespace: str,
        timeout: Callable[[], float],
        on_route: Callable[[TopicRoute], None] | None = None,
    ) -> None:
        self._rpc = rpc
        self._access_point = access_point
        self._namespace = namespace
        self._timeout = timeout
        self._on_route = on_route
        self._routes: dict[str, TopicRoute] = {}
        self._inflight: dict[str, asyncio.Future[TopicRoute]] = {}

    def cached(self, topic: str) -> TopicRoute | None:
        return self._routes.get(topic)

    def topics(self) -> list[str]:
        return list(self._routes)

    def endpoints(self) -> set[Endpoint]:
        out: set[Endpoint] = set()
        for route in self._routes.values():
            out |= route.endpoints()
        return out

    def invalidate(self, topic: str) -> None:
        """Forget the route: the next ``get`` asks again (after a send failure the route may have changed)."""
        self._routes.pop(topic, None)

    async def get(self, topic: str) -> TopicRoute:
        route = self._routes.get(topic)
        if route is not None:
            return route
        return await self.fetch(topic)

    async def fetch(self, topic: str) -> TopicRoute:
        """Query the access point; concurrent fetches of one topic share one call."""
        pending = self._inflight.get(topic)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[TopicRoute] = asyncio.get_running_loop().create_future()
        self._inflight[topic] = future
        try:
            request = service_pb2.QueryRouteRequest(
                topic=definition_pb2.Resource(name=topic, resource_namespace=self._namespace),
                endpoints=self._access_point.to_pb(),
            )
            response = await self._rpc.call(self._access_point, "QueryRoute", request, self._timeout())
            route = route_from_response(topic, response)
            self._routes[topic] = route
            if self._on_route is not None:
                self._on_route(route)
            future.set_result(route)
            return route
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here, so an unawaited failure is not reported as "never retrieved"
            raise
        finally:
            del self._inflight[topic]

    async def refresh_all(self) -> None:
        for topic in list(self._routes):
            try:
                await self.fetch(topic)
            except Exception as exc:  # keep the old route: a refresh failing once is no reason to drop it
                log.warning("route refresh of %s failed: %s", topic, exc)
