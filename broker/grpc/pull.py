"""Offset-based consumption: PullMessage (with long polling), GetOffset, UpdateOffset, QueryOffset.

PullMessage streams one status, the messages, then one ``next_offset`` (protocol-v2 §7.2).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from rocketmq.grpc_protocol import definition_pb2, service_pb2

from broker.context import BrokerContext
from broker.grpc.convert import timestamp_to_ms, to_v2_message
from broker.store.results import GetMessageStatus
from orbitmq.errors import Code, MQError
from orbitmq.limits import MAX_PULL_BATCH_SIZE
from orbitmq.route import PermName, TopicConfig
from orbitmq.v2.status import ok_status, status
from orbitmq.validation import validate_group, validate_topic

DEFAULT_PULL_BATCH = 32
# Finish a long poll this long before the client's deadline so it never times out on its own.
DEADLINE_MARGIN_S = 0.2

_AT_END = {
    GetMessageStatus.OFFSET_OVERFLOW_ONE,
    GetMessageStatus.NO_MESSAGE_IN_QUEUE,
    GetMessageStatus.NO_MATCHED_LOGIC_QUEUE,
    GetMessageStatus.NO_MATCHED_MESSAGE,
    GetMessageStatus.MESSAGE_WAS_REMOVING,
}


def readable_topic(ctx: BrokerContext, mq: definition_pb2.MessageQueue) -> TopicConfig:
    topic = mq.topic.name
    validate_topic(topic, allow_system=True)
    tc = ctx.topics.get(topic)
    if tc is None:
        raise MQError(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist on broker {ctx.broker_name}")
    if not PermName.is_readable(tc.perm):
        raise MQError(Code.FORBIDDEN, f"topic {topic!r} is not readable on broker {ctx.broker_name}")
    if not 0 <= mq.id < max(tc.read_queue_nums, tc.write_queue_nums):
        raise MQError(
            Code.BAD_REQUEST,
            f"queue id {mq.id} is out of range: topic {topic!r} has {tc.read_queue_nums} read queues",
        )
    return tc


def corrupt_message(topic: str, queue_id: int, offset: int) -> str:
    """The answer for a record that fails its CRC: the consumer pulls on from ``next_offset``."""
    return (
        f"the message at offset {offset} of {topic}:{queue_id} fails its CRC check: skipped (the broker reported "
        "and quarantined it); pull on from next_offset"
    )


def remaining_seconds(context: Any) -> float | None:
    try:
        remaining = context.time_remaining()
    except Exception:
        return None
    return None if remaining is None else float(remaining)


class PullService:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def pull(
        self, request: service_pb2.PullMessageRequest, context: Any
    ) -> AsyncIterator[service_pb2.PullMessageResponse]:
        ctx = self.ctx
        try:
            validate_group(request.group.name)
            readable_topic(ctx, request.message_queue)
            msg_filter = ctx.subscription_filter(
                request.group.name,
                request.message_queue.topic.name,
                request.filter_expression if request.HasField("filter_expression") else None,
            )
            if request.offset < 0:
                raise MQError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
        except MQError as exc:
            yield service_pb2.PullMessageResponse(status=status(exc.code, exc.message))
            yield service_pb2.PullMessageResponse(next_offset=max(0, request.offset))
            return
        topic, qid = request.message_queue.topic.name, request.message_queue.id
        batch = request.batch_size if request.batch_size > 0 else DEFAULT_PULL_BATCH
        batch = min(batch, MAX_PULL_BATCH_SIZE)
        polling_s = 0.0
        if request.HasField("long_polling_timeout"):
            lp = request.long_polling_timeout
            polling_s = min(lp.seconds + lp.nanos / 1e9, ctx.config.longPollingMaxMs / 1000)
        remaining = remaining_seconds(context)
        if remaining is not None:
            polling_s = max(0.0, min(polling_s, remaining - DEADLINE_MARGIN_S))
        deadline = time.monotonic() + polling_s
        offset = request.offset
        group = request.group.name
        while True:
            result = ctx.store.get_message(group, topic, qid, offset, batch, msg_filter)
            if result.status is GetMessageStatus.FOUND:
                yield service_pb2.PullMessageResponse(status=ok_status())
                for m in result.messages:
                    resp = service_pb2.PullMessageResponse()
                    to_v2_message(m, delivery_attempt=m.reconsume_times + 1, into=resp.message)
                    yield resp
                yield service_pb2.PullMessageResponse(next_offset=result.next_begin_offset)
                return
            if result.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY):
                yield service_pb2.PullMessageResponse(
                    status=status(
                        Code.ILLEGAL_OFFSET,
                        f"offset {offset} is outside [{result.min_offset}, {result.max_offset}] of queue {qid}",
                    )
                )
                yield service_pb2.PullMessageResponse(next_offset=result.next_begin_offset)
                return
            if result.status is GetMessageStatus.MESSAGE_CORRUPTED:
                yield service_pb2.PullMessageResponse(
                    status=status(Code.MESSAGE_CORRUPTED, corrupt_message(topic, qid, offset))
                )
                yield service_pb2.PullMessageResponse(next_offset=result.next_begin_offset)
                return
            if result.status in (GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.MESSAGE_WAS_REMOVING):
                offset = max(offset, result.next_begin_offset)
            left = deadline - time.monotonic()
            if result.status not in _AT_END or left <= 0:
                break
            if offset < ctx.store.get_max_offset_in_queue(topic, qid):
                await asyncio.sleep(0)  # a filter skipped a whole scan window: keep scanning, but let others run
                continue
            if not await ctx.long_polling.wait(topic, qid, offset, left):
                break  # timed out, or the broker is shutting down
        yield service_pb2.PullMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
        yield service_pb2.PullMessageResponse(next_offset=offset)

    # ------------------------------------------------------------------ offsets
    async def get_offset(self, request: service_pb2.GetOffsetRequest) -> service_pb2.GetOffsetResponse:
        validate_group(request.group.name)
        readable_topic(self.ctx, request.message_queue)
        mq = request.message_queue
        offset = self.ctx.offsets.query_offset(request.group.name, mq.topic.name, mq.id)
        if offset < 0:
            raise MQError(
                Code.OFFSET_NOT_FOUND,
                f"group {request.group.name!r} has no committed offset on {mq.topic.name!r} queue {mq.id}",
            )
        return service_pb2.GetOffsetResponse(status=ok_status(), offset=offset)

    async def update_offset(self, request: service_pb2.UpdateOffsetRequest) -> service_pb2.UpdateOffsetResponse:
        validate_group(request.group.name)
        readable_topic(self.ctx, request.message_queue)
        mq = request.message_queue
        max_offset = self.ctx.store.get_max_offset_in_queue(mq.topic.name, mq.id)
        if request.offset < 0 or request.offset > max_offset:
            raise MQError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is outside [0, {max_offset}] of queue {mq.id}")
        self.ctx.groups.get_or_auto_create(request.group.name)
        self.ctx.offsets.commit_offset(request.group.name, mq.topic.name, mq.id, request.offset)
        return service_pb2.UpdateOffsetResponse(status=ok_status())

    async def query_offset(self, request: service_pb2.QueryOffsetRequest) -> service_pb2.QueryOffsetResponse:
        mq = request.message_queue
        readable_topic(self.ctx, mq)
        store = self.ctx.store
        policy = request.query_offset_policy
        if policy == definition_pb2.QueryOffsetPolicy.BEGINNING:
            offset = store.get_min_offset_in_queue(mq.topic.name, mq.id)
        elif policy == definition_pb2.QueryOffsetPolicy.END:
            offset = store.get_max_offset_in_queue(mq.topic.name, mq.id)
        elif policy == definition_pb2.QueryOffsetPolicy.TIMESTAMP:
            if not request.HasField("timestamp"):
                raise MQError(Code.BAD_REQUEST, "query_offset_policy TIMESTAMP needs a timestamp")
            offset = store.get_offset_in_queue_by_time(mq.topic.name, mq.id, timestamp_to_ms(request.timestamp))
        else:
            raise MQError(Code.BAD_REQUEST, f"unknown query_offset_policy {policy}")
        return service_pb2.QueryOffsetResponse(status=ok_status(), offset=offset)
