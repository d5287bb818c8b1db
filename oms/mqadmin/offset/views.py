"""The table of committed offsets cloneGroupOffset and skipAccumulatedMessage print."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.output import table


def offset_table(changes: Sequence[m.OffsetChange], out: TextIO) -> None:
    table(
        ["Topic", "Broker Name", "QID", "Offset"],
        [(c.topic, c.broker_name, c.queue_id, c.offset) for c in changes],
        out,
    )
