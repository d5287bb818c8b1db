"""``clusterList``: every broker of every cluster, with its runtime totals."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.output import table


class ClusterListSubCommand(SubCommand[list[m.BrokerInfo]]):
    name = "clusterList"
    help = "List brokers of every cluster, with runtime totals."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-c", "--clusterName")

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.BrokerInfo]:
        brokers = admin.resources.cluster_list(runtime=True)
        return [b for b in brokers if not args.clusterName or b.cluster == args.clusterName]

    def render(self, result: list[m.BrokerInfo], args: argparse.Namespace, out: TextIO) -> None:
        rows = [
            (
                b.cluster,
                b.broker_name,
                b.broker_id,
                b.addr,
                b.runtime.get("putMessageTotal", "-"),
                b.runtime.get("getMessageTotal", "-"),
                b.runtime.get("topicCount", "-"),
                b.runtime.get("flushDiskType", b.runtime.get("error", "-")),
            )
            for b in result
        ]
        headers = ["Cluster Name", "Broker Name", "BID", "Addr", "Put Total", "Get Total", "Topics", "Flush"]
        table(headers, rows, out)
