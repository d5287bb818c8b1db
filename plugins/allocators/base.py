"""What every allocation strategy shares: the queue reference, the strategy protocol and its error.

Strategies sort and de-duplicate their inputs, so every broker computing an assignment gets the same answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, order=True)
class QueueRef:
    """A message queue as allocation sees it: which broker, which queue (-1 = any queue of the broker)."""

    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.broker_name}@{self.queue_id}"


class AllocationError(ValueError):
    """A strategy that cannot be built or run as asked (unknown name, bad options)."""


class AllocateStrategy(Protocol):
    @property
    def name(self) -> str: ...

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        """The queues ``current_cid`` consumes; [] when it is not among ``cid_all`` (as RocketMQ logs and does)."""
        ...


def normalized(mq_all: Sequence[QueueRef], cid_all: Sequence[str]) -> tuple[list[QueueRef], list[str]]:
    return sorted(set(mq_all)), sorted(set(cid_all))


def machine_room(name: str) -> str | None:
    """RocketMQ's convention ``room@name`` (broker names, client ids); None when there is no ``@``."""
    room, sep, _ = name.partition("@")
    return room if sep else None
