"""The broker's gRPC port on asyncio and hyper-h2 instead of grpcio: same handlers, one socket write per loop turn.

wire (gRPC framing, trailers, metadata) · context (the ServicerContext) · call (one stream) · protocol (one
connection) · server (``H2Server``, the ``grpc.aio.Server`` surface the broker uses). docs/broker.md explains why.
"""

from orbitmq.h2grpc.server import H2Server

__all__ = ["H2Server"]
