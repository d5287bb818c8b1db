"""``ProcessQueue``: the messages a consumer holds for one assignment, for flow control and offset commits.

RocketMQ's three limits apply per process queue: message count, body bytes, and the offset span of a queue.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from oms.message import BytesMessage


class FlowControl(Enum):
    """Why the next pull/receive of a queue waits (``None`` from ``ProcessQueue.flow_control``: it may go)."""

    COUNT = "cached message count"
    SIZE = "cached message size"
    SPAN = "consume offset span"


@dataclass
class ProcessQueue:
    """Loop-bound. Offsets are per real queue id (a receive/ack assignment spans every queue of a broker)."""

    count: int = 0
    size: int = 0
    dropped: bool = False
    _offsets: dict[int, dict[int, int]] = field(default_factory=dict)  # queue id -> offset -> body size
    _max_seen: dict[int, int] = field(default_factory=dict)  # queue id -> highest offset ever put

    @staticmethod
    def _key(message: BytesMessage) -> tuple[int, int]:
        return message.queue_id if message.queue_id is not None else -1, message.queue_offset or 0

    def put(self, messages: Iterable[BytesMessage]) -> None:
        for m in messages:
            qid, offset = self._key(m)
            held = self._offsets.setdefault(qid, {})
            if offset in held:
                continue  # a redelivery of a message still held (e.g. after a renew gap) is counted once
            held[offset] = len(m.body)
            self.count += 1
            self.size += len(m.body)
            if offset > self._max_seen.get(qid, -1):
                self._max_seen[qid] = offset

    def advance(self, queue_id: int, next_offset: int) -> None:
        """Everything below ``next_offset`` was seen (messages a filter skipped included)."""
        if next_offset - 1 > self._max_seen.get(queue_id, -1):
            self._max_seen[queue_id] = next_offset - 1

    def remove(self, messages: Iterable[BytesMessage]) -> None:
        for m in messages:
            qid, offset = self._key(m)
            size = self._offsets.get(qid, {}).pop(offset, None)
            if size is not None:
                self.count -= 1
                self.size -= size

    def commit_offset(self, queue_id: int) -> int | None:
        """The offset to commit for ``queue_id``: the lowest still held, else one past the highest seen."""
        held = self._offsets.get(queue_id)
        if held:
            return min(held)
        seen = self._max_seen.get(queue_id)
        return None if seen is None else seen + 1

    def span(self) -> int:
        return max((max(h) - min(h) for h in self._offsets.values() if h), default=0)

    def flow_control(self, max_count: int, max_size: int, max_span: int | None) -> FlowControl | None:
        if self.count >= max_count:
            return FlowControl.COUNT
        if self.size >= max_size:
            return FlowControl.SIZE
        if max_span is not None and self.span() > max_span:
            return FlowControl.SPAN
        return None
