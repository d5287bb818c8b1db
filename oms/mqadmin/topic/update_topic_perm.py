"""``updateTopicPerm``: change a topic's permission (2 write, 4 read, 6 read-write) on a broker or a cluster."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand, UsageError
from oms.mqadmin.output import table
from orbitmq.route import PermName

ALLOWED_PERMS = (PermName.PERM_WRITE, PermName.PERM_READ, PermName.PERM_READ | PermName.PERM_WRITE)


class UpdateTopicPermSubCommand(SubCommand[list[m.TopicInfo]]):
    name = "updateTopicPerm"
    help = "Change a topic's permission on a broker (-b) or a cluster (-c)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)
        parser.add_argument("-p", "--perm", type=int, required=True, help="2 write, 4 read, 6 read-write")
        parser.add_argument("-c", "--clusterName")

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.TopicInfo]:
        if args.perm not in ALLOWED_PERMS:
            raise UsageError(f"-p perm must be 2 (write), 4 (read) or 6 (read-write), got {args.perm}")
        if not args.brokerAddr and not args.clusterName:
            raise UsageError("updateTopicPerm needs -b brokerAddr or -c clusterName")
        return admin.resources.update_topic(
            args.topic, perm=args.perm, cluster=args.clusterName, broker=args.brokerAddr
        )

    def render(self, result: list[m.TopicInfo], args: argparse.Namespace, out: TextIO) -> None:
        table(
            ["Topic", "Broker Name", "Perm"],
            [(i.topic, i.broker_name, i.perm_string) for i in result],
            out,
        )
