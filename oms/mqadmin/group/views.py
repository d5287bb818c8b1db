"""The subscription group table ``updateSubGroup`` and ``groupList`` print."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.output import table


def group_table(infos: Sequence[m.GroupInfo], out: TextIO) -> None:
    rows = [
        (
            g.group,
            g.broker_name,
            g.consume_enable,
            g.retry_max_times,
            g.orderly,
            g.broadcast,
            g.allocate_strategy or "-",
            ",".join(f"{k}={v}" for k, v in sorted(g.allocate_options.items())) or "-",
        )
        for g in infos
    ]
    headers = ["Group", "Broker Name", "Consume", "Retry Max", "Orderly", "Broadcast", "Allocate", "Options"]
    table(headers, rows, out)
