"""``updateBrokerConfig``: change a key of running brokers; keys they read only at start are refused by name."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand, UsageError


class UpdateBrokerConfigSubCommand(SubCommand[dict[str, dict[str, str]]]):
    name = "updateBrokerConfig"
    help = "Change a configuration key of a running broker (-b) or of every broker of a cluster (-c)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-c", "--clusterName")
        parser.add_argument("-k", "--key", required=True)
        parser.add_argument("-v", "--value", required=True)

    def execute(self, args: argparse.Namespace, admin: Admin) -> dict[str, dict[str, str]]:
        if not args.brokerAddr and not args.clusterName:
            raise UsageError("updateBrokerConfig needs -b brokerAddr or -c clusterName")
        return admin.resources.update_broker_config(
            {args.key: args.value}, cluster=args.clusterName, broker=args.brokerAddr
        )

    def render(self, result: dict[str, dict[str, str]], args: argparse.Namespace, out: TextIO) -> None:
        for addr, config in result.items():
            out.write(f"update broker config success, {addr} {args.key} = {config.get(args.key, args.value)}\n")
