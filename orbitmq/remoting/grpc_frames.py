"""gRPC unary calls carried in RemotingCommand frames: OrbitMQ's own fast transport (docs/remoting.md).

The request and response protobufs travel as the frame bodies; the method path, the deadline and the v2 metadata
headers as ext fields. The server side dispatches to the very handlers registered with the gRPC server (the same
guards, ACL and metrics), so a call means the same thing on both transports; only the per-call cost differs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, NoReturn

import grpc

from orbitmq.limits import MAX_REMOTING_FRAME_BYTES
from orbitmq.logging import get_logger
from orbitmq.remoting.codec import RemotingCommand
from orbitmq.remoting.codes import RPC_ONEWAY, ResponseCode, SerializeType

log = get_logger("remoting.frames")

METHOD_FIELD = "rpc"  # "/package.Service/Method", as gRPC names it
TIMEOUT_FIELD = "timeout"  # the caller's deadline, ms from sending
CANCEL_FIELD = "cancel"  # on a GRPC_CANCEL frame: the opaque of the call given up
STATUS_FIELD = "grpc-status"  # on an error answer: the grpc.StatusCode value the gRPC transport would have given
# Room for the header next to a body near the limit: a frame's body may take this much less than the frame limit.
MAX_FRAME_BODY_BYTES = MAX_REMOTING_FRAME_BYTES - 64 * 1024
_STATUS_BY_VALUE = {s.value[0]: s for s in grpc.StatusCode}


class OrbitRequestCode(IntEnum):
    """OrbitMQ's own request codes, kept clear of RocketMQ's (which fit below 9000 in the 16-bit binary header)."""

    GRPC_UNARY = 9100
    GRPC_CANCEL = 9101  # oneway: stop the handler of a call the caller gave up on (gRPC's cancellation)


def status_code(value: int) -> grpc.StatusCode:
    return _STATUS_BY_VALUE.get(value, grpc.StatusCode.UNKNOWN)


def request_frame(
    method: str, body: bytes, metadata: Sequence[tuple[str, str]], timeout_ms: int, opaque: int
) -> RemotingCommand:
    ext = {METHOD_FIELD: method, TIMEOUT_FIELD: str(timeout_ms)}
    ext.update(metadata)
    return RemotingCommand(
        int(OrbitRequestCode.GRPC_UNARY), opaque, ext_fields=ext, body=body, serialize_type=SerializeType.ROCKETMQ
    )


def cancel_frame(opaque: int, cancelled: int) -> RemotingCommand:
    return RemotingCommand(
        int(OrbitRequestCode.GRPC_CANCEL),
        opaque,
        RPC_ONEWAY,
        ext_fields={CANCEL_FIELD: str(cancelled)},
        serialize_type=SerializeType.ROCKETMQ,
    )


class AbortError(Exception):
    """``context.abort`` inside a handler: the call ends with this gRPC status."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


# a call's metadata as grpcio hands it to handlers: ``-bin`` values as bytes (orbitmq/h2grpc), the rest as text
Metadata = tuple[tuple[str, str | bytes], ...]


class FrameServicerContext:
    """What the broker's handlers read of a ``grpc.aio.ServicerContext``: metadata, peer, deadline, abort."""

    __slots__ = ("_deadline", "_metadata", "_peer")

    def __init__(self, metadata: Metadata, peer: str, timeout_s: float | None) -> None:
        self._metadata = metadata
        self._peer = peer
        self._deadline = time.monotonic() + timeout_s if timeout_s is not None else None

    def invocation_metadata(self) -> Metadata:
        return self._metadata

    def peer(self) -> str:
        return f"ipv4:{self._peer}"  # the form gRPC gives, which orbitmq.v2.metadata parses

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    async def abort(self, code: grpc.StatusCode, details: str = "") -> NoReturn:
        raise AbortError(code, details)


@dataclass(frozen=True)
class _Unary:
    deserialize: Any
    serialize: Any
    behaviour: Any


class GrpcFrameDispatcher:
    """Answers GRPC_UNARY frames with the unary handlers of the given gRPC generic handlers."""

    def __init__(self, handlers: Sequence[grpc.GenericRpcHandler]) -> None:
        self._handlers = tuple(handlers)
        self._methods: dict[str, _Unary | None] = {}

    def _resolve(self, method: str) -> _Unary | None:
        if method in self._methods:
            return self._methods[method]
        found: _Unary | None = None
        details = CallDetails(method, ())
        for generic in self._handlers:
            handler = generic.service(details)
            if handler is not None:
                if handler.unary_unary is not None:  # streams stay on gRPC
                    found = _Unary(handler.request_deserializer, handler.response_serializer, handler.unary_unary)
                break
        self._methods[method] = found
        return found

    async def __call__(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        ext = cmd.ext_fields
        method = ext.get(METHOD_FIELD, "")
        unary = self._resolve(method)
        if unary is None:
            return _error(cmd, grpc.StatusCode.UNIMPLEMENTED, f"method {method!r} is not served over frames")
        timeout_ms = ext.get(TIMEOUT_FIELD, "")
        timeout_s = int(timeout_ms) / 1000 if timeout_ms.isdigit() else None
        metadata = tuple((k, v) for k, v in ext.items() if k != METHOD_FIELD and k != TIMEOUT_FIELD)
        context = FrameServicerContext(metadata, peer, timeout_s)
        request = unary.deserialize(cmd.body) if unary.deserialize is not None else cmd.body
        try:
            if timeout_s is None:
                response = await unary.behaviour(request, context)
            elif timeout_s <= 0:
                raise TimeoutError  # as asyncio.wait_for with no time left: the handler does not start
            else:
                # in this task: asyncio.wait_for would run the handler in a task of its own, one more per call
                async with asyncio.timeout(timeout_s):
                    response = await unary.behaviour(request, context)
        except AbortError as exc:
            return _error(cmd, exc.code, exc.details)
        except TimeoutError:
            return _error(cmd, grpc.StatusCode.DEADLINE_EXCEEDED, f"{method}: deadline of {timeout_ms} ms exceeded")
        body = unary.serialize(response) if unary.serialize is not None else response
        if len(body) > MAX_FRAME_BODY_BYTES:
            return _error(
                cmd,
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{method}: the response of {len(body)} bytes exceeds the frame limit of {MAX_FRAME_BODY_BYTES}",
            )
        answer = cmd.response(ResponseCode.SUCCESS)
        answer.body = body
        return answer


@dataclass(frozen=True)
class CallDetails:
    """The two fields of ``grpc.HandlerCallDetails`` a generic handler looks at."""

    method: str
    invocation_metadata: Metadata


def _error(cmd: RemotingCommand, code: grpc.StatusCode, details: str) -> RemotingCommand:
    rc = ResponseCode.REQUEST_CODE_NOT_SUPPORTED if code is grpc.StatusCode.UNIMPLEMENTED else ResponseCode.SYSTEM_ERROR
    return cmd.response(rc, details, **{STATUS_FIELD: code.value[0]})
