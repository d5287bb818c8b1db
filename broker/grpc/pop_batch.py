"""``orbitmq.pop.Pop/ReceiveBatch`` and ``AckBatch``: receive/ack with the popped messages in one unary answer.

Validation, ACL, filters, long polling, FIFO groups, invisibility and attempt ids are those of v2 ReceiveMessage
(``broker/grpc/receive.py`` over the state machine of ``broker/pop/service.py``); only the payload differs: stored
records end to end plus a receipt handle and a delivery attempt per record, instead of one v2 ``Message`` per
stream response.
"""

from __future__ import annotations

import time
from typing import Any

from google.protobuf import duration_pb2
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from broker import access
from broker.context import BrokerContext
from broker.grpc.errors import guarded
from broker.grpc.receive import pop_request
from broker.hookspecs import Action
from broker.pop.receipt import encode_handle_columns
from broker.pop.service import Popped, PopService
from broker.pop.state import InFlight
from orbitmq.errors import Code, MQError
from orbitmq.proto import pop_pb2, pop_pb2_grpc


def _status(code: int, message: str = "") -> pop_pb2.Status:
    return pop_pb2.Status(code=int(code), message=message)


def _as_v2(request: pop_pb2.ReceiveBatchRequest) -> service_pb2.ReceiveMessageRequest:
    """The v2 request the pop service validates (one object per call, not per message)."""
    if request.invisible_ms < 0 or request.long_polling_ms < 0:
        raise MQError(
            Code.BAD_REQUEST,
            f"invisible_ms ({request.invisible_ms}) and long_polling_ms ({request.long_polling_ms}) must be >= 0",
        )
    v2 = service_pb2.ReceiveMessageRequest(
        group=definition_pb2.Resource(name=request.group),
        message_queue=definition_pb2.MessageQueue(
            topic=definition_pb2.Resource(name=request.topic), id=request.queue_id
        ),
        batch_size=request.batch_size,
        auto_renew=request.auto_renew,
    )
    ms = request.invisible_ms
    v2.invisible_duration.CopyFrom(duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000))
    lp = request.long_polling_ms
    v2.long_polling_timeout.CopyFrom(duration_pb2.Duration(seconds=lp // 1000, nanos=(lp % 1000) * 1_000_000))
    if request.attempt_id:
        v2.attempt_id = request.attempt_id
    return v2


class PopServicer(pop_pb2_grpc.PopServicer):
    def __init__(self, ctx: BrokerContext, pop: PopService | None) -> None:
        self.ctx = ctx
        self.pop = pop

    def _checked(self, context: Any, rpc: str, topic: str, group: str) -> PopService:
        """The pop service, once ACL allows ``rpc`` (SUB on the topic, the group)."""
        if self.pop is None:
            raise MQError(Code.NOT_IMPLEMENTED, "receive/ack is not available on this broker")
        access.check(self.ctx.plugins, context, rpc, access.topic(topic, Action.SUB), access.group(group))
        return self.pop

    async def ReceiveBatch(self, request: pop_pb2.ReceiveBatchRequest, context: Any) -> pop_pb2.ReceiveBatchResponse:
        async def run() -> pop_pb2.ReceiveBatchResponse:
            pop = self._checked(context, "ReceiveBatch", request.topic, request.group)
            spec = (request.filter_type, request.filter_expression)
            # Up to maxReceiveBatchSize: one unary answer carries them, not a stream response each.
            req = pop_request(self.ctx, pop.config, _as_v2(request), context, spec, pop.config.maxReceiveBatchSize)
            popped = await pop.pop(req)
            if not popped:
                return pop_pb2.ReceiveBatchResponse(status=_status(Code.MESSAGE_NOT_FOUND, "no new message"))
            return self._response(pop, popped)

        return await guarded("ReceiveBatch", pop_pb2.ReceiveBatchResponse, run, _status)

    async def AckBatch(self, request: pop_pb2.AckBatchRequest, context: Any) -> pop_pb2.AckBatchResponse:
        async def run() -> pop_pb2.AckBatchResponse:
            pop = self._checked(context, "AckBatch", request.topic, request.group)
            failed = pop.ack_handles(request.group, request.topic, request.receipt_handles)
            response = pop_pb2.AckBatchResponse()
            if not failed:
                response.status.code = Code.OK
                return response
            for index, exc in sorted(failed.items()):
                response.failures.add(index=index, status=_status(exc.code, exc.message))
            codes = {exc.code for exc in failed.values()}
            if len(failed) == len(request.receipt_handles) and len(codes) == 1:
                response.status.CopyFrom(response.failures[0].status)
            else:
                response.status.CopyFrom(
                    _status(Code.MULTIPLE_RESULTS, f"{len(failed)} of {len(request.receipt_handles)} handles not acked")
                )
            return response

        return await guarded("AckBatch", pop_pb2.AckBatchResponse, run, _status)

    def _response(self, pop: PopService, popped: list[Popped]) -> pop_pb2.ReceiveBatchResponse:
        flights = [p.delivery.flight for p in popped]
        parts, gone, corrupt = self.ctx.store.read_records([(f.offset, f.commitlog_offset, f.size) for f in flights])
        # gone: retention removed their segment since the pop read the ConsumeQueue; corrupt: failed their CRC
        # (reported by the store). Neither can ever be delivered.
        if gone or corrupt:
            lost = set(gone) | set(corrupt)
            pop.drop_gone([popped[i] for i in sorted(lost)])
            popped = [p for i, p in enumerate(popped) if i not in lost]
            flights = [p.delivery.flight for p in popped]
        if not parts:
            return pop_pb2.ReceiveBatchResponse(status=_status(Code.MESSAGE_NOT_FOUND, "no new message"))
        return pop_pb2.ReceiveBatchResponse(
            status=_status(Code.OK),
            count=len(popped),
            records=parts[0][1] if len(parts) == 1 else b"".join(part for _, part in parts),
            receipt_handles=_handles(popped, flights),
            delivery_attempts=[f.attempts for f in flights],
            invisible_ms=flights[0].invisible_ms,
            delivery_timestamp_ms=int(time.time() * 1000),
        )


def _handles(popped: list[Popped], flights: list[InFlight]) -> list[str]:
    """The receipt handles of one pop's deliveries (one group and topic; ``flights`` theirs), encoded together.
    The columns are list comprehensions: reading one attribute each, they beat ``map(attrgetter)`` here."""
    group, topic, _ = popped[0].delivery.key
    return encode_handle_columns(
        group,
        topic,
        [p.delivery.key[2] for p in popped],
        [f.offset for f in flights],
        [f.commitlog_offset for f in flights],
        [f.seq for f in flights],
        [f.pop_time_ms for f in flights],
        [f.invisible_ms for f in flights],
    )
