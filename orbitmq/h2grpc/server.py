"""``H2Server``: what the broker uses of ``grpc.aio.Server`` (handlers, ports, start, stop) on asyncio and h2; ports
are bound when added, as grpcio does, so a caller learns port 0's port at once, and served from ``start``."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass

import grpc

from orbitmq.h2grpc.protocol import H2GrpcProtocol, Limits
from orbitmq.logging import get_logger
from orbitmq.remoting.grpc_frames import CallDetails, Metadata

log = get_logger("h2grpc.server")

DEFAULT_MAX_MESSAGE = 4 * 1024 * 1024  # grpcio's default receive limit
DEFAULT_MAX_CONCURRENT_STREAMS = 4096  # per connection; each official client keeps a few long polls open
DEFAULT_HANDSHAKE_TIMEOUT_MS = 120_000  # grpc-core's: a connection that never says HTTP/2 is closed
_OPTION_LIMITS = {
    "grpc.max_receive_message_length": "max_receive",
    "grpc.max_send_message_length": "max_send",
    "grpc.max_concurrent_streams": "max_concurrent_streams",
    "grpc.server_handshake_timeout_ms": "handshake_timeout_ms",
}
# grpcio options with nothing to do here (no port sharing: bind refuses a taken port)
_IGNORED_OPTIONS = frozenset({"grpc.so_reuseport"})


@dataclass
class _Listener:
    sock: socket.socket
    ssl_context: ssl.SSLContext | None


class H2Server:
    """A drop-in for the parts of ``grpc.aio.Server`` the broker uses; calls are served on the running loop."""

    def __init__(self, options: Sequence[tuple[str, int]] = ()) -> None:
        values = {
            "max_receive": DEFAULT_MAX_MESSAGE,
            "max_send": -1,
            "max_concurrent_streams": 0,
            "handshake_timeout_ms": DEFAULT_HANDSHAKE_TIMEOUT_MS,
        }
        for name, value in options:
            if name in _OPTION_LIMITS:
                values[_OPTION_LIMITS[name]] = int(value)
            elif name not in _IGNORED_OPTIONS:
                raise ValueError(f"the HTTP/2 server does not support the gRPC option {name}")
        self.limits = Limits(
            max_receive=values["max_receive"],
            max_send=values["max_send"] if values["max_send"] >= 0 else 1 << 62,
            max_concurrent_streams=values["max_concurrent_streams"] or DEFAULT_MAX_CONCURRENT_STREAMS,
            handshake_timeout_s=values["handshake_timeout_ms"] / 1000,
        )
        self._generic: list[grpc.GenericRpcHandler] = []
        self._registered: dict[str, grpc.RpcMethodHandler] = {}
        self._listeners: list[_Listener] = []
        self._servers: list[asyncio.Server] = []
        self._connections: set[H2GrpcProtocol] = set()
        self._stopping = False
        self._terminated = asyncio.Event()

    # ------------------------------------------------------------------ handlers (as grpc_guard registers them)
    def add_generic_rpc_handlers(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._generic.extend(handlers)

    def add_registered_method_handlers(self, service: str, handlers: dict[str, grpc.RpcMethodHandler]) -> None:
        for name, handler in handlers.items():
            self._registered[f"/{service}/{name}"] = handler

    def lookup(self, method: str, metadata: Metadata) -> grpc.RpcMethodHandler | None:
        """A registered method first, then each generic handler in order (grpcio's precedence)."""
        handler = self._registered.get(method)
        if handler is not None:
            return handler
        details = CallDetails(method, metadata)
        for generic in self._generic:
            handler = generic.service(details)  # the two fields of HandlerCallDetails generic handlers read
            if handler is not None:
                return handler
        return None

    # ------------------------------------------------------------------ ports
    def add_insecure_port(self, address: str) -> int:
        return self._bind(address, None)

    def add_secure_port(self, address: str, ssl_context: ssl.SSLContext) -> int:
        """TLS: ``ssl_context`` from ``orbitmq.tls.TlsConfig.server_ssl_context`` (ALPN h2, the configured
        certificates); grpc.ServerCredentials are opaque and cannot serve here."""
        if not isinstance(ssl_context, ssl.SSLContext):
            raise TypeError("the HTTP/2 server takes an ssl.SSLContext, not grpc credentials")
        return self._bind(address, ssl_context)

    def _bind(self, address: str, ssl_context: ssl.SSLContext | None) -> int:
        host, port = _split(address)
        try:
            infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
            family, kind, proto, _, sockaddr = infos[0]
            sock = socket.socket(family, kind, proto)
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6 and sockaddr[0] == "::":
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)  # [::] takes IPv4 too, as grpc
                sock.bind(sockaddr)
                sock.listen(1024)
                sock.setblocking(False)
            except OSError:
                sock.close()
                raise
        except OSError as exc:
            # grpcio's error for the same case, which orbitmq.tls.add_port turns into a one-line ListenError
            raise RuntimeError(f"Failed to bind to address {address}: {exc}") from exc
        self._listeners.append(_Listener(sock, ssl_context))
        return int(sock.getsockname()[1])

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        for listener in self._listeners:
            server = await loop.create_server(
                lambda: self._new_connection(loop),
                sock=listener.sock,
                ssl=listener.ssl_context,
                backlog=1024,
                ssl_handshake_timeout=self.limits.handshake_timeout_s if listener.ssl_context is not None else None,
            )
            self._servers.append(server)

    def _new_connection(self, loop: asyncio.AbstractEventLoop) -> H2GrpcProtocol:
        proto = H2GrpcProtocol(self, self.limits, loop)
        self._connections.add(proto)
        if self._stopping:
            proto.goaway()
        return proto

    def connection_closed(self, proto: H2GrpcProtocol) -> None:
        self._connections.discard(proto)

    async def stop(self, grace: float | None) -> None:
        """Refuse new connections and calls (GOAWAY); calls in flight may finish within ``grace`` seconds, then
        are cancelled and every connection closed. ``None``: cancel at once, as grpcio."""
        if self._stopping:
            await self._terminated.wait()
            return
        self._stopping = True
        for server in self._servers:
            server.close()
        connections = list(self._connections)
        for proto in connections:
            proto.goaway()
        if grace and connections:
            # each connection closes itself once its last call has ended
            await asyncio.wait([asyncio.ensure_future(p.closed.wait()) for p in connections], timeout=grace)
        for proto in list(self._connections):
            proto.cancel_calls()
        if self._connections:
            await asyncio.sleep(0)  # let the cancelled handlers end their calls and the connections flush
            await asyncio.sleep(0)
        for proto in list(self._connections):
            proto.close()
        for server in self._servers:
            await server.wait_closed()
        self._terminated.set()

    async def wait_for_termination(self, timeout: float | None = None) -> bool:
        """True once ``stop`` has finished; False when ``timeout`` passed first (grpcio's contract)."""
        try:
            await asyncio.wait_for(self._terminated.wait(), timeout)
        except TimeoutError:
            return False
        return True


def _split(address: str) -> tuple[str, int]:
    """``host:port`` or ``[v6]:port`` as gRPC takes them."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise RuntimeError(f"Failed to bind to address {address}: not host:port")
    return host.strip("[]"), int(port)
