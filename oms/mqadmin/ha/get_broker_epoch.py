"""``getBrokerEpoch``: the epoch each replica of broker names is at."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.ha.views import Replica, add_selection, replicas
from oms.mqadmin.output import table


class GetBrokerEpochSubCommand(SubCommand[list[Replica]]):
    name = "getBrokerEpoch"
    help = "The epoch each replica of broker names is at."
    short_broker_addr = False  # -b is the broker name

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_selection(parser)

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[Replica]:
        return replicas(args, admin)

    def render(self, result: list[Replica], args: argparse.Namespace, out: TextIO) -> None:
        table(
            ["Broker Name", "Broker Id", "Addr", "Role", "Epoch", "Max Offset"],
            [
                (
                    r.broker_name,
                    r.broker_id,
                    r.addr,
                    r.ha.get("brokerRole", "-"),
                    r.ha.get("brokerEpoch", "-"),
                    r.ha.get("commitLogMaxOffset", "-"),
                )
                for r in result
            ],
            out,
        )
