"""``allocateMQ``: how RocketMQ's default strategy (AVG) shares a topic's queues among given client ids, computed
here from the route (what a rebalance of those clients would give each)."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand, UsageError
from orbitmq.allocation import average_block
from orbitmq.route import PermName


class AllocateMQSubCommand(SubCommand[dict[str, list[str]]]):
    name = "allocateMQ"
    help = "Show how AVG allocation shares a topic's queues among client ids."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)
        parser.add_argument("-i", "--ipList", required=True, help="client ids (or IPs), comma-separated")

    def execute(self, args: argparse.Namespace, admin: Admin) -> dict[str, list[str]]:
        cids = sorted({c.strip() for c in args.ipList.split(",") if c.strip()})
        if not cids:
            raise UsageError("-i ipList names no client")
        route = admin.resources.topic_route(args.topic)
        # RocketMQ's MessageQueue order: broker name, then queue id (readable queues, as a consumer sees them)
        queues = sorted(
            (q.broker_name, qid)
            for q in route.queue_datas
            if q.perm & PermName.PERM_READ
            for qid in range(q.read_queue_nums)
        )
        return {
            cid: [f"{args.topic}:{b}:{qid}" for b, qid in average_block(queues, len(cids), i)]
            for i, cid in enumerate(cids)
        }

    def render(self, result: dict[str, list[str]], args: argparse.Namespace, out: TextIO) -> None:
        for cid, queues in result.items():
            out.write(f"{cid}: {', '.join(queues) or '-'}\n")
