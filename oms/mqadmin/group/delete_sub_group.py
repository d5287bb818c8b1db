"""``deleteSubGroup``: a subscription group's config and committed offsets, on a cluster or one broker."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from oms.mqadmin.command import Admin, SubCommand


class DeleteSubGroupSubCommand(SubCommand[dict[str, Any]]):
    name = "deleteSubGroup"
    help = "Delete a subscription group and its offsets."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-g", "--groupName", required=True)
        parser.add_argument("-c", "--clusterName")

    def execute(self, args: argparse.Namespace, admin: Admin) -> dict[str, Any]:
        brokers = admin.resources.delete_group(args.groupName, cluster=args.clusterName, broker=args.brokerAddr)
        return {"group": args.groupName, "brokers": brokers}

    def render(self, result: dict[str, Any], args: argparse.Namespace, out: TextIO) -> None:
        for name in result["brokers"]:
            out.write(f"delete subscription group [{args.groupName}] from broker {name} success.\n")
