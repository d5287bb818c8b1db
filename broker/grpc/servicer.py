"""``apache.rocketmq.v2.MessagingService`` served by the broker: routes, clients, send, pull/offsets, receive/ack.

Handlers stay thin: ACL here, the RPC in ``send.py``, ``pull.py`` and ``receive.py`` (receive/ack/nack/DLQ over
the pop service's state machine, ``broker/pop/service.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from broker import access
from broker.context import BrokerContext
from broker.grpc.errors import guarded
from broker.grpc.pull import PullService
from broker.grpc.receive import ReceiveService
from broker.grpc.send import SendService
from broker.hookspecs import Action
from broker.pop.service import PopService
from broker.routing import assignments_for, topic_route
from broker.timer_service import decode_recall_handle
from orbitmq.errors import Code, MQError
from orbitmq.logging import get_logger
from orbitmq.v2.metadata import client_meta
from orbitmq.v2.routes import message_queues
from orbitmq.v2.settings import CONSUMER_TYPES
from orbitmq.v2.status import ok_status, status
from orbitmq.validation import validate_group, validate_topic

log = get_logger("broker.servicer")


def _peer(context: Any) -> tuple[str, int]:
    """The caller's (ip, port) from the gRPC peer string, for born_host when the client sent none."""
    try:
        peer = str(context.peer() or "")
    except Exception:
        return ("127.0.0.1", 0)
    if peer.startswith("ipv4:"):
        host, _, port = peer[5:].rpartition(":")
        return (host, int(port)) if port.isdigit() else ("127.0.0.1", 0)
    return ("127.0.0.1", 0)


class MessagingServicer(service_pb2_grpc.MessagingServiceServicer):
    def __init__(self, ctx: BrokerContext, pop: PopService | None) -> None:
        self.ctx = ctx
        self.sender = SendService(ctx)
        self.puller = PullService(ctx)
        self.receiver = ReceiveService(ctx, pop) if pop is not None else None

    def _check_consume(self, context: Any, rpc: str, topic: str, group: str) -> None:
        access.check(self.ctx.plugins, context, rpc, access.topic(topic, Action.SUB), access.group(group))

    # ------------------------------------------------------------------ routes and clients
    async def QueryRoute(self, request: service_pb2.QueryRouteRequest, context: Any) -> service_pb2.QueryRouteResponse:
        async def run() -> service_pb2.QueryRouteResponse:
            validate_topic(request.topic.name)
            access.check(self.ctx.plugins, context, "QueryRoute", access.topic(request.topic.name, Action.ANY))
            route = await topic_route(self.ctx, request.topic.name)
            queues = message_queues(request.topic, route)
            return service_pb2.QueryRouteResponse(status=ok_status(), message_queues=queues)

        return await guarded("QueryRoute", service_pb2.QueryRouteResponse, run)

    async def Heartbeat(self, request: service_pb2.HeartbeatRequest, context: Any) -> service_pb2.HeartbeatResponse:
        async def run() -> service_pb2.HeartbeatResponse:
            meta = client_meta(context)
            client_id = meta.require_client_id()
            group = request.group.name if request.HasField("group") else ""
            if request.client_type in CONSUMER_TYPES:
                validate_group(group)
                access.check(self.ctx.plugins, context, "Heartbeat", access.group(group))
            else:  # a producer's group names no subscription group: nothing is created for it
                access.check(self.ctx.plugins, context, "Heartbeat")
                if group:
                    validate_group(group)
            self.ctx.telemetry.touch(client_id, group, request.client_type, meta)
            return service_pb2.HeartbeatResponse(status=ok_status())

        return await guarded("Heartbeat", service_pb2.HeartbeatResponse, run)

    async def Telemetry(
        self, request_iterator: AsyncIterable[service_pb2.TelemetryCommand], context: Any
    ) -> AsyncIterator[service_pb2.TelemetryCommand]:
        try:
            access.check(self.ctx.plugins, context, "Telemetry")
        except MQError as exc:
            yield service_pb2.TelemetryCommand(status=status(exc.code, exc.message))
            return
        async for command in self.ctx.telemetry.handle(request_iterator, context):
            yield command

    async def NotifyClientTermination(
        self, request: service_pb2.NotifyClientTerminationRequest, context: Any
    ) -> service_pb2.NotifyClientTerminationResponse:
        async def run() -> service_pb2.NotifyClientTerminationResponse:
            client_id = client_meta(context).require_client_id()
            access.check(self.ctx.plugins, context, "NotifyClientTermination")
            self.ctx.telemetry.remove(client_id)
            return service_pb2.NotifyClientTerminationResponse(status=ok_status())

        return await guarded("NotifyClientTermination", service_pb2.NotifyClientTerminationResponse, run)

    async def QueryAssignment(
        self, request: service_pb2.QueryAssignmentRequest, context: Any
    ) -> service_pb2.QueryAssignmentResponse:
        async def run() -> service_pb2.QueryAssignmentResponse:
            client_id = client_meta(context).require_client_id()
            validate_topic(request.topic.name)
            validate_group(request.group.name)
            access.check(
                self.ctx.plugins,
                context,
                "QueryAssignment",
                access.topic(request.topic.name, Action.SUB),
                access.group(request.group.name),
            )
            items = await assignments_for(self.ctx, request.topic, request.group.name, client_id)
            return service_pb2.QueryAssignmentResponse(status=ok_status(), assignments=items)

        return await guarded("QueryAssignment", service_pb2.QueryAssignmentResponse, run)

    # ------------------------------------------------------------------ produce
    async def SendMessage(
        self, request: service_pb2.SendMessageRequest, context: Any
    ) -> service_pb2.SendMessageResponse:
        async def run() -> service_pb2.SendMessageResponse:
            if self.ctx.plugins.has_acl:  # a thousand messages' topics cost ~0.5 ms: read them only for a check
                topics = sorted({m.topic.name for m in request.messages})
                access.check(self.ctx.plugins, context, "SendMessage", *(access.topic(t, Action.PUB) for t in topics))
            return await self.sender.send(request, _peer(context))

        return await guarded("SendMessage", service_pb2.SendMessageResponse, run)

    # ------------------------------------------------------------------ offset-based consumption
    async def PullMessage(
        self, request: service_pb2.PullMessageRequest, context: Any
    ) -> AsyncIterator[service_pb2.PullMessageResponse]:
        try:
            self._check_consume(context, "PullMessage", request.message_queue.topic.name, request.group.name)
        except MQError as exc:
            yield service_pb2.PullMessageResponse(status=status(exc.code, exc.message))
            return
        sent_status = False
        try:
            async for response in self.puller.pull(request, context):
                sent_status = sent_status or response.HasField("status")
                yield response
        except Exception as exc:
            log.exception("PullMessage failed", error=repr(exc))
            if not sent_status:
                yield service_pb2.PullMessageResponse(status=status(Code.INTERNAL_SERVER_ERROR, repr(exc)))

    async def GetOffset(self, request: service_pb2.GetOffsetRequest, context: Any) -> service_pb2.GetOffsetResponse:
        async def run() -> service_pb2.GetOffsetResponse:
            self._check_consume(context, "GetOffset", request.message_queue.topic.name, request.group.name)
            return await self.puller.get_offset(request)

        return await guarded("GetOffset", service_pb2.GetOffsetResponse, run)

    async def UpdateOffset(
        self, request: service_pb2.UpdateOffsetRequest, context: Any
    ) -> service_pb2.UpdateOffsetResponse:
        async def run() -> service_pb2.UpdateOffsetResponse:
            self._check_consume(context, "UpdateOffset", request.message_queue.topic.name, request.group.name)
            return await self.puller.update_offset(request)

        return await guarded("UpdateOffset", service_pb2.UpdateOffsetResponse, run)

    async def QueryOffset(
        self, request: service_pb2.QueryOffsetRequest, context: Any
    ) -> service_pb2.QueryOffsetResponse:
        async def run() -> service_pb2.QueryOffsetResponse:
            topic = request.message_queue.topic.name
            access.check(self.ctx.plugins, context, "QueryOffset", access.topic(topic, Action.SUB))
            return await self.puller.query_offset(request)

        return await guarded("QueryOffset", service_pb2.QueryOffsetResponse, run)

    # ------------------------------------------------------------------ receive/ack
    def _receiver(self) -> ReceiveService:
        if self.receiver is None:
            raise MQError(Code.NOT_IMPLEMENTED, "receive/ack is not available on this broker yet")
        return self.receiver

    async def ReceiveMessage(self, request: service_pb2.ReceiveMessageRequest, context: Any) -> None:
        # A coroutine writing through ``context.write``, not an async generator: no generator layer per message.
        if self.receiver is None:
            await context.write(
                service_pb2.ReceiveMessageResponse(status=status(Code.NOT_IMPLEMENTED, "receive is not available"))
            )
            return
        try:
            self._check_consume(context, "ReceiveMessage", request.message_queue.topic.name, request.group.name)
        except MQError as exc:
            await context.write(service_pb2.ReceiveMessageResponse(status=status(exc.code, exc.message)))
            return
        try:
            await self.receiver.receive(request, context)
        except Exception as exc:
            # receive() answers its refusals and failures with a status before anything else; what reaches here
            # failed after the status went out (e.g. a write to a call that ended), so the stream has its one status.
            log.exception("ReceiveMessage failed", error=repr(exc))

    async def AckMessage(self, request: service_pb2.AckMessageRequest, context: Any) -> service_pb2.AckMessageResponse:
        async def run() -> service_pb2.AckMessageResponse:
            self._check_consume(context, "AckMessage", request.topic.name, request.group.name)
            return await self._receiver().ack(request)

        return await guarded("AckMessage", service_pb2.AckMessageResponse, run)

    async def ChangeInvisibleDuration(
        self, request: service_pb2.ChangeInvisibleDurationRequest, context: Any
    ) -> service_pb2.ChangeInvisibleDurationResponse:
        async def run() -> service_pb2.ChangeInvisibleDurationResponse:
            self._check_consume(context, "ChangeInvisibleDuration", request.topic.name, request.group.name)
            return await self._receiver().change_invisible_duration(request)

        response = await guarded("ChangeInvisibleDuration", service_pb2.ChangeInvisibleDurationResponse, run)
        if not response.receipt_handle:
            response.receipt_handle = request.receipt_handle  # the client adopts it before checking status (P10)
        return response

    async def ForwardMessageToDeadLetterQueue(
        self, request: service_pb2.ForwardMessageToDeadLetterQueueRequest, context: Any
    ) -> service_pb2.ForwardMessageToDeadLetterQueueResponse:
        async def run() -> service_pb2.ForwardMessageToDeadLetterQueueResponse:
            self._check_consume(context, "ForwardMessageToDeadLetterQueue", request.topic.name, request.group.name)
            return await self._receiver().forward_to_dlq(request)

        return await guarded(
            "ForwardMessageToDeadLetterQueue", service_pb2.ForwardMessageToDeadLetterQueueResponse, run
        )

    # ------------------------------------------------------------------ not served yet
    async def EndTransaction(
        self, request: service_pb2.EndTransactionRequest, context: Any
    ) -> service_pb2.EndTransactionResponse:
        async def run() -> service_pb2.EndTransactionResponse:
            validate_topic(request.topic.name)
            access.check(self.ctx.plugins, context, "EndTransaction", access.topic(request.topic.name, Action.PUB))
            transactions = self.ctx.transactions
            if transactions is None:
                raise MQError(Code.NOT_IMPLEMENTED, "transactions are not enabled on this broker")
            if request.resolution not in (definition_pb2.COMMIT, definition_pb2.ROLLBACK):
                raise MQError(Code.BAD_REQUEST, f"unknown transaction resolution {request.resolution}")
            source = definition_pb2.TransactionSource.Name(request.source)
            await transactions.end(
                request.topic.name, request.transaction_id, request.resolution == definition_pb2.COMMIT, source
            )
            return service_pb2.EndTransactionResponse(status=ok_status())

        return await guarded("EndTransaction", service_pb2.EndTransactionResponse, run)

    async def RecallMessage(
        self, request: service_pb2.RecallMessageRequest, context: Any
    ) -> service_pb2.RecallMessageResponse:
        async def run() -> service_pb2.RecallMessageResponse:
            validate_topic(request.topic.name)
            access.check(self.ctx.plugins, context, "RecallMessage", access.topic(request.topic.name, Action.PUB))
            topic, _, _, message_id, offset = decode_recall_handle(request.recall_handle)
            if topic != request.topic.name:
                raise MQError(Code.BAD_REQUEST, f"recall handle belongs to topic {topic!r}")
            if self.ctx.timer is None or not await self.ctx.timer.recall(offset):
                raise MQError(Code.NOT_FOUND, f"message {message_id} was already delivered or recalled")
            return service_pb2.RecallMessageResponse(status=ok_status(), message_id=message_id)

        return await guarded("RecallMessage", service_pb2.RecallMessageResponse, run)

    async def SyncLiteSubscription(
        self, request: service_pb2.SyncLiteSubscriptionRequest, context: Any
    ) -> service_pb2.SyncLiteSubscriptionResponse:
        return service_pb2.SyncLiteSubscriptionResponse(status=status(Code.NOT_IMPLEMENTED, "lite topics unsupported"))
