"""Reading messages of queues with the queue-level pull API, for the commands that print messages
(consumeMessage, printMsg, printMsgByQueue): which queues, and their messages between two points as rows."""

from __future__ import annotations

from typing import Any

from oms.consumer.pull import PullConsumer, PullStatus
from oms.errors import OMSRuntimeException
from oms.message import BytesMessage
from oms.mqadmin.message.views import where
from oms.queue import MessageQueue
from orbitmq.errors import Code

CONSUME_PULL_BATCH = 32


def chosen_queues(pc: PullConsumer, topic: str, broker_name: str | None, queue_id: int | None) -> list[MessageQueue]:
    """The readable queues of ``topic``, narrowed to one broker and/or queue id; none is BAD_REQUEST."""
    queues = sorted(pc.queues(topic))
    chosen = [
        q
        for q in queues
        if (broker_name is None or q.broker_name == broker_name) and (queue_id is None or q.queue_id == queue_id)
    ]
    if not chosen:
        raise OMSRuntimeException(
            Code.BAD_REQUEST,
            f"no readable queue {where(broker_name, queue_id)} of topic {topic!r}; readable: "
            + ", ".join(f"{q.broker_name}:{q.queue_id}" for q in queues),
        )
    return chosen


def read_queue(
    pc: PullConsumer,
    queue: MessageQueue,
    limit: int,
    *,
    offset: int | None = None,
    begin_ms: int | None = None,
    end_ms: int | None = None,
) -> list[dict[str, Any]]:
    """Up to ``limit`` messages of one queue between the start (``offset``, ``begin_ms`` or its first) and the end
    (``end_ms`` or its last), as rows."""
    if offset is not None:
        low, high = pc.earliest_offset(queue), pc.latest_offset(queue)
        if not low <= offset <= high:
            raise OMSRuntimeException(
                Code.ILLEGAL_OFFSET, f"offset {offset} is outside {queue}: it holds offsets {low} to {high - 1}"
            )
    elif begin_ms is not None:
        offset = pc.offset_for_time(queue, begin_ms)
    else:
        offset = pc.earliest_offset(queue)
    end = pc.offset_for_time(queue, end_ms) if end_ms is not None else None
    end = pc.latest_offset(queue) if end is None else end
    rows: list[dict[str, Any]] = []
    while offset < end and len(rows) < limit:
        result = pc.pull(queue, offset, min(CONSUME_PULL_BATCH, end - offset, limit - len(rows)))
        if result.status is PullStatus.OFFSET_ILLEGAL:
            raise OMSRuntimeException(
                Code.ILLEGAL_OFFSET,
                f"offset {offset} is outside {queue} (min {result.min_offset}, max {result.max_offset})",
            )
        rows.extend(message_row(msg, queue) for msg in result.messages if (msg.queue_offset or 0) < end)
        if result.next_offset <= offset:  # nothing more to read before the end
            break
        offset = result.next_offset
    return rows


def message_row(message: BytesMessage, queue: MessageQueue) -> dict[str, Any]:
    return {
        "msg_id": message.message_id,
        "topic": queue.topic,
        "broker_name": queue.broker_name,
        "queue_id": queue.queue_id,
        "queue_offset": message.queue_offset,
        "tags": message.tags,
        "keys": message.keys,
        "born_timestamp_ms": message.born_timestamp,
        "store_timestamp_ms": message.store_timestamp,
        "body": message.body,
    }
