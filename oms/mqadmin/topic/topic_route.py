"""``topicRoute``: the brokers and queues the name server (or the brokers) list for a topic."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.output import table


class TopicRouteSubCommand(SubCommand[m.TopicRoute]):
    name = "topicRoute"
    help = "Show a topic's route: brokers and queues."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)

    def execute(self, args: argparse.Namespace, admin: Admin) -> m.TopicRoute:
        return admin.resources.topic_route(args.topic)

    def render(self, result: m.TopicRoute, args: argparse.Namespace, out: TextIO) -> None:
        table(
            ["Broker Name", "Cluster", "Broker Addrs"],
            [
                (b.broker_name, b.cluster, ", ".join(f"{k}:{v}" for k, v in sorted(b.addrs.items())))
                for b in result.broker_datas
            ],
            out,
        )
        out.write("\n")
        table(
            ["Broker Name", "Read Queues", "Write Queues", "Perm", "Message Type"],
            [
                (q.broker_name, q.read_queue_nums, q.write_queue_nums, m.perm_string(q.perm), q.message_type)
                for q in result.queue_datas
            ],
            out,
        )
