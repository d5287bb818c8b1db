"""``orbitmq.consume.Consume``: PullBatch (offset-based pulls answered with the stored records in one response)
SendBack (failed messages to ``%RETRY%``/``%DLQ%``, ``broker/retry_service.py``) and queue leases for orderly
consumers (``broker/queue_lock_manager.py``).

Same validation, filters, ACL and long polling as v2 PullMessage; the difference is the payload, which avoids
one gRPC stream message per record (the ceiling of v2 PullMessage in grpc-python, ``docs/broker.md``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

from rocketmq.grpc_protocol import definition_pb2

from broker import access
from broker.context import BrokerContext
from broker.grpc.pull import DEADLINE_MARGIN_S, corrupt_message, readable_topic, remaining_seconds
from broker.hookspecs import Action
from broker.retry_service import RetryService
from broker.store.results import GetMessageStatus
from orbitmq.errors import Code, MQError
from orbitmq.limits import MAX_PULL_BATCH_SIZE
from orbitmq.logging import get_logger
from orbitmq.proto import consume_pb2, consume_pb2_grpc
from orbitmq.topics import is_retry_topic
from orbitmq.validation import validate_group, validate_topic

log = get_logger("broker.pull_batch")

DEFAULT_BATCH = 256
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
MAX_BYTES_LIMIT = 16 * 1024 * 1024
_RETRY_SCAN = {GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.MESSAGE_WAS_REMOVING}
_AT_END = {
    GetMessageStatus.OFFSET_OVERFLOW_ONE,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE,
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
    *_RETRY_SCAN,
}


def _status(code: Code, message: str = "") -> consume_pb2.Status:
    return consume_pb2.Status(code=int(code), message=message)


class ConsumeServicer(consume_pb2_grpc.ConsumeServicer):
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.retry = RetryService(ctx)
        self.locks = ctx.queue_locks

    def _lease_target(
        self, rpc: str, group: str, topic: str, client_id: str, queue_ids: Iterable[int], context: Any
    ) -> None:
        validate_group(group)
        validate_topic(topic, allow_system=is_retry_topic(topic))
        if not client_id.strip():
            raise MQError(Code.CLIENT_ID_REQUIRED, "client_id is required to hold a queue lease")
        access.check(self.ctx.plugins, context, rpc, access.topic(topic, Action.SUB), access.group(group))
        tc = self.ctx.topics.get(topic)
        if tc is None:
            raise MQError(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist on broker {self.ctx.broker_name}")
        bad = [q for q in queue_ids if not 0 <= q < tc.read_queue_nums]
        if bad:
            raise MQError(Code.BAD_REQUEST, f"queue ids {bad} are outside [0, {tc.read_queue_nums}) of {topic!r}")

    async def LockQueues(self, request: consume_pb2.LockQueuesRequest, context: Any) -> consume_pb2.LockQueuesResponse:
        try:
            self._lease_target(
                "LockQueues", request.group, request.topic, request.client_id, request.queue_ids, context
            )
            max_ms = self.ctx.config.rebalanceLockMaxLiveTime
            if request.lease_ms < 0 or request.lease_ms > max_ms:
                raise MQError(Code.BAD_REQUEST, f"lease_ms {request.lease_ms} is outside [0, {max_ms}]")
            lease_ms = request.lease_ms or max_ms
            held = self.locks.try_lock(
                request.group, request.topic, request.client_id, request.queue_ids, lease_ms / 1000
            )
        except MQError as exc:
            log.info("request refused", rpc="LockQueues", code=exc.code.name, reason=exc.message)
            return consume_pb2.LockQueuesResponse(status=_status(exc.code, exc.message))
        return consume_pb2.LockQueuesResponse(status=_status(Code.OK), locked_queue_ids=held, lease_ms=lease_ms)

    async def UnlockQueues(
        self, request: consume_pb2.UnlockQueuesRequest, context: Any
    ) -> consume_pb2.UnlockQueuesResponse:
        try:
            self._lease_target(
                "UnlockQueues", request.group, request.topic, request.client_id, request.queue_ids, context
            )
            self.locks.unlock(request.group, request.topic, request.client_id, request.queue_ids)
        except MQError as exc:
            log.info("request refused", rpc="UnlockQueues", code=exc.code.name, reason=exc.message)
            return consume_pb2.UnlockQueuesResponse(status=_status(exc.code, exc.message))
        return consume_pb2.UnlockQueuesResponse(status=_status(Code.OK))

    async def GetConsumerList(
        self, request: consume_pb2.GetConsumerListRequest, context: Any
    ) -> consume_pb2.GetConsumerListResponse:
        try:
            validate_group(request.group)
            access.check(self.ctx.plugins, context, "GetConsumerList", access.group(request.group))
            ids = sorted({c.client_id for c in self.ctx.telemetry.clients(group=request.group)})
        except MQError as exc:
            log.info("request refused", rpc="GetConsumerList", code=exc.code.name, reason=exc.message)
            return consume_pb2.GetConsumerListResponse(status=_status(exc.code, exc.message))
        return consume_pb2.GetConsumerListResponse(status=_status(Code.OK), client_ids=ids)

    async def SendBack(self, request: consume_pb2.SendBackRequest, context: Any) -> consume_pb2.SendBackResponse:
        try:
            validate_group(request.group)
            validate_topic(request.topic, allow_system=is_retry_topic(request.topic))
            access.check(
                self.ctx.plugins,
                context,
                "SendBack",
                access.topic(request.topic, Action.SUB),
                access.group(request.group),
            )
            result = await self.retry.send_back(
                request.group,
                request.topic,
                request.commitlog_offset,
                request.delay_level,
                request.max_reconsume_times,
                request.queue_offset if request.HasField("queue_offset") else None,
            )
        except MQError as exc:
            log.info("request refused", rpc="SendBack", code=exc.code.name, reason=exc.message)
            return consume_pb2.SendBackResponse(status=_status(exc.code, exc.message))
        except Exception as exc:
            log.exception("SendBack failed", error=repr(exc))
            return consume_pb2.SendBackResponse(
                status=_status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
            )
        return consume_pb2.SendBackResponse(
            status=_status(Code.OK),
            destination=result.destination,
            reconsume_times=result.reconsume_times,
            deliver_timestamp_ms=result.deliver_ms,
        )

    async def PullBatch(self, request: consume_pb2.PullBatchRequest, context: Any) -> consume_pb2.PullBatchResponse:
        try:
            return await self._pull(request, context)
        except MQError as exc:
            log.info("request refused", rpc="PullBatch", code=exc.code.name, reason=exc.message)
            return consume_pb2.PullBatchResponse(status=_status(exc.code, exc.message), next_offset=request.offset)
        except Exception as exc:
            log.exception("PullBatch failed", error=repr(exc))
            return consume_pb2.PullBatchResponse(
                status=_status(Code.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}"), next_offset=request.offset
            )

    async def _pull(self, request: consume_pb2.PullBatchRequest, context: Any) -> consume_pb2.PullBatchResponse:
        ctx = self.ctx
        topic, qid, group = request.topic, request.queue_id, request.group
        validate_group(group)
        access.check(ctx.plugins, context, "PullBatch", access.topic(topic, Action.SUB), access.group(group))
        readable_topic(ctx, definition_pb2.MessageQueue(topic=definition_pb2.Resource(name=topic), id=qid))
        if request.offset < 0:
            raise MQError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
        if request.max_messages < 0 or request.max_bytes < 0 or request.long_polling_ms < 0:
            raise MQError(Code.BAD_REQUEST, "max_messages, max_bytes and long_polling_ms must not be negative")
        batch = min(request.max_messages or DEFAULT_BATCH, MAX_PULL_BATCH_SIZE)
        max_bytes = min(request.max_bytes or DEFAULT_MAX_BYTES, MAX_BYTES_LIMIT)
        msg_filter = (
            ctx.compiled_filter(group, topic, request.filter_type, request.filter_expression)
            if request.filter_type
            else None
        )
        polling_s = min(request.long_polling_ms / 1000, ctx.config.longPollingMaxMs / 1000)
        remaining = remaining_seconds(context)
        if remaining is not None:
            polling_s = max(0.0, min(polling_s, remaining - DEADLINE_MARGIN_S))
        deadline = time.monotonic() + polling_s
        offset = request.offset
        reset = ctx.offsets.query_then_erase_reset_offset(group, topic, qid) if request.use_reset_offset else None
        if reset is not None:
            log.info("serving a reset offset", group=group, topic=topic, queue_id=qid, offset=reset)
            offset = reset
        was_reset = reset is not None
        store = ctx.store
        while True:
            result = store.get_message_raw(group, topic, qid, offset, batch, msg_filter, max_bytes)
            if result.status is GetMessageStatus.FOUND:
                return consume_pb2.PullBatchResponse(
                    status=_status(Code.OK),
                    next_offset=result.next_begin_offset,
                    min_offset=result.min_offset,
                    max_offset=result.max_offset,
                    count=result.raw_count,
                    records=result.raw,
                    offset_reset=was_reset,
                )
            if result.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY):
                # The bounds travel with the refusal so the client corrects its offset without another call.
                return consume_pb2.PullBatchResponse(
                    status=_status(
                        Code.ILLEGAL_OFFSET,
                        f"offset {offset} is outside [{result.min_offset}, {result.max_offset}] of queue {qid}",
                    ),
                    next_offset=result.next_begin_offset,
                    min_offset=result.min_offset,
                    max_offset=result.max_offset,
                    offset_reset=was_reset,
                )
            if result.status is GetMessageStatus.MESSAGE_CORRUPTED:
                return consume_pb2.PullBatchResponse(
                    status=_status(Code.MESSAGE_CORRUPTED, corrupt_message(topic, qid, offset)),
                    next_offset=result.next_begin_offset,
                    min_offset=result.min_offset,
                    max_offset=result.max_offset,
                    offset_reset=was_reset,
                )
            if result.status in _RETRY_SCAN:
                offset = max(offset, result.next_begin_offset)
            left = deadline - time.monotonic()
            if result.status not in _AT_END or left <= 0:
                break
            if offset < store.get_max_offset_in_queue(topic, qid):
                await asyncio.sleep(0)  # a filter skipped a whole scan window: keep scanning, let others run
                continue
            if not await ctx.long_polling.wait(topic, qid, offset, left):
                break
        return consume_pb2.PullBatchResponse(
            status=_status(Code.MESSAGE_NOT_FOUND, "no new message"),
            next_offset=offset,
            min_offset=store.get_min_offset_in_queue(topic, qid),
            max_offset=store.get_max_offset_in_queue(topic, qid),
            offset_reset=was_reset,
        )
