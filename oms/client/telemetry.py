"""One Telemetry stream per (client, broker endpoint): sends the client's Settings, receives server commands.

The stream is reopened with back-off when it breaks; settings are re-sent on reopen and whenever they change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import grpc
import grpc.aio
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from oms.client.endpoints import Endpoint
from oms.client.rpc import Rpc
from orbitmq.errors import Code

log = logging.getLogger("oms.client.telemetry")

CommandHandler = Callable[[Endpoint, service_pb2.TelemetryCommand], None]
SettingsHandler = Callable[[definition_pb2.Settings], None]
RECONNECT_MIN_S = 0.5
RECONNECT_MAX_S = 10.0


class TelemetrySession:
    """Loop-bound."""

    def __init__(
        self,
        endpoint: Endpoint,
        rpc: Rpc,
        settings: Callable[[], definition_pb2.Settings],
        on_command: CommandHandler,
        on_settings: SettingsHandler | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._on_settings = on_settings
        self._rpc = rpc
        self._settings = settings
        self._on_command = on_command
        self._call: grpc.aio.StreamStreamCall | None = None
        self._task: asyncio.Task[None] | None = None
        self._write_lock = asyncio.Lock()
        self._closed = False
        self.server_settings: definition_pb2.Settings | None = None
        self.settings_received = asyncio.Event()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"telemetry {self.endpoint}")

    async def _write_settings(self, call: grpc.aio.StreamStreamCall) -> None:
        async with self._write_lock:
            await call.write(service_pb2.TelemetryCommand(settings=self._settings()))

    async def sync_settings(self) -> None:
        """Send the current settings again (e.g. a new topic joined ``publishing.topics``)."""
        call = self._call
        if call is None:
            return  # the next (re)connect sends the current settings anyway
        try:
            await self._write_settings(call)
        except (grpc.RpcError, asyncio.InvalidStateError) as exc:
            log.info("telemetry settings to %s not sent (stream closing): %s", self.endpoint, exc)

    async def _run(self) -> None:
        delay = RECONNECT_MIN_S
        while not self._closed:
            call = self._rpc.stub(self.endpoint).Telemetry(metadata=self._rpc.headers.build())
            self._call = call
            try:
                await self._write_settings(call)
                while True:
                    command = await call.read()
                    if command is grpc.aio.EOF:
                        break
                    delay = RECONNECT_MIN_S  # the stream works: a later break reconnects quickly
                    self._handle(command)
            except grpc.RpcError as exc:
                if not self._closed:
                    log.info("telemetry stream to %s broke: %s", self.endpoint, exc)
            finally:
                self._call = None
                call.cancel()
            if self._closed:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_S)

    def _handle(self, command: service_pb2.TelemetryCommand) -> None:
        kind = command.WhichOneof("command")
        if kind == "settings":
            if command.status.code == Code.OK:
                self.server_settings = command.settings
                self.settings_received.set()
                if self._on_settings is not None:
                    self._on_settings(command.settings)
            else:
                log.warning("telemetry settings refused by %s: %s", self.endpoint, command.status.message)
            return
        if kind is None:
            if command.HasField("status") and command.status.code != Code.OK:
                log.warning("telemetry error from %s: %s", self.endpoint, command.status.message)
            return
        try:
            self._on_command(self.endpoint, command)
        except Exception:  # one bad command must not end the stream
            log.exception("telemetry command %s from %s failed", kind, self.endpoint)

    async def close(self) -> None:
        self._closed = True
        call = self._call
        if call is not None:
            call.cancel()
        task = self._task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
