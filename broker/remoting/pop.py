"""Pop over remoting (RocketMQ 5's POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME) on the broker's pop
service, the one v2 ReceiveMessage uses: the same in-flight state, invisibility, redelivery and DLQ.

A popped message carries RocketMQ's ``POP_CK`` property (extraInfo): ``ckQueueOffset popTime invisibleTime reviveQid
topicMark brokerName queueId queueOffset``, space-separated, which the client echoes in its ack. The pop service tells
deliveries apart by a sequence number: its low 31 bits travel as ``reviveQid`` (an int the client hands back, also
in the new extraInfo it builds from a CHANGE_MESSAGE_INVISIBLETIME answer), so an ack of an older delivery is refused
like an expired v2 receipt handle.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from broker.pop.receipt import decode
from broker.pop.service import PopRequest, PopService
from broker.remoting.message_codec import encode_message
from orbitmq.errors import Code, MQError
from orbitmq.remoting.codec import FrameError, RemotingCommand
from orbitmq.remoting.codes import ResponseCode
from orbitmq.route import PermName
from orbitmq.topics import is_group_topic
from orbitmq.validation import validate_group, validate_topic

if TYPE_CHECKING:
    from broker.context import BrokerContext

PROPERTY_POP_CK = "POP_CK"
NORMAL_TOPIC_MARK = "0"  # ExtraInfoUtil's mark of a topic that is not a pop retry topic
_SEQ_MASK = 0x7FFFFFFF  # reviveQid is a Java int


def extra_info(ck_offset: int, pop_time: int, invisible: int, seq: int, broker: str, queue_id: int, offset: int) -> str:
    return f"{ck_offset} {pop_time} {invisible} {seq & _SEQ_MASK} {NORMAL_TOPIC_MARK} {broker} {queue_id} {offset}"


class RemotingPop:
    def __init__(self, ctx: BrokerContext, pop: PopService) -> None:
        self.ctx = ctx
        self.pop = pop

    async def pop_message(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        ctx, cfg = self.ctx, self.pop.config
        group, topic = cmd.field("consumerGroup"), cmd.field("topic")
        validate_group(group)
        validate_topic(topic, allow_system=is_group_topic(topic))
        queue_id = cmd.int_field("queueId")
        batch = cmd.int_field("maxMsgNums")
        invisible_ms = cmd.int_field("invisibleTime")
        poll_ms = cmd.int_field("pollTime")
        if not 0 < batch <= cfg.maxPopBatchSize:
            raise FrameError(f"POP_MESSAGE: header field 'maxMsgNums' is {batch}, allowed 1..{cfg.maxPopBatchSize}")
        if not cfg.minInvisibleTimeMillsForRecv <= invisible_ms <= cfg.maxInvisibleTimeMills:
            return cmd.response(
                ResponseCode.INVALID_PARAMETER,
                f"header field 'invisibleTime' is {invisible_ms} ms, allowed "
                f"[{cfg.minInvisibleTimeMillsForRecv}, {cfg.maxInvisibleTimeMills}] ms",
            )
        tc = ctx.topics.get(topic)
        if tc is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic!r} does not exist on this broker")
        if not PermName.is_readable(tc.perm) or tc.read_queue_nums <= 0:
            return cmd.response(ResponseCode.NO_PERMISSION, f"topic {topic!r} is not readable on this broker")
        if queue_id >= tc.read_queue_nums:
            raise FrameError(f"POP_MESSAGE: header field 'queueId' is {queue_id}, topic {topic!r} has "
                             f"{tc.read_queue_nums} read queues")  # fmt: skip
        gc = ctx.groups.get_or_auto_create(group)
        if not gc.consume_enable:
            return cmd.response(ResponseCode.NO_PERMISSION, f"consumer group {group!r} has consumeEnable=false")
        expression = cmd.ext_fields.get("exp") or "*"
        tag_filter = None
        if expression.strip() != "*":
            tag_filter = ctx.compiled_filter(group, topic, cmd.ext_fields.get("expType") or "TAG", expression)
        queue_ids = list(range(tc.read_queue_nums)) if queue_id < 0 else [queue_id]
        fifo = cmd.ext_fields.get("order", "false").lower() == "true" or bool(gc.consume_message_orderly)
        request = PopRequest(
            group,
            topic,
            queue_ids,
            batch,
            invisible_ms,
            False,
            tag_filter,
            fifo,
            gc.retry_max_times + 1,
            "",  # remoting consumers are not Telemetry clients: their messages come back when invisibility ends
            max(0.0, min(poll_ms, cfg.popPollingMaxMs) / 1000),
            cmd.ext_fields.get("attemptId") or "",
        )
        answered = self.pop.read_messages(await self.pop.pop(request))
        rest = sum(
            max(0, ctx.store.get_max_offset_in_queue(topic, q) - max(0, ctx.offsets.query_offset(group, topic, q)))
            for q in queue_ids
        )
        if not answered:
            return cmd.response(
                ResponseCode.PULL_NOT_FOUND, "no new message", popTime=0, invisibleTime=invisible_ms, reviveQid=0,
                restNum=rest,
            )  # fmt: skip
        first_offset: dict[int, int] = {}
        offsets: dict[int, list[int]] = {}
        for p, _msg in answered:
            qid, off = p.delivery.key[2], p.delivery.flight.offset
            first_offset.setdefault(qid, off)
            offsets.setdefault(qid, []).append(off)
        body = []
        for p, msg in answered:
            f, qid = p.delivery.flight, p.delivery.key[2]
            ck = extra_info(first_offset[qid], f.pop_time_ms, f.invisible_ms, f.seq, ctx.broker_name, qid, f.offset)
            shown = dataclasses.replace(
                msg, properties={**msg.properties, PROPERTY_POP_CK: ck}, reconsume_times=max(0, f.attempts - 1)
            )
            body.append(encode_message(shown))
        first = answered[0][0].delivery.flight
        response = cmd.response(
            ResponseCode.SUCCESS,
            None,
            popTime=first.pop_time_ms,
            invisibleTime=first.invisible_ms,
            reviveQid=first.seq & _SEQ_MASK,
            restNum=max(0, rest - len(answered)),
            # present so that the Java client keeps each message's own POP_CK instead of building one
            startOffsetInfo=";".join(f"{NORMAL_TOPIC_MARK} {q} {o}" for q, o in first_offset.items()),
            msgOffsetInfo=";".join(
                f"{NORMAL_TOPIC_MARK} {q} {','.join(str(o) for o in os)}" for q, os in offsets.items()
            ),
        )
        response.body = b"".join(body)
        return response

    async def ack_message(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        try:
            group, topic, handle = self._handle(cmd)
            self.pop.ack_handle(group, topic, handle)
        except MQError as exc:
            return self._refused(cmd, exc)
        return cmd.response(ResponseCode.SUCCESS)

    async def change_invisible_time(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        invisible_ms = cmd.int_field("invisibleTime")
        try:
            group, topic, handle = self._handle(cmd)
            new = decode(self.pop.change_handle(group, topic, handle, invisible_ms))
        except MQError as exc:
            return self._refused(cmd, exc)
        return cmd.response(
            ResponseCode.SUCCESS,
            None,
            popTime=new.pop_time_ms,
            invisibleTime=new.invisible_ms,
            reviveQid=new.seq & _SEQ_MASK,
        )

    def _handle(self, cmd: RemotingCommand) -> tuple[str, str, str]:
        """The pop service's receipt handle of the delivery ``extraInfo`` names; MQError when it is not the current
        one (acked, redelivered, or its invisible time changed since)."""
        group, topic = cmd.field("consumerGroup"), cmd.field("topic")
        queue_id, offset = cmd.int_field("queueId"), cmd.int_field("offset")
        fields = cmd.field("extraInfo").split(" ")
        if len(fields) < 4 or not fields[1].lstrip("-").isdigit() or not fields[3].lstrip("-").isdigit():
            raise FrameError(
                f"request code {cmd.code}: header field 'extraInfo' is not RocketMQ's "
                "'ckQueueOffset popTime invisibleTime reviveQid topicMark brokerName queueId queueOffset'"
            )
        pop_time, revive_qid = int(fields[1]), int(fields[3])
        handle = self.pop.current_handle(group, topic, queue_id, offset)
        current = decode(handle) if handle is not None else None
        if (
            handle is None
            or current is None
            or (current.seq & _SEQ_MASK) != revive_qid
            or current.pop_time_ms != pop_time
        ):
            raise MQError(
                Code.INVALID_RECEIPT_HANDLE,
                f"the delivery of {topic} queue {queue_id} offset {offset} that 'extraInfo' names is not in flight "
                "(already acked, redelivered, or its invisible time changed since)",
            )
        return group, topic, handle

    @staticmethod
    def _refused(cmd: RemotingCommand, exc: MQError) -> RemotingCommand:
        if exc.code in (Code.INVALID_RECEIPT_HANDLE, Code.ILLEGAL_INVISIBLE_TIME):
            code = (
                ResponseCode.NO_MESSAGE if exc.code is Code.INVALID_RECEIPT_HANDLE else ResponseCode.INVALID_PARAMETER
            )
            return cmd.response(code, exc.message)
        raise exc
