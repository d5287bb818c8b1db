"""One HTTP/2 connection of the gRPC server: h2 events to calls, and one ``call_soon`` flush per loop turn that hands
every dirty call's bytes to h2 within the peer's windows and writes all h2 produced in one ``transport.write``."""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass
from typing import Protocol

import grpc
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    RemoteSettingsChanged,
    RequestReceived,
    StreamEnded,
    StreamReset,
    WindowUpdated,
)
from h2.exceptions import ProtocolError
from h2.settings import SettingCodes
from hyperframe.frame import DataFrame, GoAwayFrame

from orbitmq.h2grpc.call import Call
from orbitmq.h2grpc.wire import (
    GRPC_CONTENT_TYPE,
    RESPONSE_HEADERS,
    WireError,
    decode_metadata,
    decompressor,
    headers_valid,
    trailers,
)
from orbitmq.h2grpc.wire import parse_timeout as parse_grpc_timeout
from orbitmq.logging import get_logger
from orbitmq.remoting.grpc_frames import Metadata

log = get_logger("h2grpc.connection")

GRPC_CONTENT_SUBTYPES = (b"application/grpc+", b"application/grpc;")  # e.g. application/grpc+proto
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HTTP1_REFUSAL = (
    b"HTTP/1.1 505 HTTP Version Not Supported\r\nContent-Type: text/plain\r\nContent-Length: 33\r\n"
    b"Connection: close\r\n\r\nthis port serves gRPC (HTTP/2)\r\n\r\n"
)
# Our receive windows: large, so a big SendMessage batch streams in without waiting for WINDOW_UPDATE round trips.
STREAM_WINDOW = 1 << 22
CONNECTION_WINDOW = 1 << 24
MAX_FRAME = 1 << 20  # what the client may send in one DATA frame (fewer h2 events for large requests)
MAX_HEADER_LIST = 1 << 16  # grpc-core's own default limit of a request's metadata


def _data_frame_repr(frame: DataFrame) -> str:
    return f"<{len(frame.data)} bytes>"


# h2 logs every received frame with repr(frame) whether or not a logger listens, and hyperframe's DataFrame repr
# serializes and hex-encodes the whole payload before cutting it to 10 bytes: ~60% of h2's receive time for a
# 157 KB SendMessage batch (450 -> 165 us). A DataFrame's repr names its size instead (only logs ever read it).
setattr(DataFrame, "_body_repr", _data_frame_repr)  # noqa: B010 - mypy refuses assigning to a method


@dataclass(frozen=True)
class Limits:
    """The server's per-connection limits (grpcio's options of the same names)."""

    max_receive: int
    max_send: int
    max_concurrent_streams: int
    handshake_timeout_s: float  # from accept to the client's HTTP/2 preface


class Dispatcher(Protocol):
    """What a connection asks its server: the handler of a method, and where to say it is gone."""

    def lookup(self, method: str, metadata: Metadata) -> grpc.RpcMethodHandler | None: ...

    def connection_closed(self, proto: H2GrpcProtocol) -> None: ...


class H2GrpcProtocol(asyncio.Protocol):
    """HTTP/2 server side of one connection, serving the dispatcher's gRPC handlers."""

    def __init__(self, dispatcher: Dispatcher, limits: Limits, loop: asyncio.AbstractEventLoop) -> None:
        self.dispatcher = dispatcher
        self.limits = limits
        self.loop = loop
        self.conn = H2Connection(
            config=H2Configuration(
                client_side=False,
                header_encoding=None,
                # checked by wire.headers_valid in one pass instead (h2's per-header generator chain cost ~12%)
                validate_inbound_headers=False,
                normalize_inbound_headers=False,
                # our own headers are well-formed: h2 need not check and normalize every answer's
                validate_outbound_headers=False,
                normalize_outbound_headers=False,
            )
        )
        self.calls: dict[int, Call] = {}
        self.transport: asyncio.Transport | None = None
        self.peer = ""
        self.paused = False
        self._resumed: asyncio.Future[None] | None = None
        self._dirty: list[Call] = []
        self._flush_scheduled = False
        self._preface = b""  # the first bytes, until they are known to be HTTP/2's preface
        self._checked = False
        self._handshake_timer: asyncio.TimerHandle | None = None
        self._goaway: bytes | None = None  # a graceful GOAWAY to send with the next flush
        self.draining = False  # GOAWAY sent or received: no new calls, close once the last one ends
        self.closed = asyncio.Event()

    # ------------------------------------------------------------------ asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.peer = grpc_peer(transport.get_extra_info("peername"))
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            # a call's answer is one write; Nagle would hold its tail for the client's ACK
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ssl_object: ssl.SSLObject | None = transport.get_extra_info("ssl_object")
        if ssl_object is not None and ssl_object.selected_alpn_protocol() != "h2":
            log.info("TLS client without ALPN h2 refused", peer=self.peer)
            transport.close()
            return
        self._handshake_timer = self.loop.call_later(self.limits.handshake_timeout_s, self._handshake_expired)
        # our SETTINGS go out at once, not after the client's preface: grpc-core counts the wait for them against
        # its connect timeout (300 ms for oms' channels), so the handshake must not cost a round trip more
        self._initiate()

    def data_received(self, data: bytes) -> None:
        if not self._checked and not self._check_preface(data):
            return
        if self._preface:
            data, self._preface = self._preface, b""
        try:
            events = self.conn.receive_data(data)
        except ProtocolError as exc:
            # h2 has queued the GOAWAY that says why: send it and drop the connection
            log.info("HTTP/2 protocol error from the client", peer=self.peer, error=repr(exc))
            self._write_pending()
            self.close()
            return
        try:
            for event in events:
                self._on_event(event)
        except Exception as exc:  # never let one connection's surprise reach the loop: drop it alone
            log.exception("connection failed", peer=self.peer, error=repr(exc))
            self.close()
            return
        self.schedule_flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
        for call in list(self.calls.values()):
            call.on_reset()
        self.calls.clear()
        self.transport = None
        self.resume_writing()
        self.closed.set()
        self.dispatcher.connection_closed(self)

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self._resumed = None
        if self._dirty:
            self.schedule_flush()

    async def wait_resumed(self) -> None:
        if self._resumed is None:
            self._resumed = self.loop.create_future()
        await self._resumed

    # ------------------------------------------------------------------ events
    def _check_preface(self, data: bytes) -> bool:
        """HTTP/2 or not: anything else (HTTP/1.1, garbage) gets a plain refusal and the connection is closed."""
        self._preface += data
        seen = self._preface[: len(PREFACE)]
        if not PREFACE.startswith(seen):
            log.info("not an HTTP/2 client: refused", peer=self.peer, first=bytes(seen[:16]))
            if self.transport is not None:
                self.transport.write(HTTP1_REFUSAL)
            self.close()
            return False
        if len(seen) < len(PREFACE):
            return False
        self._checked = True
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        return True

    def _handshake_expired(self) -> None:
        self._handshake_timer = None
        log.info("no HTTP/2 preface in time: closed", peer=self.peer)
        self.close()

    def _initiate(self) -> None:
        conn = self.conn
        conn.initiate_connection()
        # h2 applies these when the client acknowledges them, before the client may rely on them
        conn.update_settings(
            {
                SettingCodes.MAX_CONCURRENT_STREAMS: self.limits.max_concurrent_streams,
                SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
                SettingCodes.MAX_FRAME_SIZE: MAX_FRAME,
                SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST,
                SettingCodes.ENABLE_PUSH: 0,
            }
        )
        # h2 raises its frame limit only on the next receive_data after the ACK: a client that sends the ACK and a
        # large DATA frame in one segment would be refused. Accepting large frames early is harmless.
        conn.max_inbound_frame_size = MAX_FRAME
        conn.increment_flow_control_window(CONNECTION_WINDOW - conn.inbound_flow_control_window)
        self._write_pending()

    def _on_event(self, event: Event) -> None:
        if isinstance(event, DataReceived):
            stream_id = event.stream_id or 0
            if event.flow_controlled_length:
                # given back at once: a unary request is consumed whole, a stream's messages are queued for it
                self.conn.acknowledge_received_data(event.flow_controlled_length, stream_id)
            call = self.calls.get(stream_id)
            if call is not None and event.data:
                call.on_data(event.data)
        elif isinstance(event, RequestReceived):
            self._on_request(event.stream_id or 0, event.headers or [])
        elif isinstance(event, StreamEnded):
            call = self.calls.get(event.stream_id or 0)
            if call is not None:
                call.on_end()
        elif isinstance(event, WindowUpdated | RemoteSettingsChanged):
            stream_id = getattr(event, "stream_id", 0) or 0
            targets = [self.calls[stream_id]] if stream_id in self.calls else list(self.calls.values())
            for call in targets:
                if call.out and not call.dirty:
                    self.mark_dirty(call)
        elif isinstance(event, StreamReset):
            call = self.calls.get(event.stream_id or 0)
            if call is not None:
                call.on_reset()
        elif isinstance(event, ConnectionTerminated):
            # the client's GOAWAY: h2 sends nothing more on this connection, so the calls on it are over
            self.draining = True
            for call in list(self.calls.values()):
                call.on_reset()
            self.close()

    def _on_request(self, stream_id: int, headers: list[tuple[bytes, bytes]]) -> None:
        if self.draining:
            self.conn.reset_stream(stream_id, ErrorCodes.REFUSED_STREAM)  # after our GOAWAY: retry elsewhere
            return
        if not headers_valid(headers):
            self.conn.reset_stream(stream_id, ErrorCodes.PROTOCOL_ERROR)  # a malformed request (RFC 9113 §8.1.1)
            return
        fields = dict(headers)
        if fields.get(b":method") != b"POST":
            self.conn.send_headers(stream_id, [(b":status", b"405")], end_stream=True)
            return
        content_type = fields.get(b"content-type", b"")
        if content_type != GRPC_CONTENT_TYPE and not content_type.startswith(GRPC_CONTENT_SUBTYPES):
            self.conn.send_headers(stream_id, [(b":status", b"415")], end_stream=True)
            return
        method = fields.get(b":path", b"").decode("latin-1")
        try:
            metadata = decode_metadata(headers)
            timeout = fields.get(b"grpc-timeout")
            timeout_s = parse_grpc_timeout(timeout) if timeout is not None else None
            encoding = decompressor(fields.get(b"grpc-encoding"))
            handler = self.dispatcher.lookup(method, metadata)
            if handler is None:
                raise WireError(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")
        except WireError as exc:
            self.conn.send_headers(stream_id, RESPONSE_HEADERS + trailers(exc.code, exc.details), end_stream=True)
            return
        self.calls[stream_id] = Call(self, stream_id, method, handler, metadata, timeout_s, encoding)

    # ------------------------------------------------------------------ output
    def mark_dirty(self, call: Call) -> None:
        call.dirty = True
        self._dirty.append(call)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self.paused:  # else the socket is behind: the dirty calls wait for resume_writing
            dirty, self._dirty = self._dirty, []
            for call in dirty:
                call.pump()
        self._write_pending()
        if self.draining and not self.calls:
            self.close()

    def _write_pending(self) -> None:
        data = self.conn.data_to_send()
        if self._goaway is not None:
            data += self._goaway
            self._goaway = None
        if data and self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def forget(self, call: Call) -> None:
        self.calls.pop(call.stream_id, None)

    # ------------------------------------------------------------------ shutdown
    def goaway(self) -> None:
        """A graceful GOAWAY: calls already started go on; the connection closes after the last one.

        Built by hand: h2 closes its state machine on sending GOAWAY, which would refuse the running calls' answers.
        """
        if self.draining:
            return
        self.draining = True
        frame = GoAwayFrame(0)
        frame.last_stream_id = self.conn.highest_inbound_stream_id
        frame.error_code = ErrorCodes.NO_ERROR
        self._goaway = frame.serialize()
        self.schedule_flush()

    def cancel_calls(self) -> None:
        """Past the grace: every call still running is cancelled (its client sees UNAVAILABLE)."""
        for call in list(self.calls.values()):
            if call.task is not None and not call.task.done():
                call.task.cancel()
            else:
                call.on_reset()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


def grpc_peer(address: object) -> str:
    """gRPC's peer string: ``ipv4:host:port`` or ``ipv6:[host]:port`` (an IPv4-mapped IPv6 address as IPv4)."""
    if not isinstance(address, tuple) or len(address) < 2:
        return "unix:" if address is None else f"unix:{address}"
    host, port = str(address[0]), address[1]
    if ":" in host:
        if host.startswith("::ffff:") and "." in host:
            return f"ipv4:{host[7:]}:{port}"
        return f"ipv6:[{host}]:{port}"
    return f"ipv4:{host}:{port}"
