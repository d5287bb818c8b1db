"""``brokerStatus``: a broker's runtime counters, one ``key : value`` line each, as RocketMQ prints them."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand, UsageError


class BrokerStatusSubCommand(SubCommand[dict[str, dict[str, str]]]):
    name = "brokerStatus"
    help = "Fetch broker runtime status data (put/get totals, offsets, corrupt records, ...)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-c", "--clusterName", help="every broker of this cluster (or -b brokerAddr)")

    def execute(self, args: argparse.Namespace, admin: Admin) -> dict[str, dict[str, str]]:
        if not args.brokerAddr and not args.clusterName:
            raise UsageError("brokerStatus needs -b brokerAddr or -c clusterName")
        if args.brokerAddr:
            return {args.brokerAddr: admin.resources.broker_runtime_info(args.brokerAddr)}
        brokers = admin.resources.cluster_list(runtime=True)
        return {b.addr: dict(b.runtime) for b in brokers if b.cluster == args.clusterName}

    def render(self, result: dict[str, dict[str, str]], args: argparse.Namespace, out: TextIO) -> None:
        for addr, info in result.items():
            for key in sorted(info):
                prefix = f"{addr:<24}" if len(result) > 1 else ""
                out.write(f"{prefix}{key:<32}: {info[key]}\n")
