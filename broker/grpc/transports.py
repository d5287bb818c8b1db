"""``orbitmq.transport.Transports/Describe``: where this broker serves framed unary calls (the remoting listener).

OrbitMQ's client asks once per broker and then sends its unary calls over frames (``oms/client/frames.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from orbitmq.proto import transport_pb2, transport_pb2_grpc
from orbitmq.remoting.grpc_frames import MAX_FRAME_BODY_BYTES


class TransportsServicer(transport_pb2_grpc.TransportsServicer):
    def __init__(self, frames_addr: Callable[[], str]) -> None:
        self._frames_addr = frames_addr  # read per call: the listener starts after the gRPC services are added

    async def Describe(
        self, request: transport_pb2.DescribeTransportsRequest, context: Any
    ) -> transport_pb2.DescribeTransportsResponse:
        return transport_pb2.DescribeTransportsResponse(
            frames_addr=self._frames_addr(), max_frame_bytes=MAX_FRAME_BODY_BYTES
        )
