"""``consumerStatus``: each consumer of a group with the settings it declared (filter, retry policy, receive
batch, ...); RocketMQ 4 asks the client for its running info, a v2 client declares it to the broker."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from oms.admin import models as m
from oms.errors import OMSResourceNotExistException
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.group.views import connection_table
from orbitmq.errors import Code


class ConsumerStatusSubCommand(SubCommand[list[m.ClientConnection]]):
    name = "consumerStatus"
    help = "Show the consumers of a group with the settings each declared."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-g", "--consumerGroup", required=True)
        parser.add_argument("-i", "--clientId", help="only this client")

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.ClientConnection]:
        rows = admin.resources.client_connections(group=args.consumerGroup)
        if args.clientId:
            rows = [r for r in rows if r.client_id == args.clientId]
        if not rows:
            who = f"client {args.clientId!r} of group" if args.clientId else "consumer of group"
            raise OMSResourceNotExistException(Code.NOT_FOUND, f"no {who} {args.consumerGroup!r} is online")
        return rows

    def render(self, result: list[m.ClientConnection], args: argparse.Namespace, out: TextIO) -> None:
        connection_table(result, out)
        for c in result:
            out.write(f"\n---------------------- {c.client_id} ----------------------\n")
            settings = json.loads(c.settings_json) if c.settings_json else {}
            out.write(json.dumps(settings, indent=2, sort_keys=True) + "\n")
