"""The ``grpc.aio.ServicerContext`` a handler gets on the HTTP/2 server: the frame transport's context plus what
a stream needs (``write``, status and trailers set by the handler, cancellation and done callbacks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import grpc

from orbitmq.remoting.grpc_frames import AbortError, FrameServicerContext, Metadata

if TYPE_CHECKING:
    from orbitmq.h2grpc.call import Call


class H2ServicerContext(FrameServicerContext):
    """Metadata, deadline and ``abort`` as on the frame transport; the rest is the call's (orbitmq/h2grpc/call.py)."""

    __slots__ = ("_call", "_code", "_details", "_grpc_peer", "_trailing")

    def __init__(self, call: Call, metadata: Metadata, peer: str, timeout_s: float | None) -> None:
        super().__init__(metadata, peer, timeout_s)
        self._call = call
        self._grpc_peer = peer
        self._code: grpc.StatusCode | None = None
        self._details = ""
        self._trailing: Metadata = ()

    def peer(self) -> str:
        return self._grpc_peer  # already in gRPC's form ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000")

    async def write(self, message: Any) -> None:
        await self._call.write(message)

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Metadata = ()) -> NoReturn:
        if trailing_metadata:
            self._trailing = tuple(trailing_metadata)
        # the call ends now, whichever task aborts (the guard aborts from the task reading a stream's requests)
        self._call.abort(code, details)
        raise AbortError(code, details)

    def set_code(self, code: grpc.StatusCode) -> None:
        self._code = code

    def set_details(self, details: str) -> None:
        self._details = details

    def set_trailing_metadata(self, trailing_metadata: Metadata) -> None:
        self._trailing = tuple(trailing_metadata)

    def code(self) -> grpc.StatusCode | None:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Metadata:
        return self._trailing

    def cancelled(self) -> bool:
        return self._call.cancelled

    def done(self) -> bool:
        return self._call.closed

    def add_done_callback(self, callback: Callable[[H2ServicerContext], None]) -> None:
        self._call.add_done_callback(callback)
