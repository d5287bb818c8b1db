"""``checkMsgSendRT``: send ``-a`` messages of ``-s`` bytes to a topic one by one and print the round trips."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand, UsageError
from oms.mqadmin.message.send_rt import RT_HEADERS, SendRT, rt_table_rows, timed_sends
from oms.mqadmin.output import table
from oms.mqadmin.progress import add_progress_flag, progress_stream

DEFAULT_AMOUNT = 100  # RocketMQ's -a default
DEFAULT_SIZE = 128  # RocketMQ's -s default (bytes)


class CheckMsgSendRTSubCommand(SubCommand[SendRT]):
    name = "checkMsgSendRT"
    help = "Send messages to a topic one by one and print the send round trips."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)
        parser.add_argument("-a", "--amount", type=int, default=DEFAULT_AMOUNT, help=f"default {DEFAULT_AMOUNT}")
        parser.add_argument("-s", "--size", type=int, default=DEFAULT_SIZE, help=f"body bytes, default {DEFAULT_SIZE}")
        add_progress_flag(parser)

    def execute(self, args: argparse.Namespace, admin: Admin) -> SendRT:
        check_amount_and_size(args.amount, args.size)
        with admin.access_point.create_producer(operation_timeout=args.timeout) as producer:
            return timed_sends(producer, args.topic, args.topic, args.amount, args.size, progress=progress_stream(args))

    def render(self, result: SendRT, args: argparse.Namespace, out: TextIO) -> None:
        table(RT_HEADERS, rt_table_rows([result]), out)
        for failure in result.failures[:10]:
            out.write(f"failed: {failure}\n")


def check_amount_and_size(amount: int, size: int) -> None:
    if amount <= 0:
        raise UsageError(f"-a amount must be positive, got {amount}")
    if size <= 0:
        raise UsageError(f"-s size must be positive, got {size}")
