"""``MessageQueue``: one queue of a topic on one broker, as selectors see it and send results report it.

``queue_id`` -1 means "chosen by the broker" (a plain send over v2 does not learn the id, see docs/oms.md).
"""

from __future__ import annotations

from dataclasses import dataclass

ANY_QUEUE = -1


@dataclass(frozen=True, order=True)
class MessageQueue:
    topic: str
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.topic}/{self.broker_name}:{self.queue_id}"
