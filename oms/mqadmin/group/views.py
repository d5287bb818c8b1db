"""The tables group commands print: subscription groups (updateSubGroup, groupList) and client connections."""

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


def connection_table(connections: Sequence[m.ClientConnection], out: TextIO) -> None:
    """consumerConnection / producerConnection / consumerStatus: one row per client."""
    rows = [
        (
            c.client_id,
            c.client_type,
            c.group or "-",
            c.address or "-",
            c.language or "-",
            c.version or "-",
            "yes" if c.connected else "no",
            f"{c.last_heartbeat_ms_ago / 1000:.1f}s",
        )
        for c in connections
    ]
    headers = ["ClientId", "Type", "Group", "Addr", "Language", "Version", "Stream", "Last Seen"]
    table(headers, rows, out)
