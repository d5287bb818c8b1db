"""``brokerConsumeStats``: every group's consumption of the topics it committed on one broker, with the lag."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand, UsageError
from oms.mqadmin.output import table


class BrokerConsumeStatsSubCommand(SubCommand[list[tuple[str, m.QueueProgress]]]):
    name = "brokerConsumeStats"
    help = "Consumer offsets and lag of every group on one broker."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-l", "--level", type=int, default=0, help="only queues lagging more than this (default 0)")
        parser.add_argument("-o", "--order", help="accepted and ignored (RocketMQ's orderly-group filter)")

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[tuple[str, m.QueueProgress]]:
        if not args.brokerAddr:
            raise UsageError("brokerConsumeStats needs -b brokerAddr")
        rm = admin.resources
        broker = next((b for b in rm.cluster_list() if b.addr == args.brokerAddr), None)
        name = broker.broker_name if broker else rm.broker_runtime_info(args.brokerAddr).get("brokerName", "")
        rows: list[tuple[str, m.QueueProgress]] = []
        for group in sorted({g.group for g in rm.list_groups(broker=args.brokerAddr)}):
            for q in rm.consumer_progress(group).queues:
                if q.broker_name == name and q.consumer_offset >= 0 and q.lag >= args.level:
                    rows.append((group, q))
        return rows

    def render(self, result: list[tuple[str, m.QueueProgress]], args: argparse.Namespace, out: TextIO) -> None:
        pairs = result
        table(
            ["Topic", "Group", "Broker Name", "QID", "BrokerOffset", "ConsumerOffset", "Diff"],
            [(q.topic, g, q.broker_name, q.queue_id, q.broker_offset, q.consumer_offset, q.lag) for g, q in pairs],
            out,
        )
        out.write(f"\nDiff Total: {sum(q.lag for _, q in pairs)}\n")
