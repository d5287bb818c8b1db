"""One gRPC call on an HTTP/2 stream: reads its requests, runs its handler in a task, and buffers its answer until the
connection's once-per-loop-turn flush (protocol.py), so a call's 32 messages cost one socket write, not 32."""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import grpc
from h2.errors import ErrorCodes
from h2.exceptions import H2Error

from orbitmq.h2grpc.context import H2ServicerContext
from orbitmq.h2grpc.wire import RESPONSE_HEADERS, MessageReader, WireError, prefix, trailers
from orbitmq.logging import get_logger
from orbitmq.remoting.grpc_frames import AbortError, Metadata

if TYPE_CHECKING:
    from orbitmq.h2grpc.protocol import H2GrpcProtocol

log = get_logger("h2grpc.call")

# A writer waits when its call holds this much the peer's window has not taken yet, until it is under LOW_WATER.
HIGH_WATER = 1 << 20
LOW_WATER = 1 << 18


class CallEndedError(Exception):
    """A write to a call that has already ended (its status was sent, the client cancelled, or the deadline passed)."""


class RequestStream:
    """The request messages of a client-streaming call, as the async iterator grpc.aio hands its handlers."""

    __slots__ = ("_deserialize", "_ended", "_items", "_waiter")

    def __init__(self, deserialize: Callable[[bytes], Any] | None) -> None:
        self._deserialize = deserialize
        self._items: deque[bytes] = deque()
        self._ended = False
        self._waiter: asyncio.Future[None] | None = None

    def push(self, message: bytes) -> None:
        self._items.append(message)
        self._wake()

    def end(self) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        while not self._items:
            if self._ended:
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        raw = self._items.popleft()
        return _deserialize(self._deserialize, raw)


def _deserialize(deserialize: Callable[[bytes], Any] | None, raw: bytes) -> Any:
    if deserialize is None:
        return raw
    try:
        return deserialize(raw)
    except Exception as exc:  # grpcio's answer to a request its deserializer refuses
        raise WireError(grpc.StatusCode.INTERNAL, f"Exception deserializing request: {exc}") from exc


class Call:
    """A stream's call from its request headers until its trailers are handed to h2 or the stream is reset."""

    __slots__ = (
        "_callbacks",
        "_drained",
        "_end",
        "_messages",
        "_timer",
        "cancelled",
        "closed",
        "context",
        "dirty",
        "handler",
        "headers_sent",
        "method",
        "out",
        "proto",
        "reader",
        "remote_closed",
        "requests",
        "stream_id",
        "task",
    )

    def __init__(
        self,
        proto: H2GrpcProtocol,
        stream_id: int,
        method: str,
        handler: grpc.RpcMethodHandler,
        metadata: Metadata,
        timeout_s: float | None,
        encoding: str | None,
    ) -> None:
        self.proto = proto
        self.stream_id = stream_id
        self.method = method
        self.handler = handler
        self.reader = MessageReader(proto.limits.max_receive, encoding)
        self.context = H2ServicerContext(self, metadata, proto.peer, timeout_s)
        self.requests = RequestStream(handler.request_deserializer) if handler.request_streaming else None
        self._messages: list[bytes] = []
        self.out = bytearray()  # framed response bytes not yet handed to h2
        self.headers_sent = False
        self._end: list[tuple[bytes, bytes]] | None = None  # trailers, sent once ``out`` has drained
        self.closed = False  # trailers handed to h2, or the stream reset: nothing more goes out
        self.cancelled = False
        self.remote_closed = False
        self.dirty = False
        self.task: asyncio.Task[None] | None = None
        self._drained: asyncio.Future[None] | None = None
        self._callbacks: list[Callable[[H2ServicerContext], None]] | None = None
        self._timer = proto.loop.call_later(timeout_s, self._expire) if timeout_s is not None else None
        if self.requests is not None:
            self._start()

    # ------------------------------------------------------------------ the request side (protocol events)
    def on_data(self, data: bytes) -> None:
        if self._end is not None or self.closed:
            return  # already answered (e.g. refused as too large): the rest of the request is dropped
        try:
            messages = self.reader.feed(data)
        except WireError as exc:
            self.fail(exc.code, exc.details)
            return
        if self.requests is not None:
            for message in messages:
                self.requests.push(message)
        else:
            self._messages.extend(messages)

    def on_end(self) -> None:
        self.remote_closed = True
        if self._end is not None or self.closed:
            return
        if self.reader.pending:
            self.fail(grpc.StatusCode.INTERNAL, "the request ended inside a message")
        elif self.requests is not None:
            self.requests.end()
        elif len(self._messages) != 1:
            self.fail(grpc.StatusCode.INTERNAL, f"a unary request holds one message, not {len(self._messages)}")
        else:
            self._start()

    def on_reset(self) -> None:
        """The client reset the stream or the connection is gone: the handler is cancelled, nothing goes out."""
        if self.closed:
            return
        self.cancelled = True
        self.out.clear()
        if self.requests is not None:
            self.requests.end()  # a task of the handler's own reading the requests is not left waiting
        self._cancel_task()
        self._close()

    # ------------------------------------------------------------------ the handler
    def _start(self) -> None:
        self.task = self.proto.loop.create_task(self._run())

    async def _run(self) -> None:
        handler, context = self.handler, self.context
        try:
            if handler.unary_unary is not None:
                self._respond(await _awaited(handler.unary_unary(self._request(), context)))
            elif handler.unary_stream is not None:
                await self._stream_out(handler.unary_stream(self._request(), context))
            elif handler.stream_unary is not None:
                self._respond(await _awaited(handler.stream_unary(self.requests, context)))
            elif handler.stream_stream is not None:
                await self._stream_out(handler.stream_stream(self.requests, context))
        except AbortError as exc:
            self.finish(exc.code, exc.details)
        except WireError as exc:
            self.finish(exc.code, exc.details)
        except CallEndedError:
            pass  # the call ended under the handler (reset, deadline): its status is already decided
        except asyncio.CancelledError:
            # cancelled by a reset or the deadline (already answered) or by the server stopping past its grace
            self.finish(grpc.StatusCode.UNAVAILABLE, "the server is stopping")
        except Exception as exc:
            code = context.code()
            if code is None or code is grpc.StatusCode.OK:
                # grpc_guard and guarded() answer every expected failure: what reaches here is a bug, with its trace
                log.exception("handler failed", method=self.method, error=repr(exc))
                self.finish(grpc.StatusCode.UNKNOWN, f"Unexpected {type(exc)}: {exc}")
            else:  # a generated servicer's "not implemented": set_code, then raise
                self.finish(code, context.details())
        else:
            self.finish(context.code() or grpc.StatusCode.OK, context.details())

    def _request(self) -> Any:
        return _deserialize(self.handler.request_deserializer, self._messages[0])

    def _respond(self, response: Any) -> None:
        code = self.context.code()
        if code is not None and code is not grpc.StatusCode.OK:
            return  # the status set by the handler goes out alone, as grpcio does for a failed unary call
        self._append(response)

    async def _stream_out(self, result: Any) -> None:
        if inspect.isasyncgen(result):
            async for item in result:
                await self.write(item)
        else:  # a coroutine writing through context.write
            await _awaited(result)

    # ------------------------------------------------------------------ the response side
    async def write(self, message: Any) -> None:
        """``context.write``: returns at once unless the peer is this far behind (then waits for it)."""
        self._append(message)
        if len(self.out) >= HIGH_WATER or self.proto.paused:
            await self._writable()

    def _append(self, message: Any) -> None:
        if self.closed or self._end is not None:
            raise CallEndedError(f"{self.method}: the call has ended")
        serialize = self.handler.response_serializer
        data = serialize(message) if serialize is not None else message
        if len(data) > self.proto.limits.max_send:
            raise WireError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"Sent message larger than max ({len(data)} vs. {self.proto.limits.max_send})",
            )
        out = self.out
        out += prefix(len(data))
        out += data
        if not self.dirty:
            self.proto.mark_dirty(self)

    async def _writable(self) -> None:
        while not self.closed and (len(self.out) >= LOW_WATER or self.proto.paused):
            if self.proto.paused:
                await self.proto.wait_resumed()
                continue
            self._drained = self.proto.loop.create_future()
            await self._drained
        if self.closed:
            raise CallEndedError(f"{self.method}: the call has ended")

    def finish(self, code: grpc.StatusCode, details: str = "") -> None:
        """End the call with this status once what was written has gone out (the handler's own ending)."""
        if self._end is not None or self.closed:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._end = trailers(code, details, self.context.trailing_metadata())
        if not self.dirty:
            self.proto.mark_dirty(self)

    def abort(self, code: grpc.StatusCode, details: str) -> None:
        """``context.abort``: the status goes out after what was written; a handler in another task is cancelled."""
        self.finish(code, details)
        self._cancel_task()

    def fail(self, code: grpc.StatusCode, details: str) -> None:
        """End the call now with this status (a refused request, the deadline): the handler is cancelled and what
        it wrote but did not go out is dropped."""
        if self.closed:
            return
        self.cancelled = code is grpc.StatusCode.DEADLINE_EXCEEDED
        self._cancel_task()
        if self.headers_sent and self.out:
            # part of a message may be out already: trailers now would cut it; the client sees the stream reset
            self.out.clear()
            self._reset(ErrorCodes.CANCEL)
            return
        self.out.clear()
        self._end = None
        self.finish(code, details)

    def _expire(self) -> None:
        self._timer = None
        self.fail(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")

    def pump(self) -> None:
        """Hand h2 what the windows allow, then the trailers once everything is out (the connection's flush)."""
        self.dirty = False
        if self.closed:
            return
        conn = self.proto.conn
        stream_id = self.stream_id
        out = self.out
        try:
            if out:
                if not self.headers_sent:
                    conn.send_headers(stream_id, RESPONSE_HEADERS)
                    self.headers_sent = True
                size = min(conn.local_flow_control_window(stream_id), len(out))
                if size > 0:
                    frame_size = conn.max_outbound_frame_size
                    if size <= frame_size:
                        conn.send_data(stream_id, bytes(out[:size]))
                    else:
                        for start in range(0, size, frame_size):
                            conn.send_data(stream_id, bytes(out[start : min(start + frame_size, size)]))
                    del out[:size]
            if len(out) < LOW_WATER and self._drained is not None:
                if not self._drained.done():
                    self._drained.set_result(None)
                self._drained = None
            if not out and self._end is not None:
                if self.headers_sent:
                    conn.send_headers(stream_id, self._end, end_stream=True)
                else:  # trailers-only: nothing was written
                    conn.send_headers(stream_id, RESPONSE_HEADERS + self._end, end_stream=True)
                if not self.remote_closed:
                    # answered before the client finished sending: it may stop (RFC 9113 §8.1)
                    conn.reset_stream(stream_id, ErrorCodes.NO_ERROR)
                self._close()
        except H2Error as exc:
            # the stream or the connection closed under us (a reset, a GOAWAY from the client)
            log.debug("stream closed before its answer", method=self.method, error=repr(exc))
            self.cancelled = True
            self._cancel_task()
            self._close()

    def _reset(self, code: ErrorCodes) -> None:
        try:
            self.proto.conn.reset_stream(self.stream_id, code)
        except H2Error as exc:
            log.debug("stream already closed", method=self.method, error=repr(exc))
        self.proto.schedule_flush()
        self._close()

    def _cancel_task(self) -> None:
        task = self.task
        if task is not None and not task.done() and task is not asyncio.current_task():
            task.cancel()

    def _close(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._drained is not None and not self._drained.done():
            self._drained.set_result(None)
        self.proto.forget(self)
        callbacks, self._callbacks = self._callbacks, None
        for callback in callbacks or ():
            try:
                callback(self.context)
            except Exception as exc:
                log.warning("done callback failed", method=self.method, error=repr(exc))

    def add_done_callback(self, callback: Callable[[H2ServicerContext], None]) -> None:
        if self.closed:
            callback(self.context)
            return
        if self._callbacks is None:
            self._callbacks = []
        self._callbacks.append(callback)


async def _awaited(result: Any) -> Any:
    return await result if inspect.isawaitable(result) else result
