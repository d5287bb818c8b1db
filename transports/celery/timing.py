"""How long the transport's receives and sends wait: the linger for more credit and the backoff after a failure
(shared by the fetchers on the oms client's loop, those on the worker's hub, and the sender thread)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

HAND_OVER_S: Final = 0.002  # at an idle queue, the most a receive waits for the hand-over of what came (hub.py)
RECEIVE_LINGER_S: Final = 0.003  # a receive waits this long for more credit when under half the prefetch is free
RETRY_BACKOFF_S: Final = (0.1, 0.25, 0.5, 1.0, 2.0)


def backoff_s(failures: int) -> float:
    """The wait before the next attempt after ``failures`` failed ones in a row."""
    return RETRY_BACKOFF_S[min(failures, len(RETRY_BACKOFF_S) - 1)]


@dataclass
class Retries:
    """Attempts with backoff until ``deadline`` (``time.monotonic()``): after each failure ``next_wait()`` says how
    long to wait before the next attempt, or None when the time is up (the last attempt falls on the deadline)."""

    deadline: float
    failures: int = 0

    def next_wait(self) -> float | None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            return None
        wait = min(backoff_s(self.failures), left)
        self.failures += 1
        return wait
