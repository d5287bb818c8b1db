"""RocketMQ's averaging arithmetic for queue allocation (AllocateMessageQueueAveragely): shared by the broker's
AVG strategy plugin and ``mqadmin allocateMQ``, which shows an allocation without a broker."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

Q = TypeVar("Q")


def average_block(mqs: Sequence[Q], n_cids: int, index: int) -> list[Q]:
    """Member ``index``'s contiguous block of ``mqs`` when they are cut into ``n_cids`` nearly equal blocks.

    The first ``len(mqs) % n_cids`` members take one queue more; with more members than queues the last
    members get none (a queue is never shared). Same arithmetic as AllocateMessageQueueAveragely."""
    base, extra = divmod(len(mqs), n_cids)
    start = index * base + min(index, extra)
    return list(mqs[start : start + base + (1 if index < extra else 0)])
