"""``topicList``: topic names, from the name server or one cluster's brokers."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand


class TopicListSubCommand(SubCommand[list[str]]):
    name = "topicList"
    help = "List topic names."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-c", "--clusterName", help="only this cluster's brokers' topics")

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[str]:
        return admin.resources.list_topics(cluster=args.clusterName)

    def render(self, result: list[str], args: argparse.Namespace, out: TextIO) -> None:
        for topic in result:
            out.write(topic + "\n")
