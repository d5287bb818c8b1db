"""The v2 ``apache.rocketmq.v2.MessagingService`` subset a name server answers as a client access point.

QueryRoute, Heartbeat, Telemetry, NotifyClientTermination, QueryAssignment and RecallMessage (forwarded to the
topic's brokers); data RPCs get a clear BAD_REQUEST pointing at the broker endpoints from QueryRoute.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import grpc
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from namesrv.route_info import RouteInfoManager
from orbitmq import limits, tls
from orbitmq.errors import MQError
from orbitmq.logging import get_logger
from orbitmq.route import TopicRouteData
from orbitmq.v2.metadata import client_meta
from orbitmq.v2.routes import message_queues, route_assignments
from orbitmq.v2.status import ok_status, status, status_from_error
from orbitmq.v2.telemetry import TelemetryHub
from orbitmq.validation import validate_group, validate_topic

log = get_logger("namesrv.v2")

Code = definition_pb2.Code
DATA_RPC_MESSAGE = "the name server serves routes only: send data requests to a broker endpoint from QueryRoute"


class NamesrvMessagingService(service_pb2_grpc.MessagingServiceServicer):
    def __init__(
        self,
        routes: RouteInfoManager,
        hub: TelemetryHub,
        auto_create_route: bool = True,
        broker_credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self.routes = routes
        self.hub = hub
        self.auto_create_route = auto_create_route
        self.broker_credentials = broker_credentials  # TLS towards brokers (tlsEnable), for forwarded recalls

    def _route(self, topic: str) -> TopicRouteData:
        route = self.routes.route(topic)
        if route is None and self.auto_create_route:
            route = self.routes.auto_create_route(topic)
        if route is None:
            raise MQError(Code.TOPIC_NOT_FOUND, f"topic {topic!r} not found on any registered broker")
        return route

    async def QueryRoute(self, request: service_pb2.QueryRouteRequest, context: Any) -> service_pb2.QueryRouteResponse:
        topic = request.topic.name
        try:
            validate_topic(topic)
            queues = message_queues(request.topic, self._route(topic))
            if not queues:
                raise MQError(Code.TOPIC_NOT_FOUND, f"topic {topic!r} has no broker with a live master")
        except MQError as exc:
            # the client swallows route errors during startup (P21): say why here
            log.info("route query failed", topic=topic, code=exc.code.name, reason=exc.message)
            return service_pb2.QueryRouteResponse(status=status_from_error(exc))
        return service_pb2.QueryRouteResponse(status=ok_status(), message_queues=queues)

    async def Heartbeat(self, request: service_pb2.HeartbeatRequest, context: Any) -> service_pb2.HeartbeatResponse:
        meta = client_meta(context)
        try:
            client_id = meta.require_client_id()
        except MQError as exc:
            return service_pb2.HeartbeatResponse(status=status_from_error(exc))
        self.hub.touch(client_id, request.group.name, request.client_type, meta)
        return service_pb2.HeartbeatResponse(status=ok_status())

    async def Telemetry(
        self, request_iterator: AsyncIterable[service_pb2.TelemetryCommand], context: Any
    ) -> AsyncIterator[service_pb2.TelemetryCommand]:
        async for command in self.hub.handle(request_iterator, context):
            yield command

    async def NotifyClientTermination(
        self, request: service_pb2.NotifyClientTerminationRequest, context: Any
    ) -> service_pb2.NotifyClientTerminationResponse:
        meta = client_meta(context)
        if meta.client_id:
            self.hub.remove(meta.client_id)
        return service_pb2.NotifyClientTerminationResponse(status=ok_status())

    async def QueryAssignment(
        self, request: service_pb2.QueryAssignmentRequest, context: Any
    ) -> service_pb2.QueryAssignmentResponse:
        # Route-based only: every readable master broker; the broker does the real per-member allocation.
        try:
            validate_topic(request.topic.name)
            validate_group(request.group.name)
            fifo = bool(self.hub.policy.fifo(request.group.name))
            assignments = route_assignments(request.topic, self._route(request.topic.name), fifo)
            if not assignments:
                raise MQError(Code.FORBIDDEN, "no readable queue")
        except MQError as exc:
            return service_pb2.QueryAssignmentResponse(status=status_from_error(exc))
        return service_pb2.QueryAssignmentResponse(status=ok_status(), assignments=assignments)

    async def RecallMessage(
        self, request: service_pb2.RecallMessageRequest, context: Any
    ) -> service_pb2.RecallMessageResponse:
        # Recall goes to the access point (protocol §3.14): forward it to the topic's brokers until one accepts.
        try:
            validate_topic(request.topic.name)
            route = self._route(request.topic.name)
        except MQError as exc:
            return service_pb2.RecallMessageResponse(status=status_from_error(exc))
        metadata = tuple((k, v) for k, v in client_meta(context).headers.items() if not k.startswith(":"))
        last = service_pb2.RecallMessageResponse(status=status(Code.NOT_FOUND, "no broker accepted the recall"))
        for broker in route.broker_datas:
            addr = broker.master_addr()
            if addr is None:
                continue
            try:
                async with tls.channel(addr, self.broker_credentials) as channel:
                    stub = service_pb2_grpc.MessagingServiceStub(channel)
                    resp = await stub.RecallMessage(request, metadata=metadata, timeout=limits.REGISTER_TIMEOUT_S)
            except grpc.aio.AioRpcError as exc:
                log.info("recall forward failed", broker=broker.broker_name, error=exc.code().name)
                continue
            if resp.status.code == Code.OK:
                return resp
            last = resp
        return last

    # -- data RPCs belong to brokers --------------------------------------------------------------------------

    async def SendMessage(self, request: Any, context: Any) -> service_pb2.SendMessageResponse:
        return service_pb2.SendMessageResponse(status=status(Code.BAD_REQUEST, DATA_RPC_MESSAGE))

    async def ReceiveMessage(self, request: Any, context: Any) -> AsyncIterator[service_pb2.ReceiveMessageResponse]:
        yield service_pb2.ReceiveMessageResponse(status=status(Code.BAD_REQUEST, DATA_RPC_MESSAGE))

    async def AckMessage(self, request: Any, context: Any) -> service_pb2.AckMessageResponse:
        return service_pb2.AckMessageResponse(status=status(Code.BAD_REQUEST, DATA_RPC_MESSAGE))

    async def ForwardMessageToDeadLetterQueue(
        self, request: Any, context: Any
    ) -> service_pb2.ForwardMessageToDeadLetterQueueResponse:
        return service_pb2.ForwardMessageToDeadLetterQueueResponse(status=status(Code.BAD_REQUEST, DATA_RPC_MESSAGE))

    async def PullMessage(self, request: Any, context: Any) -> AsyncIterator[service_pb2.PullMessageResponse]:
        yield service_pb2.PullMessageResponse(status=status(Code.BAD_REQUEST, DATA_RPC_MESSAGE))

    async def UpdateOffset(self, request: Any, context: Any) -> service_pb2.UpdateOffsetResponse:
        return service_pb2.UpdateOffsetResponse(status=status(Code.BAD_REQUEST, DATA_RPC_MESSAGE))

    async def GetOffset(self, request: Any, context: Any) -> service_pb2.GetOffsetResponse:
        return service_pb2.GetOffsetResponse(status=status(Code.BAD_REQUEST, DATA_RPC_MESSAGE))

    async def QueryOffset(self, request: Any, context: Any) -> service_pb2.QueryOffsetResponse:
        return service_pb2.QueryOffsetResponse(status=status(Code.BAD_REQUEST, DATA_RPC_MESSAGE))

    async def EndTransaction(self, request: Any, context: Any) -> service_pb2.EndTransactionResponse:
        return service_pb2.EndTransactionResponse(status=status(Code.BAD_REQUEST, DATA_RPC_MESSAGE))

    async def ChangeInvisibleDuration(
        self, request: service_pb2.ChangeInvisibleDurationRequest, context: Any
    ) -> service_pb2.ChangeInvisibleDurationResponse:
        # echo the handle: the client adopts it before checking the status (P10)
        return service_pb2.ChangeInvisibleDurationResponse(
            status=status(Code.BAD_REQUEST, DATA_RPC_MESSAGE), receipt_handle=request.receipt_handle
        )

    async def SyncLiteSubscription(self, request: Any, context: Any) -> service_pb2.SyncLiteSubscriptionResponse:
        return service_pb2.SyncLiteSubscriptionResponse(
            status=status(Code.NOT_IMPLEMENTED, "lite topics are not supported")
        )
