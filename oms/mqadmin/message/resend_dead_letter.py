"""``resendDeadLetter``: send a message of ``%DLQ%<group>`` again to its original topic (the DLQ copy stays)."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand, UsageError


class ResendDeadLetterSubCommand(SubCommand[m.ResendResult]):
    name = "resendDeadLetter"
    help = "Send a dead letter of a group again to its original topic (the copy in the DLQ stays)."
    short_broker_addr = False  # -b is the broker name

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-g", "--groupName", required=True)
        parser.add_argument("-i", "--msgId", help="the dead letter's message id (unique or offset id)")
        parser.add_argument("-b", "--brokerName", help="the broker holding the dead letter (with -o)")
        parser.add_argument("-o", "--offset", type=int, help="the dead letter's offset in the DLQ queue")
        parser.add_argument("-q", "--queueId", type=int, default=0, help="DLQ queue id (default 0)")

    def execute(self, args: argparse.Namespace, admin: Admin) -> m.ResendResult:
        if not args.msgId and args.offset is None:
            raise UsageError(
                "resendDeadLetter needs -i msgId, or -o offset (with -b brokerName on a multi-broker cluster)"
            )
        return admin.resources.resend_dead_letter(
            args.groupName, args.msgId, broker=args.brokerName, offset=args.offset, queue_id=args.queueId
        )

    def render(self, result: m.ResendResult, args: argparse.Namespace, out: TextIO) -> None:
        letter = result.dead_letter
        out.write(
            f"resent {letter.unique_id or letter.msg_id} from {letter.topic} ({letter.broker_name} "
            f"queue {letter.queue_id} offset {letter.queue_offset}) to topic {result.topic}: "
            f"message id {result.message_id}, broker {result.broker_name}, offset {result.queue_offset}\n"
            f"the dead letter stays in {letter.topic}\n"
        )
