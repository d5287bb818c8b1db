"""``skipAccumulatedMessage``: move a group to the end of every queue of a topic (its backlog is skipped)."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.offset.views import offset_table


class SkipAccumulatedMessageSubCommand(SubCommand[list[m.OffsetChange]]):
    name = "skipAccumulatedMessage"
    help = "Skip a group's backlog on a topic: commit the end of every queue."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-g", "--group", required=True)
        parser.add_argument("-t", "--topic", required=True)
        parser.add_argument("-f", "--force", help="accepted and ignored (offsets are committed either way)")

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.OffsetChange]:
        return admin.resources.skip_accumulated(args.group, args.topic)

    def render(self, result: list[m.OffsetChange], args: argparse.Namespace, out: TextIO) -> None:
        offset_table(result, out)
