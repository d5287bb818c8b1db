"""``getSyncStateSet``: the in-sync replica set (SyncStateSet) and master of broker names."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.ha.views import Replica, add_selection, replicas
from oms.mqadmin.output import table


class GetSyncStateSetSubCommand(SubCommand[list[Replica]]):
    name = "getSyncStateSet"
    help = "The in-sync replica set (SyncStateSet) and master of broker names."
    short_broker_addr = False  # -b is the broker name

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_selection(parser)

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[Replica]:
        return replicas(args, admin)

    def render(self, result: list[Replica], args: argparse.Namespace, out: TextIO) -> None:
        table(
            ["Broker Name", "Master Id", "SyncStateSet", "Epoch"],
            sorted(
                {
                    (
                        r.broker_name,
                        r.ha.get("masterBrokerId", "-"),
                        r.ha.get("syncStateSet", "-") or "-",
                        r.ha.get("brokerEpoch", "-"),
                    )
                    for r in result
                    if r.ha.get("brokerRole") != "SLAVE"
                }
            ),
            out,
        )
