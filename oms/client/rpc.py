"""Unary v2 calls over pooled grpc.aio channels: headers on every call, statuses mapped to OMS exceptions.

Channels are cached per endpoint and shared by every client of one access point (closed at its shutdown).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import grpc
import grpc.aio
from google.protobuf.message import Message
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from oms.client.batch_wire import SendBatchWire
from oms.client.direct import DirectPool
from oms.client.endpoints import Endpoint
from oms.client.frames import FrameChannel
from oms.client.headers import HeaderBuilder
from oms.errors import OMSException, OMSRuntimeException, exception_for, from_rpc_error
from orbitmq.errors import Code
from orbitmq.proto import produce_pb2, produce_pb2_grpc, transport_pb2, transport_pb2_grpc

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
DESCRIBE_TIMEOUT_S = 3.0
# A lost frame connection or a failed Describe: ask the broker again this long after. Short, because until then
# every unary call and every framed receive (the Celery worker's hub) takes the slower gRPC path, and a restarted
# broker answers at once; an unreachable one costs one failed Describe per interval.
REDISCOVER_AFTER_S = 0.5
S = TypeVar("S")
R = TypeVar("R", bound=Message)
_MESSAGING_SERVICE = service_pb2.DESCRIPTOR.services_by_name["MessagingService"].full_name
_SEND_BATCH = f"/{produce_pb2.DESCRIPTOR.services_by_name['Produce'].full_name}/SendBatch"


class ChannelPool:
    """Loop-bound: channels are created and closed on the access point's loop.

    Unary calls to an OrbitMQ broker ride the frame transport (``oms/client/frames.py``) once the broker has said
    where its frame listener is; until then, for other servers, over TLS, or with ``frames=False``, they use gRPC.
    """

    def __init__(self, credentials: grpc.ChannelCredentials | None = None, *, frames: bool = True) -> None:
        self.credentials = credentials  # TLS when set (``rmq.tls.enable``)
        # frames carry no TLS: a TLS access point keeps every call on gRPC
        self.frames_enabled = frames and credentials is None
        self._frames: dict[Endpoint, FrameChannel | None] = {}  # None: the endpoint offers no frame listener
        self._describing: dict[Endpoint, asyncio.Task[None]] = {}
        self._frames_retry_at: dict[Endpoint, float] = {}
        self._unary_stubs: dict[tuple[Endpoint, object], tuple[object, Any]] = {}
        self._channels: dict[Endpoint, tuple[grpc.aio.Channel, service_pb2_grpc.MessagingServiceStub]] = {}
        # Endpoints that answered Produce/SendBatch with UNIMPLEMENTED (e.g. a RocketMQ proxy): never asked again.
        self.without_send_batch: set[Endpoint] = set()
        self.direct = DirectPool()  # the frame listeners' blocking connections, for calls made on callers' threads

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

    def channel(self, endpoint: Endpoint) -> grpc.aio.Channel:
        """The shared channel itself, for the other services a server offers there (admin, name server)."""
        return self._entry(endpoint)[0]

    def unary_stub(self, endpoint: Endpoint, stub_type: Callable[[Any], S]) -> S:
        """A stub for the unary calls of ``stub_type``'s service on ``endpoint``: over frames where the broker
        offers them, else over the shared gRPC channel. Never use it for streaming methods."""
        channel: object = self._frame_channel(endpoint) or self.channel(endpoint)
        cached = self._unary_stubs.get((endpoint, stub_type))
        if cached is None or cached[0] is not channel:
            cached = self._unary_stubs[(endpoint, stub_type)] = (channel, stub_type(channel))
        stub: S = cached[1]
        return stub

    def frame_address(self, endpoint: Endpoint) -> tuple[str, int] | None:
        """Where ``endpoint``'s frame listener is, if known (from any thread; a call over the pool asks for it)."""
        channel = self._frames.get(endpoint) if self.frames_enabled else None
        return None if channel is None else (channel.host, channel.port)

    def _frame_channel(self, endpoint: Endpoint) -> FrameChannel | None:
        if not self.frames_enabled:
            return None
        if endpoint in self._frames:
            return self._frames[endpoint]
        if endpoint not in self._describing and time.monotonic() >= self._frames_retry_at.get(endpoint, 0.0):
            # asked in the background: this call and those until the answer go over gRPC
            task = asyncio.get_running_loop().create_task(self._describe(endpoint), name=f"describe-{endpoint}")
            self._describing[endpoint] = task
        return None

    async def _describe(self, endpoint: Endpoint) -> None:
        stub = transport_pb2_grpc.TransportsStub(self.channel(endpoint))
        try:
            answer = await stub.Describe(transport_pb2.DescribeTransportsRequest(), timeout=DESCRIBE_TIMEOUT_S)
        except grpc.RpcError as exc:
            code_fn = getattr(exc, "code", None)
            if callable(code_fn) and code_fn() == grpc.StatusCode.UNIMPLEMENTED:
                self._frames[endpoint] = None  # not an OrbitMQ broker (a name server, a RocketMQ proxy)
            else:
                self._frames_retry_at[endpoint] = time.monotonic() + REDISCOVER_AFTER_S
            return
        finally:
            self._describing.pop(endpoint, None)
        host, _, port = answer.frames_addr.rpartition(":")
        if not host or not port.isdigit():
            self._frames[endpoint] = None
            return
        log.debug("%s: unary calls over frames at %s", endpoint, answer.frames_addr)
        self._frames[endpoint] = FrameChannel(host, int(port), lambda ch: self._frames_lost(endpoint, ch))

    def _frames_lost(self, endpoint: Endpoint, channel: FrameChannel) -> None:
        """Back to gRPC for this endpoint; its frame address is asked again later (a restart may change it)."""
        if self._frames.get(endpoint) is channel:
            del self._frames[endpoint]
            self._frames_retry_at[endpoint] = time.monotonic() + REDISCOVER_AFTER_S
        self.direct.forget((channel.host, channel.port))

    async def close(self, grace: float = 0.5) -> None:
        self.direct.close()
        for task in list(self._describing.values()):
            task.cancel()
        frames, self._frames = [f for f in self._frames.values() if f is not None], {}
        for frame_channel in frames:
            await frame_channel.close()
        self._unary_stubs = {}
        channels, self._channels = list(self._channels.values()), {}
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
        fn = getattr(self.pool.unary_stub(endpoint, service_pb2_grpc.MessagingServiceStub), method)
        what = f"{method} to {endpoint}"
        try:
            response = await fn(request, metadata=self.headers.build(), timeout=max(timeout, 0.001))
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, what) from None
        if check:
            check_status(response.status, what)
        return response

    def call_direct(
        self, endpoint: Endpoint, method: str, request: Any, response_type: type[R], timeout: float
    ) -> R | None:
        """``call`` of a MessagingService ``method`` (status unchecked) made on the calling thread over a pooled
        blocking frame connection, for a thread that would block on the loop's answer anyway; None when
        ``endpoint`` has no known frame listener (not described yet, gRPC only, TLS): then ``call`` it on the
        loop. Raises an ``OMSException`` on failure."""
        return self._direct(endpoint, f"/{_MESSAGING_SERVICE}/{method}", method, request, response_type, timeout)

    def send_batch_direct(
        self, endpoint: Endpoint, request: produce_pb2.SendBatchRequest | SendBatchWire, timeout: float
    ) -> produce_pb2.SendBatchResponse | None:
        """``send_batch`` made as ``call_direct`` makes a call; None also where ``send_batch`` gives None."""
        if endpoint in self.pool.without_send_batch:
            return None
        try:
            return self._direct(endpoint, _SEND_BATCH, "SendBatch", request, produce_pb2.SendBatchResponse, timeout)
        except OMSException as exc:
            if exc.code == Code.NOT_IMPLEMENTED:  # answered on the loop, which remembers it
                return None
            raise

    def _direct(
        self, endpoint: Endpoint, path: str, method: str, request: Any, response_type: type[R], timeout: float
    ) -> R | None:
        address = self.pool.frame_address(endpoint)
        if address is None:
            return None
        # a hand-serialized SendBatch goes in pieces: its payload is written as it is, never copied (batch_wire)
        body = request.pieces() if isinstance(request, SendBatchWire) else request.SerializeToString()
        try:
            answer = self.pool.direct.call(address, path, body, self.headers.build(), max(timeout, 0.001))
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, f"{method} to {endpoint}") from None
        return response_type.FromString(answer)

    def serves_send_batch(self, endpoint: Endpoint) -> bool:
        """False once ``endpoint`` answered ``Produce/SendBatch`` with UNIMPLEMENTED."""
        return endpoint not in self.pool.without_send_batch

    async def send_batch(
        self, endpoint: Endpoint, request: produce_pb2.SendBatchRequest, timeout: float
    ) -> produce_pb2.SendBatchResponse | None:
        """``Produce/SendBatch`` on ``endpoint``, its status unchecked; None (remembered) when the endpoint does not
        serve it. Raises an ``OMSException`` on any other transport failure."""
        what = f"SendBatch to {endpoint}"
        stub = self.pool.unary_stub(endpoint, produce_pb2_grpc.ProduceStub)
        try:
            response: produce_pb2.SendBatchResponse = await stub.SendBatch(
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
