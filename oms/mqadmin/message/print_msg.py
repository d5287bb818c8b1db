"""``printMsg``: print the messages of every queue of a topic stored between two points in time (reads only)."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.message.consume_message import TOOLS_CONSUMER_GROUP
from oms.mqadmin.message.printing import add_charset_and_filter, print_row, tag_filter
from oms.mqadmin.message.reading import chosen_queues, read_queue
from oms.mqadmin.options import parse_bool, parse_timestamp
from oms.mqadmin.progress import add_progress_flag, progress_stream

PRINT_LIMIT_PER_QUEUE = 100_000  # a bound on one queue's read, far above what a terminal shows usefully


class PrintMsgSubCommand(SubCommand[list[dict[str, Any]]]):
    name = "printMsg"
    help = "Print the messages of a topic stored between -b and -e (every queue)."
    short_broker_addr = False  # -b is the begin timestamp

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)
        add_charset_and_filter(parser)
        parser.add_argument("-b", "--beginTimestamp", type=parse_timestamp, help="default: each queue's first")
        parser.add_argument("-e", "--endTimestamp", type=parse_timestamp, help="default: each queue's end")
        parser.add_argument("-d", "--printBody", type=parse_bool, default=True, help="true/false (default true)")
        add_progress_flag(parser)

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[dict[str, Any]]:
        keep = tag_filter(args.subExpression)
        progress = progress_stream(args)
        rows: list[dict[str, Any]] = []
        with admin.access_point.create_pull_consumer(
            consumer_id=TOOLS_CONSUMER_GROUP, operation_timeout=args.timeout
        ) as pc:
            queues = chosen_queues(pc, args.topic, None, None)
            for n, queue in enumerate(queues, 1):
                read = read_queue(
                    pc, queue, PRINT_LIMIT_PER_QUEUE, begin_ms=args.beginTimestamp, end_ms=args.endTimestamp
                )
                rows.extend(r for r in read if keep(r))
                if progress is not None:
                    progress.write(f"{queue}: {len(read)} message(s) read ({n}/{len(queues)} queues)\n")
        if not args.printBody:
            for row in rows:
                row["body"] = b""
        return rows

    def render(self, result: list[dict[str, Any]], args: argparse.Namespace, out: TextIO) -> None:
        for row in result:
            print_row(row, args.charsetName, args.printBody, out)
        out.write(f"\n{len(result)} message(s)\n")
