"""``consumerConnection``: the consumers of a group the brokers know (gRPC clients included) and what they
subscribe to."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.errors import OMSResourceNotExistException
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.group.views import connection_table
from orbitmq.errors import Code


class ConsumerConnectionSubCommand(SubCommand[list[m.ClientConnection]]):
    name = "consumerConnection"
    help = "List the connected consumers of a group and their subscriptions."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-g", "--consumerGroup", required=True)

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.ClientConnection]:
        rows = admin.resources.client_connections(group=args.consumerGroup)
        if not rows:  # RocketMQ answers CONSUMER_NOT_ONLINE
            raise OMSResourceNotExistException(Code.NOT_FOUND, f"no consumer of group {args.consumerGroup!r} is online")
        return rows

    def render(self, result: list[m.ClientConnection], args: argparse.Namespace, out: TextIO) -> None:
        connection_table(result, out)
        out.write("\nBelow is subscription:\n")
        subs = sorted({(t, e) for c in result for t, e in c.subscriptions.items()})
        for n, (topic, expression) in enumerate(subs, 1):
            out.write(f"{n:03d}  Topic: {topic:<40} SubExpression: {expression}\n")
