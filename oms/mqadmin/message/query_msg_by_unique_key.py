"""``queryMsgByUniqueKey``: the messages of a topic with a producer's message id (its UNIQ_KEY)."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.message.views import print_message


class QueryMsgByUniqueKeySubCommand(SubCommand[list[m.MessageView]]):
    name = "queryMsgByUniqueKey"
    help = "Query the messages of a topic by a producer's message id (unique key)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-i", "--msgId", required=True)
        parser.add_argument("-t", "--topic", required=True)

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.MessageView]:
        return admin.resources.query_message_by_id(args.msgId.strip(), topic=args.topic)

    def render(self, result: list[m.MessageView], args: argparse.Namespace, out: TextIO) -> None:
        for n, view in enumerate(result):
            if n:
                out.write("\n")
            print_message(view, out)
