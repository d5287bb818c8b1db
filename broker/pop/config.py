"""Receive/ack tunables with the reference proxy's names and defaults (protocol-v2 Appendix A).

Read from ``broker.conf`` and ``-o key=value`` like the broker's and the store's keys (``BrokerSettings.pop``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from orbitmq.config import build_config
from orbitmq.limits import MIB

HOUR_MS = 3600 * 1000


class PopInitMode:
    """Where a group that never consumed a queue starts: its first message or its end (RocketMQ ConsumeInitMode)."""

    MIN = "MIN"
    MAX = "MAX"


@dataclass
class PopConfig:
    minInvisibleTimeMillsForRecv: int = 10_000  # shortest invisible time a receive may ask for (ms)
    maxInvisibleTimeMills: int = 12 * HOUR_MS  # longest invisible time a receive or change may ask for (ms)
    defaultInvisibleTimeMills: int = 60_000  # push consumers (auto_renew) get this and server-side renewal
    renewAheadTimeMillis: int = 10_000  # auto-renewed handles are renewed this long before they expire (ms)
    renewMaxTimeMillis: int = 3 * HOUR_MS  # auto-renewal stops after this long in flight (ms)
    popClientGraceMs: int = 30_000  # after a restart, unknown clients count as alive this long (heartbeat is 10 s)
    popRenewIntervalMs: int = 1_000  # how often auto-renew and journal compaction are checked
    maxPopBatchSize: int = 32  # v2 ReceiveMessage (one stream response per message), as RocketMQ's pop
    maxReceiveBatchSize: int = 1024  # Pop/ReceiveBatch: the messages travel as one unary answer, like PullBatch
    popPollingMaxMs: int = 20_000  # longest a receive long-polls (ms)
    popPollingDeadlineMinMs: int = 1_000  # a receive whose deadline leaves less is ILLEGAL_POLLING_TIME
    popPollingDeadlineMarginMs: int = 500  # the stream ends this long before the client's deadline (P11)
    popInitMode: str = PopInitMode.MIN  # where a new group starts: MIN (the queue's first message) or MAX (its end)
    popMaxInFlightPerQueue: int = 20_000  # no new pops from a queue holding this many unacked messages
    popJournalFlushIntervalMs: int = 200  # fsync period; records are written (kill-safe) before replies
    popJournalCompactBytes: int = 8 * MIB  # the pop state journal is compacted past this size (bytes)


def pop_config_from(source: Any) -> PopConfig:
    """A ``PopConfig`` taking every field ``source`` (the broker config) also has, defaults for the rest."""
    values = {f.name: getattr(source, f.name) for f in dataclasses.fields(PopConfig) if hasattr(source, f.name)}
    return build_config(PopConfig, values)
