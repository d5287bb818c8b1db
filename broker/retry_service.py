"""Send-back for offset-based consumers (RocketMQ's consumerSendMsgBack): failed messages walk the delay levels
through ``%RETRY%<group>`` and end in ``%DLQ%<group>`` after the group's retryMaxTimes.

The retry copy is parked in ``SCHEDULE_TOPIC_XXXX`` queue ``level - 1`` by the timer service, so it survives a
restart mid-wait; it keeps the message id, its original topic (``RETRY_TOPIC``) and the reconsume count.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.context import BrokerContext
from broker.pop.dlq import (
    DLQ_NUMS_PER_GROUP,
    DROPPED_PROPERTIES,
    TRANSACTION_BITS,
    dead_letter,
)
from broker.store.message import MessageExt, MessageExtBrokerInner
from broker.store.results import AppendMessageResult
from broker.timer_service import to_delay_level
from orbitmq import message_const as mc
from orbitmq.delay import parse_delay_levels, retry_level
from orbitmq.errors import Code, MQError
from orbitmq.logging import get_logger
from orbitmq.route import READ_WRITE
from orbitmq.topics import dlq_topic, retry_topic

log = get_logger("broker.retry")


@dataclass(frozen=True)
class SendBackResult:
    destination: str
    reconsume_times: int
    deliver_ms: int


class RetryService:
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self.levels = parse_delay_levels(ctx.config.messageDelayLevel)

    async def send_back(
        self,
        group: str,
        topic: str,
        commitlog_offset: int,
        delay_level: int = 0,
        max_reconsume_times: int = 0,
        queue_offset: int | None = None,
    ) -> SendBackResult:
        ctx = self.ctx
        msg = ctx.store.look_message_by_offset(commitlog_offset, None, queue_offset)
        if msg is None:
            where = f"commitlog offset {commitlog_offset}"
            if queue_offset is not None:
                where += f", queue offset {queue_offset}"
            raise MQError(
                Code.MESSAGE_NOT_FOUND,
                f"no message at {where} (a message of an inner batch needs its queue_offset)",
            )
        if msg.topic != topic:
            raise MQError(
                Code.BAD_REQUEST, f"the message at commitlog offset {commitlog_offset} belongs to {msg.topic!r}"
            )
        gc = ctx.groups.get_or_auto_create(group)
        max_times = max_reconsume_times if max_reconsume_times > 0 else gc.retry_max_times
        now_ms = int(ctx.store.clock() * 1000)
        if msg.reconsume_times >= max_times or delay_level < 0:
            dest = dlq_topic(group)
            ctx.topics.create_internal(dest, DLQ_NUMS_PER_GROUP, READ_WRITE)
            letter = dead_letter(group, msg, msg.reconsume_times + 1, ctx.store_host)
            await self._put(letter)
            log.warning("message dead-lettered", group=group, topic=topic, reconsume_times=letter.reconsume_times)
            return SendBackResult(dest, letter.reconsume_times, 0)
        if ctx.timer is None:
            raise MQError(Code.NOT_IMPLEMENTED, "this broker has no timer service for retries")
        dest = retry_topic(group)
        ctx.topics.create_internal(dest, max(1, gc.retry_queue_nums), READ_WRITE)
        copy = self._retry_copy(dest, msg)
        level = delay_level if delay_level > 0 else retry_level(msg.reconsume_times, self.levels)
        deliver_ms = to_delay_level(copy, level, self.levels, now_ms)
        ar = await self._put(copy)
        ctx.timer.add(deliver_ms, ar.logics_offset, ar.wrote_offset, ar.wrote_bytes, queue_id=copy.queue_id)
        return SendBackResult(dest, copy.reconsume_times, deliver_ms)

    def _retry_copy(self, dest: str, msg: MessageExt) -> MessageExtBrokerInner:
        props = {k: v for k, v in msg.properties.items() if k not in DROPPED_PROPERTIES}
        props.setdefault(mc.PROPERTY_RETRY_TOPIC, msg.topic)  # the first failure names the real topic
        props.setdefault(mc.PROPERTY_ORIGIN_MESSAGE_ID, msg.unique_id or msg.msg_id)
        props[mc.PROPERTY_RECONSUME_TIME] = str(msg.reconsume_times + 1)
        return MessageExtBrokerInner(
            topic=dest,
            body=msg.body,
            queue_id=0,
            properties=props,
            flag=msg.flag,
            sys_flag=msg.sys_flag & ~TRANSACTION_BITS,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            store_host=self.ctx.store_host,
            reconsume_times=msg.reconsume_times + 1,
        )

    async def _put(self, inner: MessageExtBrokerInner) -> AppendMessageResult:
        result = await self.ctx.store.put_message_aio(inner)
        if not result.ok or result.append_result is None:
            raise MQError(Code.INTERNAL_SERVER_ERROR, f"storing the copy failed: {result.status.value} {result.error}")
        return result.append_result
