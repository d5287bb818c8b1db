"""The frame transport's calls without I/O: request frames out, answer frames in, answers read as gRPC would.

``FrameConnection`` (``frames.py``) drives it on the access point's loop; a caller with its own socket and event loop
(the Celery transport reads its receives on the worker's hub) drives it the same way, so what a framed call looks
like on the wire is said once, here.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import grpc

from orbitmq.remoting.codec import RemotingCommand, encode, encode_head, iter_frames
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.grpc_frames import MAX_FRAME_BODY_BYTES, STATUS_FIELD, cancel_frame, request_frame, status_code


class FrameRpcError(grpc.RpcError):
    """A failed framed call, read like ``grpc.aio.AioRpcError`` (``code()``, ``details()``)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class FrameCodec:
    """One connection's side of the frame protocol: numbers its requests (the opaque an answer is matched by) and
    cuts answers from the bytes read. ``FrameError`` from ``feed`` means the connection is unusable."""

    def __init__(self) -> None:
        self._opaque = itertools.count(1)
        self._buf = bytearray()  # the start of an answer not yet whole

    def request(
        self, method: str, body: bytes, metadata: Sequence[tuple[str, str]], timeout_s: float
    ) -> tuple[int, bytes]:
        """The opaque and the bytes of a unary call of ``method`` (``/package.Service/Method``)."""
        opaque, head = self.request_head(method, len(body), metadata, timeout_s)
        return opaque, head + body

    def request_head(
        self, method: str, body_len: int, metadata: Sequence[tuple[str, str]], timeout_s: float
    ) -> tuple[int, bytes]:
        """``request`` without the body: the opaque and the frame's bytes up to a body of ``body_len`` bytes, which
        the caller writes after them (from pieces: no request-sized join)."""
        if body_len > MAX_FRAME_BODY_BYTES:
            raise FrameRpcError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{method}: the request of {body_len} bytes exceeds the frame limit of {MAX_FRAME_BODY_BYTES}",
            )
        opaque = next(self._opaque)
        return opaque, encode_head(request_frame(method, b"", metadata, int(timeout_s * 1000), opaque), body_len)

    def cancel(self, opaque: int) -> bytes:
        """The frame that gives up call ``opaque`` (the broker stops its handler: a long poll takes nothing more)."""
        return encode(cancel_frame(next(self._opaque), opaque))

    def feed(self, data: bytes) -> list[RemotingCommand]:
        """The answers whole once ``data`` (the next bytes read) is added; the rest waits for the next read."""
        return list(iter_frames(self._buf, data))


def answer_body(answer: RemotingCommand, method: str) -> bytes:
    """The serialized response of a call, or the ``FrameRpcError`` the broker answered with."""
    if answer.code != ResponseCode.SUCCESS:
        raw = answer.ext_fields.get(STATUS_FIELD, "")
        code = status_code(int(raw)) if raw.isdigit() else grpc.StatusCode.UNKNOWN
        raise FrameRpcError(code, answer.remark or f"{method}: remoting code {answer.code}")
    return answer.body
