"""``groupList``: the subscription groups of each broker."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.group.views import group_table


class GroupListSubCommand(SubCommand[list[m.GroupInfo]]):
    name = "groupList"
    help = "List subscription groups per broker."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-c", "--clusterName")

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.GroupInfo]:
        return admin.resources.list_groups(cluster=args.clusterName, broker=args.brokerAddr)

    def render(self, result: list[m.GroupInfo], args: argparse.Namespace, out: TextIO) -> None:
        group_table(result, out)
