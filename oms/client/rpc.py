"""Unary v2 calls over pooled grpc.aio channels: headers on every call, statuses mapped to OMS exceptions.

Channels are cached per endpoint and shared by every client of one access point (closed at its shutdown).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import grpc
import grpc.aio
from rocketmq.grpc_protocol import definition_pb2, service_pb2_grpc

from oms.client.endpoints import Endpoint
from oms.client.headers import HeaderBuilder
from oms.errors import OMSRuntimeException, exception_for, from_rpc_error
from orbitmq.errors import Code
from orbitmq.proto import produce_pb2, produce_pb2_grpc

log = logging.getLogger("oms.client.rpc")

CHANNEL_OPTIONS = (
    ("grpc.max_send_message_length", -1),
    ("grpc.max_receive_message_length", -1),
    ("grpc.enable_retries", 0),  # the producer retries itself, onto another broker
    ("grpc.initial_reconnect_backoff_ms", 300),
    ("grpc.min_reconnect_backoff_ms", 300),
    ("grpc.max_reconnect_backoff_ms", 5000),  # a restarted broker is found again within seconds
    ("grpc.keepalive_time_ms", 30_000),
    ("grpc.keepalive_timeout_ms", 10_000),
)
SUCCESS_CODES = frozenset({Code.OK, Code.MULTIPLE_RESULTS})


class ChannelPool:
    """Loop-bound: channels are created and closed on the access point's loop."""

    def __init__(self, credentials: grpc.ChannelCredentials | None = None) -> None:
        self.credentials = credentials  # TLS when set (``rmq.tls.enable``)
        self._channels: dict[Endpoint, tuple[grpc.aio.Channel, service_pb2_grpc.MessagingServiceStub]] = {}
        self._produce: dict[Endpoint, produce_pb2_grpc.ProduceStub] = {}
        # Endpoints that answered Produce/SendBatch with UNIMPLEMENTED (e.g. a RocketMQ proxy): never asked again.
        self.without_send_batch: set[Endpoint] = set()

    def _entry(self, endpoint: Endpoint) -> tuple[grpc.aio.Channel, service_pb2_grpc.MessagingServiceStub]:
        entry = self._channels.get(endpoint)
        if entry is None:
            if self.credentials is None:
                channel = grpc.aio.insecure_channel(endpoint.target, options=CHANNEL_OPTIONS)
            else:
                channel = grpc.aio.secure_channel(endpoint.target, self.credentials, options=CHANNEL_OPTIONS)
            entry = self._channels[endpoint] = (channel, service_pb2_grpc.MessagingServiceStub(channel))
        return entry

    def stub(self, endpoint: Endpoint) -> service_pb2_grpc.MessagingServiceStub:
        return self._entry(endpoint)[1]

    def produce_stub(self, endpoint: Endpoint) -> produce_pb2_grpc.ProduceStub:
        stub = self._produce.get(endpoint)
        if stub is None:
            stub = self._produce[endpoint] = produce_pb2_grpc.ProduceStub(self.channel(endpoint))
        return stub

    def channel(self, endpoint: Endpoint) -> grpc.aio.Channel:
        """The shared channel itself, for the other services a server offers there (admin, name server)."""
        return self._entry(endpoint)[0]

    async def close(self, grace: float = 0.5) -> None:
        channels, self._channels = list(self._channels.values()), {}
        self._produce = {}
        for channel, _ in channels:
            await channel.close(grace)


class HasStatus(Protocol):
    @property
    def status(self) -> definition_pb2.Status: ...


def check_status(status: definition_pb2.Status, what: str) -> None:
    """Raise the OMS exception for a non-success status (a missing status is itself an error, P1)."""
    code = int(status.code)
    if code in SUCCESS_CODES:
        return
    if code == 0:
        raise OMSRuntimeException(Code.INTERNAL_ERROR, f"{what}: the response carries no status")
    text = status.message or (Code(code).name if code in Code._value2member_map_ else str(code))
    raise exception_for(code, f"{what}: {text}")


class Rpc:
    """The calls of one client object: its headers, the shared channels."""

    def __init__(self, pool: ChannelPool, headers: HeaderBuilder) -> None:
        self.pool = pool
        self.headers = headers

    def stub(self, endpoint: Endpoint) -> service_pb2_grpc.MessagingServiceStub:
        return self.pool.stub(endpoint)

    async def call(self, endpoint: Endpoint, method: str, request: Any, timeout: float, *, check: bool = True) -> Any:
        """``method`` (e.g. ``"SendMessage"``) on ``endpoint``; raises an ``OMSException`` on any failure."""
        fn = getattr(self.pool.stub(endpoint), method)
        what = f"{method} to {endpoint}"
        try:
            response = await fn(request, metadata=self.headers.build(), timeout=max(timeout, 0.001))
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, what) from None
        if check:
            check_status(response.status, what)
        return response

    def serves_send_batch(self, endpoint: Endpoint) -> bool:
        """False once ``endpoint`` answered ``Produce/SendBatch`` with UNIMPLEMENTED."""
        return endpoint not in self.pool.without_send_batch

    async def send_batch(
        self, endpoint: Endpoint, request: produce_pb2.SendBatchRequest, timeout: float
    ) -> produce_pb2.SendBatchResponse | None:
        """``Produce/SendBatch`` on ``endpoint``, its status unchecked; None (remembered) when the endpoint does not
        serve it. Raises an ``OMSException`` on any other transport failure."""
        what = f"SendBatch to {endpoint}"
        try:
            response: produce_pb2.SendBatchResponse = await self.pool.produce_stub(endpoint).SendBatch(
                request, metadata=self.headers.build(), timeout=max(timeout, 0.001)
            )
        except grpc.RpcError as exc:
            code_fn = getattr(exc, "code", None)
            if callable(code_fn) and code_fn() == grpc.StatusCode.UNIMPLEMENTED:
                log.info("%s: not served there, sending batches with v2 SendMessage", what)
                self.pool.without_send_batch.add(endpoint)
                return None
            raise from_rpc_error(exc, what) from None
        return response
