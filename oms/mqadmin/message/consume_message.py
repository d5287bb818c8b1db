"""``consumeMessage``: print messages of a topic or one queue with the queue-level pull API; commits nothing."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from oms.mqadmin.command import Admin, SubCommand, UsageError
from oms.mqadmin.message.reading import chosen_queues, read_queue
from oms.mqadmin.options import parse_timestamp
from oms.mqadmin.output import body_text, table

# RocketMQ defaults -g to its TOOLS_CONSUMER group, which the v2 protocol refuses to clients as a system group
TOOLS_CONSUMER_GROUP = "mqadmin-tools-consumer"
CONSUME_DEFAULT_COUNT = 128  # RocketMQ's consumeMessage -c default


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
            queues = chosen_queues(pc, args.topic, args.brokerName, args.queueId)
            if args.offset is not None and len(queues) > 1:
                raise UsageError(
                    "-o offset names one queue: give -b brokerName as well (the topic has several brokers)"
                )
            for queue in queues:
                if len(rows) >= args.count:
                    break
                rows.extend(
                    read_queue(
                        pc,
                        queue,
                        args.count - len(rows),
                        offset=args.offset,
                        begin_ms=args.beginTimestamp,
                        end_ms=args.endTimestamp,
                    )
                )
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
