"""``consumerProgress``: broker offset, committed offset and lag of a group, per queue."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.output import table


class ConsumerProgressSubCommand(SubCommand[m.ConsumerProgress]):
    name = "consumerProgress"
    help = "Broker offset, consumer offset and lag per queue."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-g", "--groupName", required=True)
        parser.add_argument("-t", "--topic", help="one topic (default: every topic the group committed)")

    def execute(self, args: argparse.Namespace, admin: Admin) -> m.ConsumerProgress:
        return admin.resources.consumer_progress(args.groupName, args.topic)

    def render(self, result: m.ConsumerProgress, args: argparse.Namespace, out: TextIO) -> None:
        rows = [(q.topic, q.broker_name, q.queue_id, q.broker_offset, q.consumer_offset, q.lag) for q in result.queues]
        table(["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff"], rows, out)
        out.write(f"\nDiff Total: {result.total_lag}\n")
