"""``haStatus``: replication state of broker names: roles, offsets, slaves and lag."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.ha.views import Replica, add_selection, replicas
from oms.mqadmin.output import table


class HAStatusSubCommand(SubCommand[list[Replica]]):
    name = "haStatus"
    help = "Replication state of broker names: roles, offsets, slaves and lag."
    short_broker_addr = False  # -b is the broker name

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_selection(parser)

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[Replica]:
        return replicas(args, admin)

    def render(self, result: list[Replica], args: argparse.Namespace, out: TextIO) -> None:
        table(
            ["Broker Name", "Broker Id", "Addr", "Role", "Max Offset", "Slaves", "Slave Lag (bytes)"],
            [
                (
                    r.broker_name,
                    r.broker_id,
                    r.addr,
                    r.ha.get("brokerRole", "-"),
                    r.ha.get("commitLogMaxOffset", "-"),
                    r.ha.get("haSlaveCount", "-"),
                    r.ha.get("haSlaveLagBytes", "-"),
                )
                for r in result
            ],
            out,
        )
