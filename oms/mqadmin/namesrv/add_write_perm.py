"""``addWritePerm``: undo wipeWritePerm: producers may send to the broker again."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand


class AddWritePermSubCommand(SubCommand[dict[str, int]]):
    name = "addWritePerm"
    help = "Give a broker its write permission back in the routes of every name server."
    short_broker_addr = False  # -b is the broker name

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-b", "--brokerName", required=True)

    def execute(self, args: argparse.Namespace, admin: Admin) -> dict[str, int]:
        return admin.resources.add_write_perm(args.brokerName)

    def render(self, result: dict[str, int], args: argparse.Namespace, out: TextIO) -> None:
        for addr, count in result.items():
            out.write(f"add write perm of broker[{args.brokerName}] in name server[{addr}] OK, {count}\n")
