"""``queryMsgByKey``: the newest messages of a topic with a key, within a store-time range."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.options import parse_timestamp
from oms.mqadmin.output import human_time, table


class QueryMsgByKeySubCommand(SubCommand[list[m.MessageView]]):
    name = "queryMsgByKey"
    help = "Query messages by key."
    short_broker_addr = False  # -b is the begin timestamp

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)
        parser.add_argument("-k", "--msgKey", required=True)
        parser.add_argument("-b", "--beginTimestamp", type=parse_timestamp, default=0)
        parser.add_argument("-e", "--endTimestamp", type=parse_timestamp, default=None)
        parser.add_argument("-c", "--maxNum", type=int, default=64)

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.MessageView]:
        return admin.resources.query_message_by_key(
            args.topic, args.msgKey, max_num=args.maxNum, begin_ms=args.beginTimestamp, end_ms=args.endTimestamp
        )

    def render(self, result: list[m.MessageView], args: argparse.Namespace, out: TextIO) -> None:
        rows = [
            (v.msg_id, v.unique_id, v.broker_name, v.queue_id, v.queue_offset, human_time(v.store_timestamp_ms))
            for v in result
        ]
        table(["Message ID", "Unique Key", "Broker Name", "QID", "Offset", "Store Time"], rows, out)
