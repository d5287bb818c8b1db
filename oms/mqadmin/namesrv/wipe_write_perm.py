"""``wipeWritePerm``: routes show a broker read-only, so producers drain away from it before a stop."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand


class WipeWritePermSubCommand(SubCommand[dict[str, int]]):
    name = "wipeWritePerm"
    help = "Remove the write permission of a broker from the routes of every name server."
    short_broker_addr = False  # -b is the broker name

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-b", "--brokerName", required=True)

    def execute(self, args: argparse.Namespace, admin: Admin) -> dict[str, int]:
        return admin.resources.wipe_write_perm(args.brokerName)

    def render(self, result: dict[str, int], args: argparse.Namespace, out: TextIO) -> None:
        for addr, count in result.items():
            out.write(f"wipe write perm of broker[{args.brokerName}] in name server[{addr}] OK, {count}\n")
