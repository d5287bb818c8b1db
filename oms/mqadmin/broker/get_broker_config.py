"""``getBrokerConfig``: the configuration of one broker or of every broker of a cluster (secrets masked)."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand, UsageError
from oms.mqadmin.namesrv.views import print_configs


class GetBrokerConfigSubCommand(SubCommand[dict[str, dict[str, str]]]):
    name = "getBrokerConfig"
    help = "Print the configuration of a broker (-b) or of every broker of a cluster (-c)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-c", "--clusterName")

    def execute(self, args: argparse.Namespace, admin: Admin) -> dict[str, dict[str, str]]:
        if not args.brokerAddr and not args.clusterName:
            raise UsageError("getBrokerConfig needs -b brokerAddr or -c clusterName")
        return admin.resources.broker_config(cluster=args.clusterName, broker=args.brokerAddr)

    def render(self, result: dict[str, dict[str, str]], args: argparse.Namespace, out: TextIO) -> None:
        print_configs(result, out)
