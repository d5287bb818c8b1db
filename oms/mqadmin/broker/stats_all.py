"""``statsAll``: every topic's in-TPS and the last day's messages, and per consumer group its out-TPS, the last day's
consumption and its backlog (``-a`` only topics with traffic)."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.options import parse_bool
from oms.mqadmin.output import table


class StatsAllSubCommand(SubCommand[list[m.TopicGroupStats]]):
    name = "statsAll"
    help = "Topics' in/out TPS, last 24 h messages and consumer backlog."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", help="only this topic")
        parser.add_argument("-a", "--activeTopic", type=parse_bool, default=False, help="only topics with traffic")

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.TopicGroupStats]:
        rows = admin.resources.stats_all(args.topic)
        if args.activeTopic:
            rows = [r for r in rows if r.in_24h or r.out_24h or r.in_tps or r.out_tps]
        return rows

    def render(self, result: list[m.TopicGroupStats], args: argparse.Namespace, out: TextIO) -> None:
        table(
            ["Topic", "Consumer Group", "Accumulation", "InTPS", "OutTPS", "InMsg24Hour", "OutMsg24Hour"],
            [
                (r.topic, r.group or "-", r.accumulation, f"{r.in_tps:.2f}", f"{r.out_tps:.2f}", r.in_24h, r.out_24h)
                for r in result
            ],
            out,
        )
