"""``cloneGroupOffset``: give a group the offsets another group committed on a topic."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.offset.views import offset_table


class CloneGroupOffsetSubCommand(SubCommand[list[m.OffsetChange]]):
    name = "cloneGroupOffset"
    help = "Copy the offsets one group committed on a topic to another group."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-s", "--srcGroup", required=True)
        parser.add_argument("-d", "--destGroup", required=True)
        parser.add_argument("-t", "--topic", required=True)
        # RocketMQ's -o (offline) is accepted for compatible scripts: running consumers pick offsets up anyway
        parser.add_argument("-o", "--offline", help="accepted and ignored (running consumers follow the new offsets)")

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.OffsetChange]:
        return admin.resources.clone_group_offset(args.srcGroup, args.destGroup, args.topic)

    def render(self, result: list[m.OffsetChange], args: argparse.Namespace, out: TextIO) -> None:
        out.write(
            f"clone group offset success. srcGroup[{args.srcGroup}], destGroup={args.destGroup}, topic[{args.topic}]\n"
        )
        offset_table(result, out)
