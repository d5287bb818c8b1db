"""The six RocketMQ queue allocation strategies (AVG, AVG_BY_CIRCLE, CONFIG, MACHINE_ROOM, CONSISTENT_HASH,
MACHINE_ROOM_NEARBY) behind ``create_strategy``, over the hook layer's ``QueueRef``; the broker reaches them through
``plugin.AllocatorPlugin``."""

from broker.hookspecs import QueueRef
from plugins.allocators.base import AllocateStrategy, AllocationError
from plugins.allocators.strategies import (
    STRATEGY_NAMES,
    Averagely,
    AveragelyByCircle,
    ByConfig,
    ByMachineRoom,
    ConsistentHash,
    MachineRoomNearby,
    canonical_name,
    create_strategy,
)

__all__ = [
    "STRATEGY_NAMES",
    "AllocateStrategy",
    "AllocationError",
    "Averagely",
    "AveragelyByCircle",
    "ByConfig",
    "ByMachineRoom",
    "ConsistentHash",
    "MachineRoomNearby",
    "QueueRef",
    "canonical_name",
    "create_strategy",
]
