"""Queue leases for orderly offset-based consumers (RocketMQ's RebalanceLockManager).

A (group, topic, queue) is held by one client id until its lease expires; the holder renews by locking again.
Leases live in memory: after a broker restart every queue is free and members re-lock within one renewal period.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass
class _Lease:
    client_id: str
    expires: float


class QueueLockManager:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._leases: dict[tuple[str, str, int], _Lease] = {}

    def try_lock(self, group: str, topic: str, client_id: str, queue_ids: Iterable[int], lease_s: float) -> list[int]:
        """Lock or renew each queue that is free, expired or already ours; returns the queues we now hold."""
        now = self._clock()
        held: list[int] = []
        for qid in sorted(set(queue_ids)):
            key = (group, topic, qid)
            lease = self._leases.get(key)
            if lease is None or lease.expires <= now or lease.client_id == client_id:
                self._leases[key] = _Lease(client_id, now + lease_s)
                held.append(qid)
        return held

    def unlock(self, group: str, topic: str, client_id: str, queue_ids: Iterable[int]) -> None:
        """Release the queues this client holds; others' leases are untouched."""
        for qid in set(queue_ids):
            key = (group, topic, qid)
            lease = self._leases.get(key)
            if lease is not None and lease.client_id == client_id:
                del self._leases[key]

    def holder(self, group: str, topic: str, queue_id: int) -> str | None:
        lease = self._leases.get((group, topic, queue_id))
        return lease.client_id if lease is not None and lease.expires > self._clock() else None
