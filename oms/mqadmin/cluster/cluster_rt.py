"""``clusterRT``: the send round trip to each master of a cluster (one selector send per message to that broker)."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.message.check_msg_send_rt import DEFAULT_AMOUNT, DEFAULT_SIZE, check_amount_and_size
from oms.mqadmin.message.send_message import queue_selector
from oms.mqadmin.message.send_rt import RT_HEADERS, SendRT, rt_table_rows, timed_sends
from oms.mqadmin.output import table
from oms.mqadmin.progress import add_progress_flag, progress_stream


class ClusterRTSubCommand(SubCommand[list[SendRT]]):
    name = "clusterRT"
    help = "Send messages to every master of a cluster and print each broker's round trips."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-c", "--clusterName", help="default: every cluster")
        parser.add_argument("-t", "--topic", help="default: the cluster's name (RocketMQ's per-cluster topic)")
        parser.add_argument(
            "-a", "--amount", type=int, default=DEFAULT_AMOUNT, help=f"per broker, default {DEFAULT_AMOUNT}"
        )
        parser.add_argument("-s", "--size", type=int, default=DEFAULT_SIZE, help=f"body bytes, default {DEFAULT_SIZE}")
        parser.add_argument("-i", "--interval", type=int, default=0, help="ms between sends (default 0)")
        add_progress_flag(parser)

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[SendRT]:
        check_amount_and_size(args.amount, args.size)
        masters = [b for b in admin.resources.cluster_list() if b.is_master]
        if args.clusterName:
            masters = [b for b in masters if b.cluster == args.clusterName]
        results: list[SendRT] = []
        with admin.access_point.create_producer(operation_timeout=args.timeout) as producer:
            for b in masters:
                topic = args.topic or b.cluster
                results.append(
                    timed_sends(
                        producer,
                        f"{b.cluster}/{b.broker_name}",
                        topic,
                        args.amount,
                        args.size,
                        selector=queue_selector(topic, b.broker_name, None),
                        interval_s=args.interval / 1000,
                        progress=progress_stream(args),
                    )
                )
        return results

    def render(self, result: list[SendRT], args: argparse.Namespace, out: TextIO) -> None:
        table(RT_HEADERS, rt_table_rows(result), out)
        for r in result:
            for failure in r.failures[:3]:
                out.write(f"{r.target} failed: {failure}\n")
