"""``deleteTopic``: a topic's config, offsets and messages, on a cluster or one broker."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from oms.mqadmin.command import Admin, SubCommand


class DeleteTopicSubCommand(SubCommand[dict[str, Any]]):
    name = "deleteTopic"
    help = "Delete a topic (config, offsets, messages)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)
        parser.add_argument("-c", "--clusterName")

    def execute(self, args: argparse.Namespace, admin: Admin) -> dict[str, Any]:
        brokers = admin.resources.delete_topic(args.topic, cluster=args.clusterName, broker=args.brokerAddr)
        return {"topic": args.topic, "brokers": brokers}

    def render(self, result: dict[str, Any], args: argparse.Namespace, out: TextIO) -> None:
        for name in result["brokers"]:
            out.write(f"delete topic [{args.topic}] from broker {name} success.\n")
