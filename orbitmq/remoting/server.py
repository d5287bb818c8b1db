"""An asyncio server for RemotingCommand frames: each request is handed to ``handler`` concurrently (a pull may
long-poll) and answered with its opaque; a malformed frame closes that connection only, after answering it when
the header could be read."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import itertools
import time
from collections.abc import Awaitable, Callable

from orbitmq.logging import get_logger
from orbitmq.remoting.codec import FrameError, RemotingCommand, encode, iter_frames
from orbitmq.remoting.codes import RPC_ONEWAY, ResponseCode
from orbitmq.remoting.grpc_frames import CANCEL_FIELD, OrbitRequestCode

log = get_logger("remoting")
Handler = Callable[[RemotingCommand, str], Awaitable[RemotingCommand | None]]  # (request, peer "host:port")
# (request code, response code or None when the handler raised, oneway, seconds): rocketmq_rpc_latency
Observer = Callable[[int, int | None, bool, float], None]
DisconnectListener = Callable[[str], None]  # the peer "host:port" whose connection closed
ONEWAY_DRAIN_TIMEOUT_S = 3.0
# How long a client may leave an answer unread once the socket is full: past it the connection is closed, or a
# client that sends but never reads would pile up the broker's handler tasks and answers without bound.
ANSWER_DRAIN_TIMEOUT_S = 30.0
# Bytes taken per read: every frame they complete is dispatched at once (the transport reads up to 256 KiB a time).
READ_CHUNK_BYTES = 1 << 18


class RemotingServer:
    def __init__(
        self,
        handler: Handler,
        name: str,
        observer: Observer | None = None,
        frames: Handler | None = None,
        answer_drain_timeout_s: float = ANSWER_DRAIN_TIMEOUT_S,
    ) -> None:
        self.handler = handler
        self.answer_drain_timeout_s = answer_drain_timeout_s
        self.name = name
        self.observer = observer
        self.frames = frames  # OrbitMQ's framed gRPC calls (OrbitRequestCode.GRPC_UNARY), when served here
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()
        # open connections by peer: the broker's own requests (check-backs, notifications) go out on them
        self._channels: dict[str, tuple[asyncio.StreamWriter, asyncio.Lock]] = {}
        self._opaque = itertools.count(1)
        self.on_disconnect: DisconnectListener | None = None

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host, port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("remoting listener started", server=self.name, host=host, port=self.port)
        return self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        peer_info = writer.get_extra_info("peername")
        peer = f"{peer_info[0]}:{peer_info[1]}" if peer_info else "?"
        lock = asyncio.Lock()
        self._channels[peer] = (writer, lock)
        pending: dict[int, asyncio.Task[None]] = {}  # by opaque: a framed call's cancel names its request
        partial = bytearray()  # the start of a frame not yet whole
        try:
            while data := await reader.read(READ_CHUNK_BYTES):
                for cmd in iter_frames(partial, data):
                    if cmd.code == OrbitRequestCode.GRPC_CANCEL and self.frames is not None:
                        _cancel(pending, cmd)
                        continue
                    request = asyncio.create_task(self._answer(cmd, peer, writer, lock))
                    opaque = cmd.opaque
                    pending[opaque] = request
                    request.add_done_callback(functools.partial(_forget, pending, opaque))
            if partial:  # the client closed the connection inside a frame
                log.debug("remoting connection closed mid-frame", server=self.name, peer=peer, pending=len(partial))
        except FrameError as exc:
            log.warning("malformed remoting frame: connection closed", server=self.name, peer=peer, reason=str(exc))
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            log.debug("remoting connection lost", server=self.name, peer=peer, error=repr(exc))
        except asyncio.CancelledError:
            return  # the server is stopping: close quietly (the finally block closes the socket)
        finally:
            self._channels.pop(peer, None)
            for request in list(pending.values()):
                request.cancel()
            if self.on_disconnect is not None:
                try:
                    self.on_disconnect(peer)
                except Exception as exc:  # a listener's bug must not keep the socket open
                    log.exception("remoting disconnect listener failed", server=self.name, peer=peer, error=repr(exc))
            writer.close()
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await writer.wait_closed()
            self._connections.discard(task)

    async def send_oneway(self, peer: str, request: RemotingCommand) -> bool:
        """Send a request of the server's own (RocketMQ's ``invokeOneway``: no answer awaited) on the connection of
        ``peer``; False when that connection is gone."""
        channel = self._channels.get(peer)
        if channel is None:
            return False
        writer, lock = channel
        request.opaque = next(self._opaque)
        request.flag |= RPC_ONEWAY
        data = encode(request)
        async with lock:
            if writer.is_closing():
                return False
            writer.write(data)
            try:
                # a client that stopped reading must not hold up the broker's check-backs and notifications
                await asyncio.wait_for(writer.drain(), ONEWAY_DRAIN_TIMEOUT_S)
            except (ConnectionError, TimeoutError):
                return False
        return True

    async def _answer(self, cmd: RemotingCommand, peer: str, writer: asyncio.StreamWriter, lock: asyncio.Lock) -> None:
        if cmd.is_response:
            return  # answers to the server's own requests (they are all sent oneway)
        framed = self.frames is not None and cmd.code == OrbitRequestCode.GRPC_UNARY
        handler = self.frames if framed and self.frames is not None else self.handler
        started = time.perf_counter()
        failed = False
        try:
            response = await handler(cmd, peer)
        except FrameError as exc:  # a request missing or mangling a header field: a clear answer, not a close
            response = cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        except Exception as exc:  # a bug or a store failure: the client gets SYSTEM_ERROR naming it
            log.exception("remoting request failed", server=self.name, code=cmd.code, error=repr(exc))
            response = cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")
            failed = True
        if self.observer is not None and not framed:  # framed calls are timed by the gRPC handlers they run
            code = None if failed or response is None else response.code
            self.observer(cmd.code, code, cmd.is_oneway, time.perf_counter() - started)
        if response is None or cmd.is_oneway:
            return
        data = encode(response)
        async with lock:
            writer.write(data)
            transport = writer.transport
            if transport.get_write_buffer_size() <= transport.get_write_buffer_limits()[1]:
                return  # the socket keeps up: no wait, and no timer (a wait_for per answer cost ~19 us)
            try:
                async with asyncio.timeout(self.answer_drain_timeout_s):
                    await writer.drain()
            except ConnectionError as exc:  # the client went away: the connection's reader cleans up
                log.debug("remoting answer not delivered", server=self.name, peer=peer, error=repr(exc))
            except TimeoutError:
                log.warning(
                    "remoting client does not read its answers: connection closed",
                    server=self.name,
                    peer=peer,
                    waited_s=self.answer_drain_timeout_s,
                )
                writer.transport.abort()  # what it left unread goes too; its reader loop then ends the connection


def _forget(pending: dict[int, asyncio.Task[None]], opaque: int, done: asyncio.Task[None]) -> None:
    if pending.get(opaque) is done:
        del pending[opaque]


def _cancel(pending: dict[int, asyncio.Task[None]], cmd: RemotingCommand) -> None:
    """The caller gave up on a framed call (cancelled, timed out): stop its handler, as gRPC cancels a call's."""
    target = cmd.ext_fields.get(CANCEL_FIELD, "")
    request = pending.get(int(target)) if target.lstrip("-").isdigit() else None
    if request is not None:
        request.cancel()
