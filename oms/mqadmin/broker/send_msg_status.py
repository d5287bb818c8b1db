"""``sendMsgStatus``: send ``-c`` messages of ``-s`` bytes to one broker and print the round trips."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.errors import OMSResourceNotExistException
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.message.check_msg_send_rt import DEFAULT_SIZE, check_amount_and_size
from oms.mqadmin.message.send_message import queue_selector
from oms.mqadmin.message.send_rt import RT_HEADERS, SendRT, rt_table_rows, timed_sends
from oms.mqadmin.output import table
from oms.mqadmin.progress import add_progress_flag, progress_stream
from orbitmq.errors import Code

DEFAULT_COUNT = 50  # RocketMQ's -c default


class SendMsgStatusSubCommand(SubCommand[SendRT]):
    name = "sendMsgStatus"
    help = "Send messages to one broker and print the send round trips."
    short_broker_addr = False  # -b is the broker name

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-b", "--brokerName", required=True)
        parser.add_argument("-t", "--topic", help="default: the broker's name (RocketMQ's per-broker topic)")
        parser.add_argument("-s", "--messageSize", type=int, default=DEFAULT_SIZE, help=f"default {DEFAULT_SIZE}")
        parser.add_argument("-c", "--count", type=int, default=DEFAULT_COUNT, help=f"default {DEFAULT_COUNT}")
        add_progress_flag(parser)

    def execute(self, args: argparse.Namespace, admin: Admin) -> SendRT:
        check_amount_and_size(args.count, args.messageSize)
        known = {b.broker_name for b in admin.resources.cluster_list()}
        if known and args.brokerName not in known:
            raise OMSResourceNotExistException(
                Code.NOT_FOUND, f"no broker named {args.brokerName!r}; known: {', '.join(sorted(known))}"
            )
        topic = args.topic or args.brokerName
        with admin.access_point.create_producer(operation_timeout=args.timeout) as producer:
            return timed_sends(
                producer,
                args.brokerName,
                topic,
                args.count,
                args.messageSize,
                selector=queue_selector(topic, args.brokerName, None),
                progress=progress_stream(args),
            )

    def render(self, result: SendRT, args: argparse.Namespace, out: TextIO) -> None:
        table(RT_HEADERS, rt_table_rows([result]), out)
        for failure in result.failures[:10]:
            out.write(f"failed: {failure}\n")
