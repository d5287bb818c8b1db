"""``queryMsgById``: messages by offset message id, or by a producer's (unique) id with the topic."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.message.views import print_message


class QueryMsgByIdSubCommand(SubCommand[list[m.MessageView]]):
    name = "queryMsgById"
    help = "Query messages by offset message id (or unique id + -t)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-i", "--msgId", required=True, help="one id or several, comma-separated")
        parser.add_argument("-t", "--topic", help="narrows a producer's (unique) message id to one topic (faster)")

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.MessageView]:
        views: list[m.MessageView] = []
        for msg_id in (i.strip() for i in args.msgId.split(",")):
            if msg_id:
                views.extend(admin.resources.query_message_by_id(msg_id, topic=args.topic))
        return views

    def render(self, result: list[m.MessageView], args: argparse.Namespace, out: TextIO) -> None:
        for n, view in enumerate(result):
            if n:
                out.write("\n")
            print_message(view, out)
