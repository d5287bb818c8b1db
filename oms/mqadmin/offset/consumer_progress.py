"""``consumerProgress``: broker offset, committed offset and lag of a group per queue; without ``-g``, every group
with its total lag (RocketMQ's summary)."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.output import table


class ConsumerProgressSubCommand(SubCommand[m.ConsumerProgress | list[m.ConsumerProgress]]):
    name = "consumerProgress"
    help = "Broker offset, consumer offset and lag per queue (without -g: every group's total lag)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-g", "--groupName", help="one group (default: a summary of every group)")
        parser.add_argument("-t", "--topic", help="one topic (default: every topic the group committed)")

    def execute(self, args: argparse.Namespace, admin: Admin) -> m.ConsumerProgress | list[m.ConsumerProgress]:
        if args.groupName:
            return admin.resources.consumer_progress(args.groupName, args.topic)
        groups = sorted({g.group for g in admin.resources.list_groups(broker=args.brokerAddr)})
        return [admin.resources.consumer_progress(group, args.topic) for group in groups]

    def render(
        self, result: m.ConsumerProgress | list[m.ConsumerProgress], args: argparse.Namespace, out: TextIO
    ) -> None:
        if isinstance(result, m.ConsumerProgress):
            progress = result
            rows = [
                (q.topic, q.broker_name, q.queue_id, q.broker_offset, q.consumer_offset, q.lag) for q in progress.queues
            ]
            table(["Topic", "Broker Name", "QID", "Broker Offset", "Consumer Offset", "Diff"], rows, out)
            out.write(f"\nDiff Total: {progress.total_lag}\n")
            return
        summary = [(p.group, len({q.topic for q in p.queues}), len(p.queues), p.total_lag) for p in result]
        table(["Group", "Topics", "Queues", "Diff Total"], summary, out)
