"""``consumeMessage``: print messages of a topic or one queue with the queue-level pull API; commits nothing."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from oms.consumer.pull import PullConsumer, PullStatus
from oms.errors import OMSRuntimeException
from oms.message import BytesMessage
from oms.mqadmin.command import Admin, SubCommand, UsageError
from oms.mqadmin.message.views import where
from oms.mqadmin.options import parse_timestamp
from oms.mqadmin.output import body_text, table
from oms.queue import MessageQueue
from orbitmq.errors import Code

# RocketMQ defaults -g to its TOOLS_CONSUMER group, which the v2 protocol refuses to clients as a system group
TOOLS_CONSUMER_GROUP = "mqadmin-tools-consumer"
CONSUME_DEFAULT_COUNT = 128  # RocketMQ's consumeMessage -c default
CONSUME_PULL_BATCH = 32


class ConsumeMessageSubCommand(SubCommand[list[dict[str, Any]]]):
    """Reads (never commits) up to ``-c`` messages of a topic or one queue, from ``-o`` offset or the ``-s``
    timestamp (default: each queue's first message) up to the ``-e`` timestamp."""

    name = "consumeMessage"
    help = "Print messages of a topic or queue (reads only: commits no offset)."
    short_broker_addr = False  # -b is the broker name

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)
        parser.add_argument("-g", "--group", default=TOOLS_CONSUMER_GROUP, help=f"default {TOOLS_CONSUMER_GROUP}")
        parser.add_argument("-b", "--brokerName")
        parser.add_argument("-i", "--queueId", type=int)
        parser.add_argument("-o", "--offset", type=int, help="start offset in the -i queue")
        parser.add_argument("-c", "--count", type=int, default=CONSUME_DEFAULT_COUNT, help="at most this many messages")
        parser.add_argument(
            "-s", "--beginTimestamp", type=parse_timestamp, help="start at the first message stored since"
        )
        parser.add_argument("-e", "--endTimestamp", type=parse_timestamp, help="stop before messages stored after")

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[dict[str, Any]]:
        if args.offset is not None and args.queueId is None:
            raise UsageError("consumeMessage -o offset needs -i queueId (and -b brokerName on a multi-broker cluster)")
        if args.count <= 0:
            raise UsageError(f"-c must be positive, got {args.count}")
        rows: list[dict[str, Any]] = []
        with admin.access_point.create_pull_consumer(consumer_id=args.group, operation_timeout=args.timeout) as pc:
            queues = _chosen_queues(pc, args)
            if args.offset is not None and len(queues) > 1:
                raise UsageError(
                    "-o offset names one queue: give -b brokerName as well (the topic has several brokers)"
                )
            for queue in queues:
                if len(rows) >= args.count:
                    break
                rows.extend(_read_queue(pc, queue, args, args.count - len(rows)))
        return rows[: args.count]

    def render(self, result: list[dict[str, Any]], args: argparse.Namespace, out: TextIO) -> None:
        table(
            ["MsgId", "Broker Name", "QID", "Offset", "Tags", "Keys", "Body"],
            [
                (
                    r["msg_id"],
                    r["broker_name"],
                    r["queue_id"],
                    r["queue_offset"],
                    r["tags"] or "-",
                    ",".join(r["keys"]) or "-",
                    body_text(r["body"], 200).replace("\n", "\\n"),
                )
                for r in result
            ],
            out,
        )
        out.write(f"\n{len(result)} message(s)\n")


def _chosen_queues(pc: PullConsumer, args: argparse.Namespace) -> list[MessageQueue]:
    queues = sorted(pc.queues(args.topic))
    chosen = [
        q
        for q in queues
        if (args.brokerName is None or q.broker_name == args.brokerName)
        and (args.queueId is None or q.queue_id == args.queueId)
    ]
    if not chosen:
        raise OMSRuntimeException(
            Code.BAD_REQUEST,
            f"no readable queue {where(args.brokerName, args.queueId)} of topic {args.topic!r}; readable: "
            + ", ".join(f"{q.broker_name}:{q.queue_id}" for q in queues),
        )
    return chosen


def _read_queue(pc: PullConsumer, queue: MessageQueue, args: argparse.Namespace, limit: int) -> list[dict[str, Any]]:
    """Up to ``limit`` messages of one queue between the start (-o, -s or its first) and the end (-e or its last)."""
    if args.offset is not None:
        offset = args.offset
        low, high = pc.earliest_offset(queue), pc.latest_offset(queue)
        if not low <= offset <= high:
            raise OMSRuntimeException(
                Code.ILLEGAL_OFFSET, f"offset {offset} is outside {queue}: it holds offsets {low} to {high - 1}"
            )
    elif args.beginTimestamp is not None:
        offset = pc.offset_for_time(queue, args.beginTimestamp)
    else:
        offset = pc.earliest_offset(queue)
    end = pc.offset_for_time(queue, args.endTimestamp) if args.endTimestamp is not None else None
    end = pc.latest_offset(queue) if end is None else end
    rows: list[dict[str, Any]] = []
    while offset < end and len(rows) < limit:
        result = pc.pull(queue, offset, min(CONSUME_PULL_BATCH, end - offset, limit - len(rows)))
        if result.status is PullStatus.OFFSET_ILLEGAL:
            raise OMSRuntimeException(
                Code.ILLEGAL_OFFSET,
                f"offset {offset} is outside {queue} (min {result.min_offset}, max {result.max_offset})",
            )
        rows.extend(_message_row(msg, queue) for msg in result.messages if (msg.queue_offset or 0) < end)
        if result.next_offset <= offset:  # nothing more to read before the end
            break
        offset = result.next_offset
    return rows


def _message_row(message: BytesMessage, queue: MessageQueue) -> dict[str, Any]:
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
