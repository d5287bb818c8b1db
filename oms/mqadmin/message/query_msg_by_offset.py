"""``queryMsgByOffset``: the message at one offset of one queue."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.message.views import print_message


class QueryMsgByOffsetSubCommand(SubCommand[m.MessageView]):
    name = "queryMsgByOffset"
    help = "Query the message at a queue offset."
    short_broker_addr = False  # -b is the broker name

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)
        parser.add_argument("-b", "--brokerName", help="needed when several brokers serve the topic")
        parser.add_argument("-i", "--queueId", type=int, required=True)
        parser.add_argument("-o", "--offset", type=int, required=True)

    def execute(self, args: argparse.Namespace, admin: Admin) -> m.MessageView:
        return admin.resources.query_message_by_offset(args.topic, args.queueId, args.offset, broker=args.brokerName)

    def render(self, result: m.MessageView, args: argparse.Namespace, out: TextIO) -> None:
        print_message(result, out)
