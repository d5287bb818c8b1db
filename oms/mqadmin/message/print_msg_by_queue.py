"""``printMsgByQueue``: the messages of one queue stored between two points in time, printed and/or counted by
tag (``-r``)."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any, TextIO

from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.message.consume_message import TOOLS_CONSUMER_GROUP
from oms.mqadmin.message.print_msg import PRINT_LIMIT_PER_QUEUE
from oms.mqadmin.message.printing import add_charset_and_filter, print_row, tag_filter
from oms.mqadmin.message.reading import chosen_queues, read_queue
from oms.mqadmin.options import parse_bool, parse_timestamp


class PrintMsgByQueueSubCommand(SubCommand[dict[str, Any]]):
    name = "printMsgByQueue"
    help = "Print (-p) or count by tag (-r) the messages of one queue stored between -b and -e."
    short_broker_addr = False  # -b is the begin timestamp

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)
        parser.add_argument("-a", "--brokerName", required=True)
        parser.add_argument("-i", "--queueId", type=int, required=True)
        add_charset_and_filter(parser)
        parser.add_argument("-b", "--beginTimestamp", type=parse_timestamp, help="default: the queue's first")
        parser.add_argument("-e", "--endTimestamp", type=parse_timestamp, help="default: the queue's end")
        parser.add_argument("-p", "--print", type=parse_bool, default=False, help="print messages (default false)")
        parser.add_argument("-f", "--printBody", type=parse_bool, default=False, help="with bodies (default false)")
        parser.add_argument("-r", "--calculate", type=parse_bool, default=False, help="count by tag (default false)")

    def execute(self, args: argparse.Namespace, admin: Admin) -> dict[str, Any]:
        keep = tag_filter(args.subExpression)
        with admin.access_point.create_pull_consumer(
            consumer_id=TOOLS_CONSUMER_GROUP, operation_timeout=args.timeout
        ) as pc:
            (queue,) = chosen_queues(pc, args.topic, args.brokerName, args.queueId)
            rows = [
                r
                for r in read_queue(
                    pc, queue, PRINT_LIMIT_PER_QUEUE, begin_ms=args.beginTimestamp, end_ms=args.endTimestamp
                )
                if keep(r)
            ]
        tags = Counter(r["tags"] or "" for r in rows)
        if not args.printBody:
            for row in rows:
                row["body"] = b""
        return {"messages": rows if args.print else [], "count": len(rows), "tags": dict(tags.most_common())}

    def render(self, result: dict[str, Any], args: argparse.Namespace, out: TextIO) -> None:
        for row in result["messages"]:
            print_row(row, args.charsetName, args.printBody, out)
        if args.calculate:
            for tag, count in result["tags"].items():
                out.write(f"Tag: {tag or '-':<40} Count: {count}\n")
        out.write(f"\n{result['count']} message(s)\n")
