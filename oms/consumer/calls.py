"""The consumer RPCs of one client: receive/ack/nack/DLQ, assignments, offsets (v2) and PullBatch (orbitmq).

Loop-bound; every call raises an ``OMSException`` on failure, with the broker's status code.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.protobuf import duration_pb2, timestamp_pb2
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from oms.client.core import ClientCore
from oms.client.endpoints import Endpoint
from oms.client.rpc import check_status
from oms.consumer.config import ConsumeFromWhere
from oms.consumer.records import record_to_message
from oms.consumer.selector import MessageSelector
from oms.convert import from_wire
from oms.errors import (
    OMSConnectionException,
    OMSResourceNotExistException,
    OMSRuntimeException,
    exception_for,
    from_rpc_error,
)
from oms.message import BytesMessage
from oms.queue import MessageQueue
from orbitmq import message_const as mc
from orbitmq.errors import Code
from orbitmq.proto import consume_pb2, consume_pb2_grpc, pop_pb2, pop_pb2_grpc
from orbitmq.record import RecordFormatError, iter_records

log = logging.getLogger("oms.consumer.calls")
S = TypeVar("S")


class _Unimplemented(Exception):
    """The broker has no ``Pop/ReceiveBatch`` (a RocketMQ 5 proxy): v2 ReceiveMessage it is."""


def code_name(code: int) -> str:
    try:
        return Code(code).name
    except ValueError:
        return str(code)


def duration_ms(ms: float) -> duration_pb2.Duration:
    ms = max(0, int(ms))
    return duration_pb2.Duration(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


@dataclass(frozen=True)
class QueueRef:
    """A queue and the broker endpoint serving it."""

    queue: MessageQueue
    endpoint: Endpoint

    def to_pb(self, namespace: str) -> definition_pb2.MessageQueue:
        return definition_pb2.MessageQueue(
            topic=definition_pb2.Resource(name=self.queue.topic, resource_namespace=namespace),
            id=self.queue.queue_id,
            permission=definition_pb2.Permission.READ_WRITE,
            broker=definition_pb2.Broker(name=self.queue.broker_name, id=0, endpoints=self.endpoint.to_pb()),
        )


@dataclass
class Receipt:
    """One received message with what acking, nacking and counting it needs."""

    message: BytesMessage  # sys headers include the receipt handle and the redelivered number
    handle: str
    message_id: str
    attempt: int  # the broker's delivery attempt (1 = first delivery)
    message_group: str = ""


@dataclass
class Received:
    """One receive answer: the messages, and the status when it was not OK/not found."""

    receipts: list[Receipt]
    code: int
    delivery_ms: int = 0  # when the broker delivered them (v2 ReceiveMessage's delivery_timestamp); 0 = not said


def _receipt_from_v2(pb: definition_pb2.Message) -> Receipt:
    sp = pb.system_properties
    return Receipt(
        from_wire(pb),
        str(sp.receipt_handle),
        str(sp.message_id),
        max(1, int(sp.delivery_attempt)),
        str(sp.message_group) if sp.HasField("message_group") else "",
    )


def _receipts_from_batch(response: pop_pb2.ReceiveBatchResponse) -> list[Receipt]:
    out = []
    records = iter_records(response.records)
    for record, handle, attempt in zip(records, response.receipt_handles, response.delivery_attempts, strict=True):
        message = record_to_message(record)
        message.set_receipt(handle, max(0, attempt - 1))
        group = record.properties.get(mc.PROPERTY_MESSAGE_GROUP, "")
        out.append(Receipt(message, handle, message.message_id or "", max(1, attempt), group))
    return out


class ConsumerCalls:
    def __init__(self, core: ClientCore, group: str) -> None:
        self.core = core
        self.group = group
        self._no_receive_batch: set[Endpoint] = set()  # brokers answering UNIMPLEMENTED (not OrbitMQ)
        self._no_ack_batch: set[Endpoint] = set()
        self.receive_batch_enabled = True  # False: always v2 ReceiveMessage

    @property
    def namespace(self) -> str:
        return self.core.runtime.namespace

    @property
    def timeout_s(self) -> float:
        return self.core.timeout_s

    def _group(self) -> definition_pb2.Resource:
        return self.core.resource(self.group)

    # -- receive/ack ----------------------------------------------------------------------------------------------

    async def receive(
        self,
        ref: QueueRef,
        selector: MessageSelector,
        batch: int,
        long_polling_s: float,
        *,
        invisible_ms: int | None = None,
        attempt_id: str | None = None,
    ) -> Received:
        """Pop messages: ``Pop/ReceiveBatch`` where the broker has it (one answer for the batch), else v2
        ReceiveMessage (one stream response per message, e.g. a RocketMQ proxy)."""
        attempt_id = attempt_id or str(uuid.uuid4())
        try:
            if self.serves_receive_batch(ref.endpoint):
                try:
                    return await self._receive_batch(ref, selector, batch, long_polling_s, invisible_ms, attempt_id)
                except _Unimplemented:
                    self._no_receive_batch.add(ref.endpoint)
                    log.info("%s has no Pop/ReceiveBatch, using v2 ReceiveMessage", ref.endpoint)
            return await self._receive_v2(ref, selector, batch, long_polling_s, invisible_ms, attempt_id)
        except OMSConnectionException:
            self._route_may_have_moved(ref)
            raise

    def _route_may_have_moved(self, ref: QueueRef) -> None:
        """``ref``'s broker could not be reached (stopped, or replaced by a failover): its topic's route is asked for
        again now, not at the next periodic refresh (30 s), so the next call goes where the queue is now served."""
        self.core.refresh_route_soon(ref.queue.topic)

    def receive_batch_request(
        self,
        ref: QueueRef,
        selector: MessageSelector,
        batch: int,
        long_polling_s: float,
        invisible_ms: int | None,
        attempt_id: str = "",
    ) -> pop_pb2.ReceiveBatchRequest:
        """The ``Pop/ReceiveBatch`` request of a receive (sent here, or by a caller over its own frame connection);
        ``attempt_id`` for a receive that may be retried (the broker answers a retry with the same messages)."""
        filter_type, expression = selector.pull_filter()
        return pop_pb2.ReceiveBatchRequest(
            group=self.group,
            topic=ref.queue.topic,
            queue_id=ref.queue.queue_id,
            batch_size=batch,
            invisible_ms=invisible_ms or 0,
            auto_renew=invisible_ms is None,
            long_polling_ms=int(long_polling_s * 1000),
            filter_type=filter_type,
            filter_expression=expression,
            attempt_id=attempt_id,
        )

    @staticmethod
    def receive_batch_result(response: pop_pb2.ReceiveBatchResponse, what: str) -> Received:
        """A ``Pop/ReceiveBatch`` answer read: its receipts, nothing when none was found; the status raised else."""
        code = int(response.status.code)
        if code == Code.MESSAGE_NOT_FOUND:
            return Received([], code)
        if code != Code.OK:
            raise exception_for(code or Code.INTERNAL_ERROR, f"{what}: {response.status.message or code_name(code)}")
        try:
            return Received(_receipts_from_batch(response), code, response.delivery_timestamp_ms)
        except (RecordFormatError, ValueError) as exc:
            raise exception_for(Code.MESSAGE_CORRUPTED, f"{what}: the records do not decode: {exc}") from exc

    def serves_receive_batch(self, endpoint: Endpoint) -> bool:
        """Receives to ``endpoint`` use ``Pop/ReceiveBatch`` (False: v2 ReceiveMessage, e.g. a RocketMQ proxy)."""
        return self.receive_batch_enabled and not self.namespace and endpoint not in self._no_receive_batch

    async def _receive_batch(
        self,
        ref: QueueRef,
        selector: MessageSelector,
        batch: int,
        long_polling_s: float,
        invisible_ms: int | None,
        attempt_id: str,
    ) -> Received:
        request = self.receive_batch_request(ref, selector, batch, long_polling_s, invisible_ms, attempt_id)
        what = f"ReceiveBatch from {ref.endpoint}"
        try:
            response: pop_pb2.ReceiveBatchResponse = await self._stub(ref.endpoint, pop_pb2_grpc.PopStub).ReceiveBatch(
                request, metadata=self.core.headers.build(), timeout=long_polling_s + self.timeout_s
            )
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise _Unimplemented from None
            raise from_rpc_error(exc, what) from None
        return self.receive_batch_result(response, what)

    async def _receive_v2(
        self,
        ref: QueueRef,
        selector: MessageSelector,
        batch: int,
        long_polling_s: float,
        invisible_ms: int | None,
        attempt_id: str,
    ) -> Received:
        """ReceiveMessage: collects the whole stream (status, messages, delivery timestamp) as the v2 clients do."""
        request = service_pb2.ReceiveMessageRequest(
            group=self._group(),
            message_queue=ref.to_pb(self.namespace),
            filter_expression=selector.to_pb(),
            batch_size=batch,
            auto_renew=invisible_ms is None,
            long_polling_timeout=duration_ms(long_polling_s * 1000),
        )
        if invisible_ms is not None:
            request.invisible_duration.CopyFrom(duration_ms(invisible_ms))
        request.attempt_id = attempt_id
        what = f"ReceiveMessage from {ref.endpoint}"
        call = self.core.rpc.stub(ref.endpoint).ReceiveMessage(
            request, metadata=self.core.headers.build(), timeout=long_polling_s + self.timeout_s
        )
        status: definition_pb2.Status | None = None
        messages: list[definition_pb2.Message] = []
        delivery_ms = 0
        try:
            async for response in call:
                kind = response.WhichOneof("content")
                if kind == "status":
                    status = response.status
                elif kind == "message":
                    messages.append(response.message)
                elif kind == "delivery_timestamp":
                    ts = response.delivery_timestamp
                    delivery_ms = ts.seconds * 1000 + ts.nanos // 1_000_000
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, what) from None
        code = int(status.code) if status is not None else int(Code.OK if messages else Code.INTERNAL_ERROR)
        if code not in (Code.OK, Code.MESSAGE_NOT_FOUND, Code.MULTIPLE_RESULTS):
            text = status.message if status is not None else "the stream carried no status"
            raise exception_for(code, f"{what}: {text}")
        return Received([_receipt_from_v2(pb) for pb in messages], code, delivery_ms)

    async def ack(self, endpoint: Endpoint, topic: str, entries: Sequence[tuple[str, str]]) -> list[tuple[str, int]]:
        """Ack ``(message_id, receipt_handle)`` pairs of one topic; returns ``(handle, code)`` failures.

        ``Pop/AckBatch`` (handles only) where the broker has it, else v2 AckMessage."""
        if self.receive_batch_enabled and not self.namespace and endpoint not in self._no_ack_batch:
            try:
                return await self._ack_batch(endpoint, topic, [h for _, h in entries])
            except _Unimplemented:
                self._no_ack_batch.add(endpoint)
                log.info("%s has no Pop/AckBatch, using v2 AckMessage", endpoint)
        return await self._ack_v2(endpoint, topic, entries)

    async def _ack_batch(self, endpoint: Endpoint, topic: str, handles: list[str]) -> list[tuple[str, int]]:
        request = pop_pb2.AckBatchRequest(group=self.group, topic=topic, receipt_handles=handles)
        what = f"AckBatch to {endpoint}"
        try:
            response: pop_pb2.AckBatchResponse = await self._stub(endpoint, pop_pb2_grpc.PopStub).AckBatch(
                request, metadata=self.core.headers.build(), timeout=self.timeout_s
            )
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                raise _Unimplemented from None
            raise from_rpc_error(exc, what) from None
        if response.status.code == Code.OK:
            return []
        if not response.failures:  # refused as a whole (permission, bad group, ...)
            check_status(definition_pb2.Status(code=response.status.code, message=response.status.message), what)
        return [(handles[f.index], int(f.status.code)) for f in response.failures]

    async def _ack_v2(
        self, endpoint: Endpoint, topic: str, entries: Sequence[tuple[str, str]]
    ) -> list[tuple[str, int]]:
        request = service_pb2.AckMessageRequest(
            group=self._group(),
            topic=self.core.resource(topic),
            entries=[service_pb2.AckMessageEntry(message_id=m, receipt_handle=h) for m, h in entries],
        )
        response = await self.core.rpc.call(endpoint, "AckMessage", request, self.timeout_s, check=False)
        code = int(response.status.code)
        if code == Code.OK:
            return []
        if code != Code.MULTIPLE_RESULTS and not response.entries:
            check_status(response.status, f"AckMessage to {endpoint}")
        return [(e.receipt_handle, int(e.status.code)) for e in response.entries if e.status.code != Code.OK]

    async def change_invisible(
        self, endpoint: Endpoint, topic: str, receipt_handle: str, message_id: str, delay_ms: int
    ) -> str:
        """ChangeInvisibleDuration: the message comes back after ``delay_ms`` with attempt + 1; the new handle."""
        request = service_pb2.ChangeInvisibleDurationRequest(
            group=self._group(),
            topic=self.core.resource(topic),
            receipt_handle=receipt_handle,
            message_id=message_id,
            invisible_duration=duration_ms(delay_ms),
        )
        response = await self.core.rpc.call(endpoint, "ChangeInvisibleDuration", request, self.timeout_s)
        return str(response.receipt_handle)

    async def forward_to_dlq(
        self, endpoint: Endpoint, topic: str, receipt_handle: str, message_id: str, attempt: int, max_attempts: int
    ) -> None:
        request = service_pb2.ForwardMessageToDeadLetterQueueRequest(
            group=self._group(),
            topic=self.core.resource(topic),
            receipt_handle=receipt_handle,
            message_id=message_id,
            delivery_attempt=attempt,
            max_delivery_attempts=max_attempts,
        )
        await self.core.rpc.call(endpoint, "ForwardMessageToDeadLetterQueue", request, self.timeout_s)

    async def query_assignment(self, topic: str, endpoint: Endpoint) -> list[definition_pb2.Assignment]:
        request = service_pb2.QueryAssignmentRequest(
            topic=self.core.resource(topic), group=self._group(), endpoints=endpoint.to_pb()
        )
        response = await self.core.rpc.call(endpoint, "QueryAssignment", request, self.timeout_s)
        return list(response.assignments)

    # -- offsets --------------------------------------------------------------------------------------------------

    async def get_offset(self, ref: QueueRef) -> int | None:
        """The group's committed offset, None when it never committed one (OFFSET_NOT_FOUND)."""
        request = service_pb2.GetOffsetRequest(group=self._group(), message_queue=ref.to_pb(self.namespace))
        try:
            response = await self.core.rpc.call(ref.endpoint, "GetOffset", request, self.timeout_s)
        except OMSResourceNotExistException as exc:
            if exc.code == Code.OFFSET_NOT_FOUND:
                return None
            raise
        return int(response.offset)

    async def update_offset(self, ref: QueueRef, offset: int) -> None:
        request = service_pb2.UpdateOffsetRequest(
            group=self._group(), message_queue=ref.to_pb(self.namespace), offset=offset
        )
        await self.core.rpc.call(ref.endpoint, "UpdateOffset", request, self.timeout_s)

    async def query_offset(self, ref: QueueRef, policy: int, timestamp_ms: int | None = None) -> int:
        """QueryOffset: BEGINNING, END, or the first offset stored at/after ``timestamp_ms``."""
        request = service_pb2.QueryOffsetRequest(message_queue=ref.to_pb(self.namespace), query_offset_policy=policy)
        if timestamp_ms is not None:
            request.timestamp.CopyFrom(
                timestamp_pb2.Timestamp(seconds=timestamp_ms // 1000, nanos=(timestamp_ms % 1000) * 1_000_000)
            )
        response = await self.core.rpc.call(ref.endpoint, "QueryOffset", request, self.timeout_s)
        return int(response.offset)

    async def start_offset(self, ref: QueueRef, where: ConsumeFromWhere, timestamp_ms: int) -> int:
        """Where a group without an offset starts on ``ref`` (``consume_from_where``)."""
        policy = definition_pb2.QueryOffsetPolicy
        if where is ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return await self.query_offset(ref, policy.BEGINNING)
        if where is ConsumeFromWhere.CONSUME_FROM_TIMESTAMP:
            return await self.query_offset(ref, policy.TIMESTAMP, timestamp_ms)
        return await self.query_offset(ref, policy.END)

    # -- batched pull ---------------------------------------------------------------------------------------------

    def _stub(self, endpoint: Endpoint, stub_type: Callable[[Any], S]) -> S:
        # OrbitMQ's own services (unary only) ride the access point's frame transport or its gRPC channel
        return self.core.runtime.pool.unary_stub(endpoint, stub_type)

    def _consume_stub(self, endpoint: Endpoint) -> consume_pb2_grpc.ConsumeStub:
        return self._stub(endpoint, consume_pb2_grpc.ConsumeStub)

    async def pull_batch(
        self,
        ref: QueueRef,
        offset: int,
        max_messages: int,
        long_polling_ms: int,
        selector: MessageSelector | None = None,
        max_bytes: int = 0,
        use_reset_offset: bool = False,
    ) -> consume_pb2.PullBatchResponse:
        """Records from ``offset`` on; OK and MESSAGE_NOT_FOUND return, other statuses raise (ILLEGAL_OFFSET...)."""
        filter_type, expression = selector.pull_filter() if selector is not None else ("", "")
        request = consume_pb2.PullBatchRequest(
            group=self.group,
            topic=ref.queue.topic,
            queue_id=ref.queue.queue_id,
            offset=offset,
            max_messages=max_messages,
            max_bytes=max_bytes,
            long_polling_ms=long_polling_ms,
            filter_type=filter_type,
            filter_expression=expression,
            use_reset_offset=use_reset_offset,
        )
        what = f"PullBatch from {ref.endpoint}"
        try:
            response: consume_pb2.PullBatchResponse = await self._consume_stub(ref.endpoint).PullBatch(
                request, metadata=self.core.headers.build(), timeout=long_polling_ms / 1000 + self.timeout_s
            )
        except grpc.RpcError as exc:
            error = from_rpc_error(exc, what)
            if isinstance(error, OMSConnectionException):
                self._route_may_have_moved(ref)
            raise error from None
        code = int(response.status.code)
        if code in (Code.OK, Code.MESSAGE_NOT_FOUND):
            return response
        if code == Code.MESSAGE_CORRUPTED:  # the broker skips a record that fails its CRC: pull on past it
            log.warning("%s: %s", what, response.status.message)
            return response
        if code == 0:
            raise exception_for(Code.INTERNAL_ERROR, f"{what}: the response carries no status")
        raise PullBatchError(code, f"{what}: {response.status.message}", response)

    # -- offset-based clustering: members, queue leases, send back -------------------------------------------------

    async def _consume_call(self, endpoint: Endpoint, rpc: str, request: Any) -> Any:
        """A unary ``orbitmq.consume`` call; a non-OK status raises with its code."""
        what = f"{rpc} to {endpoint}"
        try:
            response = await getattr(self._consume_stub(endpoint), rpc)(
                request, metadata=self.core.headers.build(), timeout=self.timeout_s
            )
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, what) from None
        code = int(response.status.code)
        if code != Code.OK:
            raise exception_for(code or Code.INTERNAL_ERROR, f"{what}: {response.status.message or code_name(code)}")
        return response

    async def consumer_list(self, endpoint: Endpoint) -> list[str]:
        """The client ids of the group's live members as ``endpoint`` knows them (sorted)."""
        request = consume_pb2.GetConsumerListRequest(group=self.group)
        response = await self._consume_call(endpoint, "GetConsumerList", request)
        return sorted(response.client_ids)

    async def lock_queues(self, endpoint: Endpoint, topic: str, queue_ids: Sequence[int]) -> tuple[set[int], int]:
        """Lock or renew queue leases for this client; the queues now held and the lease length in ms."""
        request = consume_pb2.LockQueuesRequest(
            group=self.group, topic=topic, client_id=self.core.client_id, queue_ids=list(queue_ids)
        )
        response = await self._consume_call(endpoint, "LockQueues", request)
        return set(response.locked_queue_ids), int(response.lease_ms)

    async def unlock_queues(self, endpoint: Endpoint, topic: str, queue_ids: Sequence[int]) -> None:
        request = consume_pb2.UnlockQueuesRequest(
            group=self.group, topic=topic, client_id=self.core.client_id, queue_ids=list(queue_ids)
        )
        await self._consume_call(endpoint, "UnlockQueues", request)

    async def send_back(
        self,
        endpoint: Endpoint,
        topic: str,
        commitlog_offset: int,
        queue_offset: int,
        delay_level: int,
        max_reconsume_times: int,
    ) -> consume_pb2.SendBackResponse:
        """consumerSendMsgBack: to %RETRY%<group>, or %DLQ%<group> past max reconsume times (delay_level < 0: now).

        The queue offset says which message of an inner batch (they share the record's commitlog offset)."""
        request = consume_pb2.SendBackRequest(
            group=self.group,
            topic=topic,
            commitlog_offset=commitlog_offset,
            delay_level=delay_level,
            max_reconsume_times=max_reconsume_times,
            queue_offset=queue_offset,
        )
        response: consume_pb2.SendBackResponse = await self._consume_call(endpoint, "SendBack", request)
        return response


class PullBatchError(OMSRuntimeException):
    """A PullBatch answered with an error status; ``response`` holds min/max/next offsets (ILLEGAL_OFFSET)."""

    def __init__(self, code: int, message: str, response: consume_pb2.PullBatchResponse) -> None:
        super().__init__(code, message)
        self.response = response
