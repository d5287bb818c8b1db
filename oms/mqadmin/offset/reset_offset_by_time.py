"""``resetOffsetByTime``: commit, for every queue of a topic, the offset of the first message stored at a time."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.options import parse_timestamp
from oms.mqadmin.output import human_time, table


class ResetOffsetByTimeSubCommand(SubCommand[dict[str, Any]]):
    name = "resetOffsetByTime"
    help = "Reset a group's offsets to a point in time."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-g", "--group", required=True)
        parser.add_argument("-t", "--topic", required=True)
        parser.add_argument(
            "-s", "--timestamp", required=True, type=parse_timestamp, help="now, ms, or yyyy-MM-dd#HH:mm:ss:SSS"
        )

    def execute(self, args: argparse.Namespace, admin: Admin) -> dict[str, Any]:
        resets = admin.resources.reset_offset_by_time(args.group, args.topic, args.timestamp)
        return {"group": args.group, "topic": args.topic, "timestamp_ms": args.timestamp, "offsets": resets}

    def render(self, result: dict[str, Any], args: argparse.Namespace, out: TextIO) -> None:
        out.write(f"reset offsets of group {args.group} on topic {args.topic} to {human_time(args.timestamp)}\n")
        table(["Broker Name", "QID", "Offset"], [(r.broker_name, r.queue_id, r.offset) for r in result["offsets"]], out)
