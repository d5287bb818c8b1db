"""``producerConnection``: the producers sending to a topic (v2 producers have no group: ``-g`` narrows when given)."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.errors import OMSResourceNotExistException
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.group.views import connection_table
from orbitmq.errors import Code


class ProducerConnectionSubCommand(SubCommand[list[m.ClientConnection]]):
    name = "producerConnection"
    help = "List the connected producers of a topic."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)
        parser.add_argument("-g", "--producerGroup", help="only this producer group (gRPC producers have none)")

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.ClientConnection]:
        rows = admin.resources.client_connections(group=args.producerGroup, topic=args.topic, producers=True)
        if not rows:
            raise OMSResourceNotExistException(Code.NOT_FOUND, f"no producer of topic {args.topic!r} is online")
        return rows

    def render(self, result: list[m.ClientConnection], args: argparse.Namespace, out: TextIO) -> None:
        connection_table(result, out)
