"""The six RocketMQ queue allocation strategies (``AVG``, ``AVG_BY_CIRCLE``, ``CONFIG``, ``MACHINE_ROOM``,
``CONSISTENT_HASH``, ``MACHINE_ROOM_NEARBY``); the broker reaches them through ``plugin.AllocatorPlugin``."""

from plugins.allocators.base import AllocateStrategy, AllocationError, QueueRef
from plugins.allocators.strategies import STRATEGY_NAMES, canonical_name, create_strategy

__all__ = ["STRATEGY_NAMES", "AllocateStrategy", "AllocationError", "QueueRef", "canonical_name", "create_strategy"]
