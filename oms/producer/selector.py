"""Queue selectors for ordered sends: ``(queues, message, arg) -> queue``, as RocketMQ's MessageQueueSelector.

Hashing is Java's ``String.hashCode``, so a key lands on the queue a RocketMQ Java producer would pick.
"""

from __future__ import annotations

import functools
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from typing import Any

from oms.message import BytesMessage
from oms.queue import MessageQueue

QueueSelector = Callable[[Sequence[MessageQueue], BytesMessage, Any], MessageQueue]


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode``: signed 32-bit over UTF-16 code units."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def stable_hash(arg: Any) -> int:
    """A hash that is the same in every process (Python's ``hash(str)`` is salted per process)."""
    if isinstance(arg, bool):
        return int(arg)
    if isinstance(arg, int):
        return arg
    if isinstance(arg, bytes):
        arg = arg.decode("utf-8", "replace")
    return java_string_hash(str(arg))


class MessageQueueSelector(ABC):
    @abstractmethod
    def select(self, queues: Sequence[MessageQueue], message: BytesMessage, arg: Any) -> MessageQueue: ...

    def __call__(self, queues: Sequence[MessageQueue], message: BytesMessage, arg: Any) -> MessageQueue:
        return self.select(queues, message, arg)


class SelectMessageQueueByHash(MessageQueueSelector):
    """``abs(hash(arg) % len(queues))``: the same ``arg`` always picks the same queue (while the route holds)."""

    def select(self, queues: Sequence[MessageQueue], message: BytesMessage, arg: Any) -> MessageQueue:
        return queues[abs(stable_hash(arg)) % len(queues)]


class SelectMessageQueueByRandom(MessageQueueSelector):
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def select(self, queues: Sequence[MessageQueue], message: BytesMessage, arg: Any) -> MessageQueue:
        return self._rng.choice(list(queues))


def _room_of_broker(broker_name: str) -> str:
    """Default room naming: ``room@broker`` (RocketMQ's convention for cross-room deployments)."""
    return broker_name.split("@", 1)[0] if "@" in broker_name else ""


class SelectMessageQueueByMachineRoom(MessageQueueSelector):
    """Prefer queues of brokers in ``rooms`` (hashing ``arg`` among them); all queues if none is there.

    RocketMQ's Java class is a stub returning null; this one works: the room of a broker comes from
    ``room_of(broker_name)``, by default the part before ``@`` in ``room@broker``.
    """

    def __init__(self, rooms: Collection[str], room_of: Callable[[str], str] = _room_of_broker) -> None:
        self.rooms = frozenset(rooms)
        self._room_of = room_of

    def select(self, queues: Sequence[MessageQueue], message: BytesMessage, arg: Any) -> MessageQueue:
        local = [q for q in queues if self._room_of(q.broker_name) in self.rooms]
        pool = local or list(queues)
        return pool[abs(stable_hash(arg)) % len(pool)]


@functools.lru_cache(maxsize=1024)
def group_for_queue(queue_id: int, write_queues: int) -> str:
    """A message group the broker hashes (Java hashCode mod queue count) onto ``queue_id``.

    Our broker, like RocketMQ's proxy, ignores ``system_properties.queue_id`` on SendMessage and places a
    message by its message group; pinning a selected queue therefore means choosing a group that lands on it.
    """
    if not 0 <= queue_id < write_queues:
        raise ValueError(f"queue id {queue_id} is not below the queue count {write_queues}")
    k = 0
    while True:
        candidate = f"oms-q{queue_id}-{k}"
        if java_string_hash(candidate) % write_queues == queue_id:
            return candidate
        k += 1
