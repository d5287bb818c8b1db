"""``topicClusterList``: the clusters whose brokers serve a topic."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand


class TopicClusterListSubCommand(SubCommand[list[str]]):
    name = "topicClusterList"
    help = "List the clusters serving a topic."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[str]:
        return sorted({b.cluster for b in admin.resources.topic_route(args.topic).broker_datas})

    def render(self, result: list[str], args: argparse.Namespace, out: TextIO) -> None:
        for cluster in result:
            out.write(f"{cluster}\n")
