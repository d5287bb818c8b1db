"""What the message commands share: one message's details as mqadmin prints them, and how a queue is named in
their errors."""

from __future__ import annotations

import json
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.output import body_text, human_time


def print_message(view: m.MessageView, out: TextIO) -> None:
    fields = [
        ("OffsetID", view.msg_id),
        ("Topic", view.topic),
        ("Tags", view.tags or ""),
        ("Keys", " ".join(view.keys)),
        ("Unique Key", view.unique_id),
        ("Broker Name", view.broker_name),
        ("Queue ID", view.queue_id),
        ("Queue Offset", view.queue_offset),
        ("CommitLog Offset", view.commitlog_offset),
        ("Reconsume Times", view.reconsume_times),
        ("Born Timestamp", human_time(view.born_timestamp_ms)),
        ("Store Timestamp", human_time(view.store_timestamp_ms)),
        ("Born Host", view.born_host),
        ("Store Host", view.store_host),
        ("Store Size", view.store_size),
        ("Properties", json.dumps(dict(view.properties), sort_keys=True)),
        ("Body", body_text(view.body)),
    ]
    for name, value in fields:
        out.write(f"{name + ':':<18}{value}\n")


def where(broker: str | None, queue_id: int | None) -> str:
    """``on broker 'b' with id 3``: the -b/-i a queue was looked for with."""
    parts = [
        f"on broker {broker!r}" if broker is not None else "",
        f"with id {queue_id}" if queue_id is not None else "",
    ]
    return " ".join(p for p in parts if p)
