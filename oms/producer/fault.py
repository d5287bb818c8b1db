"""Latency-based fault avoidance (RocketMQ's ``sendLatencyFaultEnable``): slow or failed brokers sit out a while.

The tables are RocketMQ's ``latencyMax`` / ``notAvailableDuration``: a send slower than 550 ms benches its broker
for 30 s, ..., a failure (counted as 30 s latency) for 10 minutes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

LATENCY_MAX_MS = (50, 100, 550, 1_000, 2_000, 3_000, 15_000)
NOT_AVAILABLE_MS = (0, 0, 30_000, 60_000, 120_000, 180_000, 600_000)
ISOLATION_LATENCY_MS = 30_000


def not_available_ms(latency_ms: float) -> int:
    for limit, duration in zip(reversed(LATENCY_MAX_MS), reversed(NOT_AVAILABLE_MS), strict=True):
        if latency_ms >= limit:
            return duration
    return 0


@dataclass
class FaultItem:
    broker: str
    latency_ms: float
    available_at: float  # monotonic seconds


class LatencyFaultTolerance:
    """Thread-safe; with ``enabled`` False every broker is always available and updates are ignored."""

    def __init__(self, enabled: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = enabled
        self._clock = clock
        self._items: dict[str, FaultItem] = {}
        self._lock = threading.Lock()

    def update(self, broker: str, latency_ms: float, isolation: bool) -> None:
        if not self.enabled:
            return
        latency = ISOLATION_LATENCY_MS if isolation else latency_ms
        until = self._clock() + not_available_ms(latency) / 1000
        with self._lock:
            self._items[broker] = FaultItem(broker, latency, until)

    def is_available(self, broker: str) -> bool:
        if not self.enabled:
            return True
        with self._lock:
            item = self._items.get(broker)
        return item is None or self._clock() >= item.available_at

    def least_bad(self, brokers: Iterable[str]) -> str | None:
        """Among ``brokers``, the one to try when all are benched: soonest available, then lowest latency."""
        with self._lock:
            items = [self._items.get(b) or FaultItem(b, 0, 0) for b in brokers]
        if not items:
            return None
        return min(items, key=lambda i: (i.available_at, i.latency_ms)).broker

    def remove(self, broker: str) -> None:
        with self._lock:
            self._items.pop(broker, None)
