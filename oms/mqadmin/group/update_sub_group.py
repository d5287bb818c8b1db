"""``updateSubGroup``: create a subscription group, or change the given fields of an existing one."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.group.views import group_table
from oms.mqadmin.options import parse_bool, parse_options


class UpdateSubGroupSubCommand(SubCommand[list[m.GroupInfo]]):
    name = "updateSubGroup"
    help = "Create or update a subscription (consumer) group."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-g", "--groupName", required=True)
        parser.add_argument("-c", "--clusterName")
        parser.add_argument("-s", "--consumeEnable", type=parse_bool)
        parser.add_argument("-d", "--consumeBroadcastEnable", type=parse_bool)
        parser.add_argument("-o", "--consumeMessageOrderly", type=parse_bool)
        parser.add_argument("-q", "--retryQueueNums", type=int)
        parser.add_argument("-r", "--retryMaxTimes", type=int, help="default 16 for a new group")
        parser.add_argument("--allocateStrategy", help="QueryAssignment strategy plugin name ('' = broker default)")
        parser.add_argument("--allocateOptions", help="strategy options key=value,key=value")

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.GroupInfo]:
        return admin.resources.update_group(
            args.groupName,
            retry_max_times=args.retryMaxTimes,
            orderly=args.consumeMessageOrderly,
            broadcast=args.consumeBroadcastEnable,
            consume_enable=args.consumeEnable,
            retry_queue_nums=args.retryQueueNums,
            allocate_strategy=args.allocateStrategy,
            allocate_options=parse_options(args.allocateOptions) if args.allocateOptions is not None else None,
            cluster=args.clusterName,
            broker=args.brokerAddr,
            create=True,
        )

    def render(self, result: list[m.GroupInfo], args: argparse.Namespace, out: TextIO) -> None:
        for info in result:
            out.write(f"create subscription group to {info.broker_name} success.\n")
        group_table(result, out)
