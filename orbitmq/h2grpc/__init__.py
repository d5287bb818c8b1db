"""The broker's gRPC port on asyncio and hyper-h2 instead of grpcio (grpcServer=h2, docs/broker.md): wire, context,
call (one stream), protocol (one connection, one socket write per loop turn) and server (``H2Server``)."""

from orbitmq.h2grpc.server import H2Server

__all__ = ["H2Server"]
