"""BrokerStatsManager: messages stored per topic and consumed per group, per minute and per day (``statsAll``).

Sampled from what the broker keeps anyway, the ends of the consume queues and the committed offsets, so the message
paths pay nothing. Counts start when the broker does and cover at most the last 24 hours.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from broker.consumer_offset_manager import ConsumerOffsetManager
from broker.store.message_store import DefaultMessageStore
from broker.topic_config_manager import TopicConfigManager
from orbitmq.topics import is_system_topic

MINUTE_S = 60.0
HOUR_S = 3600.0
DAY_HOURS = 24


@dataclass(frozen=True)
class Sample:
    at: float  # clock seconds
    stored: dict[str, int]  # topic -> sum of its queues' end offsets
    consumed: dict[tuple[str, str], int]  # (group, topic) -> sum of committed offsets


@dataclass(frozen=True)
class GroupStats:
    group: str
    out_tps: float
    out_24h: int
    accumulation: int  # messages stored and not yet consumed by the group


@dataclass(frozen=True)
class TopicStats:
    topic: str
    in_tps: float
    in_24h: int
    groups: tuple[GroupStats, ...] = field(default=())


class BrokerStatsManager:
    """Loop-bound: ``sample()`` every ``statsSampleIntervalMs``; ``stats()`` answers statsAll from the samples."""

    def __init__(
        self,
        topics: TopicConfigManager,
        store: DefaultMessageStore,
        offsets: ConsumerOffsetManager,
        interval_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.topics, self.store, self.offsets = topics, store, offsets
        self.clock = clock
        # enough samples to reach a minute back, and one an hour for a day (plus the one a day ago)
        self._minute: deque[Sample] = deque(maxlen=int(MINUTE_S / interval_s) + 2)
        self._hourly: deque[Sample] = deque(maxlen=DAY_HOURS + 1)

    def sample(self) -> Sample:
        store = self.store
        stored = {
            tc.topic_name: sum(store.get_max_offset_in_queue(tc.topic_name, q) for q in range(tc.read_queue_nums))
            for tc in self.topics.user_topics()
            if not is_system_topic(tc.topic_name)
        }
        now = Sample(self.clock(), stored, self.offsets.totals())
        self._minute.append(now)
        if not self._hourly or now.at - self._hourly[-1].at >= HOUR_S:
            self._hourly.append(now)
        return now

    def stats(self, topic: str | None = None) -> list[TopicStats]:
        now = self.sample()
        minute_ago = next((s for s in self._minute if now.at - s.at <= MINUTE_S), now)
        day_ago = self._hourly[0]
        elapsed = now.at - minute_ago.at
        out: list[TopicStats] = []
        for name in sorted(now.stored):
            if topic is not None and name != topic:
                continue
            stored = now.stored[name]
            groups = tuple(
                GroupStats(
                    group,
                    _rate(consumed, minute_ago.consumed.get((group, t), 0), elapsed),
                    max(0, consumed - day_ago.consumed.get((group, t), 0)),
                    max(0, stored - consumed),
                )
                for (group, t), consumed in sorted(now.consumed.items())
                if t == name
            )
            in_tps = _rate(stored, minute_ago.stored.get(name, 0), elapsed)  # absent then: created since
            out.append(TopicStats(name, in_tps, max(0, stored - day_ago.stored.get(name, 0)), groups))
        return out


def _rate(now: int, before: int, elapsed: float) -> float:
    return max(0, now - before) / elapsed if elapsed > 0 else 0.0
