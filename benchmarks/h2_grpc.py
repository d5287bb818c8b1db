"""A minimal gRPC server on hyper-h2 and asyncio, for measuring what gRPC's wire protocol costs without grpc-python.

Unary requests only (unary-unary and unary-stream calls: ReceiveMessage, AckMessage, QueryRoute); a method without a
handler, Telemetry's bidi stream among them, is answered UNIMPLEMENTED at its headers. A handler gets the serialized
request and returns every serialized response of the call at once; the server frames them all (gRPC's 5-byte
prefix), sends them with one ``send_data`` per flow-control chunk and flushes the connection with one transport
write per received batch of frames. That is the point of the prototype: grpc-python pays one core batch operation
(and a wake-up) per streamed message, this pays one write per call.

Correct HTTP/2 as far as the calls above need: the peer's flow-control windows are honoured (data that does not fit
waits for a WINDOW_UPDATE), SETTINGS and PINGs are acknowledged (h2 queues the ACKs; every received batch of frames
is followed by a flush), responses carry ``:status 200`` and ``content-type: application/grpc`` and end with
``grpc-status`` trailers. Not implemented, as a broker would need: TLS/ALPN, client or bidi streaming, compression
(a compressed request is refused with UNIMPLEMENTED), ``grpc-timeout`` deadlines, keepalive pings of its own.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import hyperframe.frame
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    RequestReceived,
    StreamEnded,
    StreamReset,
    WindowUpdated,
)
from h2.exceptions import ProtocolError, StreamClosedError
from h2.settings import SettingCodes

log = logging.getLogger(__name__)

# serialized request -> serialized responses, in order (one for a unary call)
Handler = Callable[[memoryview], Sequence[bytes]]

GRPC_OK = 0
GRPC_INTERNAL = 13
GRPC_UNIMPLEMENTED = 12
PREFIX = 5
RESPONSE_HEADERS = [(b":status", b"200"), (b"content-type", b"application/grpc")]
# A large connection receive window keeps requests from ever waiting on the connection's WINDOW_UPDATEs.
RECEIVE_WINDOW = 1 << 24
# Large requests (SendBatch-sized) stall on WINDOW_UPDATE round trips with the default 64 KB stream window; grpclib's
# default is 4 MB too. (A larger MAX_FRAME_SIZE would cut h2's per-frame work, but h2 4.4 applies an acknowledged one
# only from its next read, and fails the connection when the ACK and the larger frames arrive in one.)
STREAM_RECEIVE_WINDOW = 4 << 20


def frame(message: bytes) -> bytes:
    """One gRPC length-prefixed message: uncompressed flag, 4-byte big-endian length, the message."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


def unframe_one(body: bytes | bytearray) -> memoryview:
    """The single message of a unary request body, not copied (protobuf parses a memoryview); ``ValueError`` when
    it is not exactly one uncompressed message."""
    if len(body) < PREFIX:
        raise ValueError("request shorter than a gRPC message prefix")
    if body[0] != 0:
        raise NotImplementedError("compressed requests are not supported")
    size = int.from_bytes(body[1:PREFIX], "big")
    if len(body) != PREFIX + size:
        raise ValueError(f"a unary request must hold one message: {len(body)} bytes for a {size}-byte message")
    return memoryview(body)[PREFIX:]


def trailers(code: int, message: str = "") -> list[tuple[bytes, bytes]]:
    out = [(b"grpc-status", str(code).encode())]
    if message:
        # grpc-message is percent-encoded; the refusals here are plain ASCII, so only what HTTP/2 forbids is escaped
        out.append((b"grpc-message", message.replace("%", "%25").replace("\n", "%0A").encode()))
    return out


@dataclass
class _Call:
    path: bytes
    body: bytearray = field(default_factory=bytearray)
    # response bytes not yet handed to h2 (waiting for the client's flow-control window)
    pending: bytes = b""
    sent_headers: bool = False


class GrpcH2Protocol(asyncio.Protocol):
    """One HTTP/2 connection serving ``handlers`` by gRPC method path (``/package.Service/Method``)."""

    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        self.handlers = {path.encode(): h for path, h in handlers.items()}
        self.conn = H2Connection(config=H2Configuration(client_side=False, header_encoding=None))
        self.calls: dict[int, _Call] = {}
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            # the response of a call goes out in one write; Nagle would hold its tail for the client's ACK
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn.initiate_connection()
        self.conn.increment_flow_control_window(RECEIVE_WINDOW)
        self.conn.update_settings({SettingCodes.INITIAL_WINDOW_SIZE: STREAM_RECEIVE_WINDOW})
        self._flush()

    def data_received(self, data: bytes) -> None:
        try:
            events = self.conn.receive_data(data)
        except ProtocolError as e:
            # h2 has queued the GOAWAY that says why; send it and drop the connection
            log.warning("HTTP/2 protocol error from the client: %s", e)
            self._flush()
            self._close()
            return
        for event in events:
            self._on_event(event)
        self._flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.calls.clear()
        self.transport = None

    def _on_event(self, event: Event) -> None:
        if isinstance(event, RequestReceived):
            path = dict(event.headers or ()).get(b":path", b"")
            assert event.stream_id is not None
            if path not in self.handlers:
                # answered at once, as grpcio does: a bidi call (Telemetry) never ends its side of the stream
                self._trailers_only(
                    event.stream_id, GRPC_UNIMPLEMENTED, f"unknown method {path.decode(errors='replace')}"
                )
                return
            self.calls[event.stream_id] = _Call(path=path)
        elif isinstance(event, DataReceived):
            assert event.stream_id is not None and event.data is not None
            call = self.calls.get(event.stream_id)
            if call is not None:
                call.body += event.data
            # give the window back at once: requests are consumed whole when the stream ends
            self.conn.acknowledge_received_data(event.flow_controlled_length or 0, event.stream_id)
        elif isinstance(event, StreamEnded):
            assert event.stream_id is not None
            if event.stream_id in self.calls:
                self._answer(event.stream_id)
        elif isinstance(event, WindowUpdated):
            # 0: the connection's window grew, which any waiting call may use
            ids = list(self.calls) if not event.stream_id else [event.stream_id]
            for stream_id in ids:
                self._send_pending(stream_id)
        elif isinstance(event, StreamReset):
            assert event.stream_id is not None
            self.calls.pop(event.stream_id, None)
        elif isinstance(event, ConnectionTerminated):
            self._close()

    def _answer(self, stream_id: int) -> None:
        call = self.calls[stream_id]
        try:
            responses = self.handlers[call.path](unframe_one(call.body))
        except NotImplementedError as e:
            self._trailers_only(stream_id, GRPC_UNIMPLEMENTED, str(e))
            return
        except Exception as e:  # a failed handler answers its call with INTERNAL, as grpcio does, and keeps serving
            log.exception("handler for %s failed", call.path)
            self._trailers_only(stream_id, GRPC_INTERNAL, f"{type(e).__name__}: {e}")
            return
        self.conn.send_headers(stream_id, RESPONSE_HEADERS)
        call.sent_headers = True
        call.pending = b"".join(frame(r) for r in responses)
        self._send_pending(stream_id)

    def _send_pending(self, stream_id: int) -> None:
        """Hand h2 as much of the call's response as the windows allow, then the trailers once all is out."""
        call = self.calls.get(stream_id)
        if call is None or not call.sent_headers:
            return
        data, sent = call.pending, 0
        try:
            while sent < len(data):
                room = min(self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size)
                if room <= 0:
                    break
                self.conn.send_data(stream_id, data[sent : sent + room])
                sent += room
            call.pending = data[sent:]
            if not call.pending:
                self.conn.send_headers(stream_id, trailers(GRPC_OK), end_stream=True)
                del self.calls[stream_id]
        except StreamClosedError:
            # the client reset or closed the stream meanwhile: nothing left to deliver
            self.calls.pop(stream_id, None)

    def _trailers_only(self, stream_id: int, code: int, message: str) -> None:
        self.conn.send_headers(stream_id, RESPONSE_HEADERS + trailers(code, message), end_stream=True)
        self.calls.pop(stream_id, None)

    def _flush(self) -> None:
        out = self.conn.data_to_send()
        if out and self.transport is not None:
            self.transport.write(out)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _data_repr(data: bytes | None) -> str:
    """hyperframe's ``_raw_data_repr`` without hex-encoding all of the data first."""
    return "None" if not data else f"<hex:{bytes(data[:10]).hex()}...>"


def patch_frame_repr() -> None:
    """h2 4.4 builds ``repr(frame)`` of every received frame for a trace log that is off by default, and hyperframe
    6.1's repr of a DATA frame hex-encodes all its data before cutting it to 20 characters: a fifth of this
    server's time on 1 MB requests. Same text, from the first 10 bytes only (an upstream fix to propose)."""
    hyperframe.frame._raw_data_repr = _data_repr


async def serve(
    handlers: Mapping[str, Handler], host: str = "127.0.0.1", port: int = 0, fast_repr: bool = True
) -> asyncio.Server:
    """Listen (port 0: any free one) and serve ``handlers`` on every connection; the caller reads the port.
    ``fast_repr``: :func:`patch_frame_repr` first (process-wide)."""
    if fast_repr:
        patch_frame_repr()
    loop = asyncio.get_running_loop()
    return await loop.create_server(lambda: GrpcH2Protocol(handlers), host, port)
