"""Telemetry streams and client bookkeeping keyed by ``x-mq-client-id`` (shared by name server and broker).

A reader task answers settings; the handler yields from a per-client queue that never blocks the reader.
Client state outlives streams (P12/P13): only silence (no heartbeat, no settings, no open stream) expires it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import grpc
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from orbitmq import limits
from orbitmq.errors import MQError
from orbitmq.logging import get_logger
from orbitmq.v2.metadata import ClientMeta, client_meta
from orbitmq.v2.settings import SettingsPolicy, settings_reply, validate_settings
from orbitmq.v2.status import internal_error_status, status_from_error

log = get_logger("v2.telemetry")

TELEMETRY_QUEUE_SIZE = 1024  # commands waiting for a stream; a push consumer may never read them (P13)


class ClientEvent(StrEnum):
    REGISTERED = "registered"
    UPDATED = "updated"
    UNREGISTERED = "unregistered"
    EXPIRED = "expired"


@dataclass
class ClientInfo:
    """What we know about one client object (producer or consumer) of some process."""

    client_id: str
    client_type: int = definition_pb2.ClientType.CLIENT_TYPE_UNSPECIFIED
    group: str = ""
    topics: frozenset[str] = frozenset()
    settings: definition_pb2.Settings | None = None
    meta: ClientMeta | None = None
    last_seen: float = 0.0
    streams: int = 0  # open Telemetry streams of this client
    queue: asyncio.Queue[service_pb2.TelemetryCommand | StreamRefusal | None] | None = field(default=None, repr=False)

    @property
    def is_producer(self) -> bool:
        return self.client_type == definition_pb2.ClientType.PRODUCER

    @property
    def connected(self) -> bool:
        return self.streams > 0 and self.queue is not None


ClientListener = Callable[[ClientEvent, ClientInfo], None]
# Raises MQError (FORBIDDEN/UNAUTHORIZED) when the caller of a stream may not declare these settings.
SettingsGuard = Callable[[ClientMeta, definition_pb2.Settings], None]
CommandListener = Callable[[ClientInfo, service_pb2.TelemetryCommand], None]


@dataclass(frozen=True)
class StreamRefusal:
    """A client command that ends its Telemetry stream with INVALID_ARGUMENT (malformed settings)."""

    message: str


def _settings_identity(settings: definition_pb2.Settings) -> tuple[int, str, frozenset[str]]:
    if settings.HasField("subscription"):
        topics = frozenset(s.topic.name for s in settings.subscription.subscriptions)
        return settings.client_type, settings.subscription.group.name, topics
    return settings.client_type, "", frozenset(t.name for t in settings.publishing.topics)


class TelemetryHub:
    """Client registry + Telemetry handler. Loop-bound: call from the server's event loop unless noted."""

    def __init__(
        self,
        policy: SettingsPolicy | None = None,
        client_expired_s: float = limits.CLIENT_EXPIRED_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        settings_guard: SettingsGuard | None = None,
    ) -> None:
        self.policy = policy or SettingsPolicy()
        self.settings_guard = settings_guard
        self.client_expired_s = client_expired_s
        self._clock = clock
        self._clients: dict[str, ClientInfo] = {}
        self._client_listeners: list[ClientListener] = []
        self._command_listeners: dict[str, list[CommandListener]] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._expiry_task: asyncio.Task[None] | None = None

    # -- listeners ----------------------------------------------------------------------------------------------

    def on_client_change(self, listener: ClientListener) -> None:
        """``listener(event, client)`` runs on the loop after a client registers, changes, leaves or expires."""
        self._client_listeners.append(listener)

    def on_command(self, kind: str, listener: CommandListener) -> None:
        """``listener(client, command)`` for client commands of oneof ``kind`` (e.g. ``verify_message_result``)."""
        self._command_listeners.setdefault(kind, []).append(listener)

    def _fire(self, event: ClientEvent, client: ClientInfo) -> None:
        for listener in self._client_listeners:
            try:
                listener(event, client)
            except Exception as exc:  # one broken listener must not break client bookkeeping
                log.exception("client listener failed", client_event=event.value, error=repr(exc))

    # -- registry -----------------------------------------------------------------------------------------------

    def clients(self, group: str | None = None, client_type: int | None = None) -> list[ClientInfo]:
        return [
            c
            for c in self._clients.values()
            if (group is None or c.group == group) and (client_type is None or c.client_type == client_type)
        ]

    def idle_ms(self, client: ClientInfo) -> int:
        """Milliseconds since the client was last heard from (heartbeat, settings or stream)."""
        return max(0, int((self._clock() - client.last_seen) * 1000))

    def client(self, client_id: str) -> ClientInfo | None:
        return self._clients.get(client_id)

    def settings_of(self, client_id: str) -> definition_pb2.Settings | None:
        """The settings the client last sent (not our reply)."""
        client = self._clients.get(client_id)
        return client.settings if client else None

    def touch(
        self, client_id: str, group: str = "", client_type: int = 0, meta: ClientMeta | None = None
    ) -> ClientInfo:
        """Heartbeat bookkeeping. A heartbeat before settings registers the client (P23: answer OK)."""
        client = self._clients.get(client_id)
        if client is None:
            client = self._clients[client_id] = ClientInfo(client_id)
        # a client "registers" when it first tells us what it is (a bare stream open does not)
        is_new = not client.client_type
        changed = False
        if client_type and client.client_type != client_type:
            client.client_type, changed = client_type, True
        if group and client.group != group:
            client.group, changed = group, True
        if meta is not None:
            client.meta = meta
        client.last_seen = self._clock()
        if is_new:
            self._fire(ClientEvent.REGISTERED, client)
        elif changed:
            self._fire(ClientEvent.UPDATED, client)
        return client

    def remove(self, client_id: str) -> ClientInfo | None:
        """The client said goodbye (NotifyClientTermination)."""
        client = self._clients.pop(client_id, None)
        if client is not None:
            self._close_queue(client)
            self._fire(ClientEvent.UNREGISTERED, client)
        return client

    def expire(self, now: float | None = None) -> list[ClientInfo]:
        """Drop clients silent for ``client_expired_s`` that have no open stream; returns them."""
        now = self._clock() if now is None else now
        dead = [c for c in self._clients.values() if not c.streams and now - c.last_seen > self.client_expired_s]
        for client in dead:
            del self._clients[client.client_id]
            log.info("client expired", client_id=client.client_id, group=client.group)
            self._fire(ClientEvent.EXPIRED, client)
        return dead

    def record_settings(self, client_id: str, settings: definition_pb2.Settings, meta: ClientMeta | None) -> None:
        client = self._clients.get(client_id)
        if client is None:
            client = self._clients[client_id] = ClientInfo(client_id)
        is_new = not client.client_type
        kind, group, topics = _settings_identity(settings)
        changed = (client.client_type, client.group, client.topics) != (kind, group, topics)
        client.client_type, client.group, client.topics = kind, group, topics
        client.settings = settings
        client.last_seen = self._clock()
        if meta is not None:
            client.meta = meta
        if is_new:
            self._fire(ClientEvent.REGISTERED, client)
        elif changed:
            self._fire(ClientEvent.UPDATED, client)

    # -- server -> client ---------------------------------------------------------------------------------------

    def send_command(self, client_id: str, command: service_pb2.TelemetryCommand) -> bool:
        """Queue ``command`` on the client's open stream; False if it has none or its queue is full.

        Safe from any thread: off-loop calls are handed to the loop (and then report only "queued").
        """
        client = self._clients.get(client_id)
        if client is None or client.queue is None:
            return False
        loop = self._loop
        if loop is not None and threading.get_ident() != self._loop_thread:
            loop.call_soon_threadsafe(self._put, client, command)
            return True
        return self._put(client, command)

    @staticmethod
    def _put(client: ClientInfo, command: service_pb2.TelemetryCommand | None) -> bool:
        if client.queue is None:
            return False
        try:
            client.queue.put_nowait(command)
        except asyncio.QueueFull:
            log.warning("telemetry queue full, command dropped", client_id=client.client_id)
            return False
        return True

    def _close_queue(self, client: ClientInfo) -> None:
        if client.queue is not None:
            self._put(client, None)
            client.queue = None

    # -- background expiry --------------------------------------------------------------------------------------

    def _bind_loop(self) -> None:
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
            self._loop_thread = threading.get_ident()

    async def start(self, scan_interval_s: float | None = None) -> None:
        self._bind_loop()
        if self._expiry_task is None:
            interval = scan_interval_s or max(0.05, min(10.0, self.client_expired_s / 4))
            self._expiry_task = asyncio.create_task(self._expiry_loop(interval), name="telemetry-expiry")

    async def stop(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry_task
            self._expiry_task = None
        for client in self._clients.values():
            self._close_queue(client)

    async def _expiry_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            self.expire()

    # -- the Telemetry RPC --------------------------------------------------------------------------------------

    async def handle(
        self, request_iterator: AsyncIterable[service_pb2.TelemetryCommand], context: Any
    ) -> AsyncIterator[service_pb2.TelemetryCommand]:
        """Body of a grpc.aio ``Telemetry`` handler: ``async for c in hub.handle(it, ctx): yield c``."""
        self._bind_loop()
        meta = client_meta(context)
        try:
            client_id = meta.require_client_id()
        except MQError as exc:
            yield service_pb2.TelemetryCommand(status=status_from_error(exc))
            return
        client = self._clients.get(client_id)
        if client is None:
            client = self._clients[client_id] = ClientInfo(client_id, meta=meta, last_seen=self._clock())
        if client.queue is not None:
            self._close_queue(client)  # a rebuilt stream (P12) replaces the old one
        queue: asyncio.Queue[service_pb2.TelemetryCommand | StreamRefusal | None] = asyncio.Queue(TELEMETRY_QUEUE_SIZE)
        client.queue = queue
        client.streams += 1
        reader = asyncio.create_task(self._read(client_id, request_iterator, meta, queue))
        try:
            while True:
                command = await queue.get()
                if command is None:
                    break
                if isinstance(command, StreamRefusal):
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, command.message)
                yield command
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            current = self._clients.get(client_id)
            if current is not None:
                current.streams = max(0, current.streams - 1)
                current.last_seen = self._clock()
                if current.queue is queue:
                    current.queue = None

    async def _read(
        self,
        client_id: str,
        request_iterator: AsyncIterable[service_pb2.TelemetryCommand],
        meta: ClientMeta,
        queue: asyncio.Queue[service_pb2.TelemetryCommand | StreamRefusal | None],
    ) -> None:
        try:
            async for command in request_iterator:
                reply = self._on_client_command(client_id, command, meta)
                if isinstance(reply, StreamRefusal):
                    await queue.put(reply)  # the writer ends the stream with it: nothing more is read
                    return
                if reply is not None:
                    try:
                        queue.put_nowait(reply)
                    except asyncio.QueueFull:
                        log.warning("telemetry reply dropped, queue full", client_id=client_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the stream broke: the client keeps its registration (P12)
            log.debug("telemetry stream ended", client_id=client_id, error=repr(exc))
        with contextlib.suppress(asyncio.QueueFull):
            queue.put_nowait(None)

    def _on_client_command(
        self, client_id: str, command: service_pb2.TelemetryCommand, meta: ClientMeta
    ) -> service_pb2.TelemetryCommand | StreamRefusal | None:
        kind = command.WhichOneof("command")
        if kind == "settings":
            try:
                validate_settings(command.settings)
            except MQError as exc:  # as the Java proxy: a malformed declaration ends the stream, INVALID_ARGUMENT
                log.warning("bad client settings", client_id=client_id, error=exc.message)
                return StreamRefusal(exc.message)
            try:
                if self.settings_guard is not None:
                    # a refused declaration is not recorded: the client is not a producer/consumer of those topics
                    self.settings_guard(meta, command.settings)
                reply = settings_reply(command.settings, self.policy)
            except MQError as exc:
                log.warning("bad client settings", client_id=client_id, error=str(exc))
                return service_pb2.TelemetryCommand(status=status_from_error(exc))
            except Exception as exc:
                log.exception("settings reply failed", client_id=client_id)
                return service_pb2.TelemetryCommand(status=internal_error_status(exc))
            self.record_settings(client_id, command.settings, meta)
            return reply
        client = self._clients.get(client_id)
        if client is not None:
            client.last_seen = self._clock()
            for listener in self._command_listeners.get(kind or "", []):
                try:
                    listener(client, command)
                except Exception as exc:
                    log.exception("command listener failed", kind=kind, error=repr(exc))
        return None
