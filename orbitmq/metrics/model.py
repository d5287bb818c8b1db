"""The exporter-neutral model: a ``Family`` of samples (labels, number or ``Histogram``) that every exporter turns
into its own types; whatever yields families (``MetricsSource``) can be scraped, pushed or logged."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

Labels = dict[str, str]


@dataclass
class Histogram:
    """Fixed upper bounds (Prometheus/OpenTelemetry explicit buckets); ``counts`` are per bucket, not cumulative."""

    bounds: Sequence[float]
    counts: list[int] = field(default_factory=list)  # one per bound, plus +Inf
    total: float = 0.0
    n: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.bounds) + 1)

    def observe(self, value: float, times: int = 1) -> None:
        # bisect_left: a value equal to a bound belongs to that bucket (le = less or equal)
        self.counts[bisect_left(self.bounds, value)] += times
        self.total += value * times
        self.n += times

    def copy(self) -> Histogram:
        return Histogram(self.bounds, list(self.counts), self.total, self.n)


@dataclass
class Family:
    """One metric family: name, kind (counter, gauge, histogram), help, samples."""

    name: str
    kind: str
    help: str
    samples: Sequence[tuple[Labels, float | Histogram]] = field(default_factory=list)


class MetricsSource(Protocol):
    """What an exporter reads: every family, now (called from the exporter's own thread)."""

    def families(self) -> list[Family]: ...


def parse_metrics_label(text: str) -> Labels:
    """``metricsLabel``: RocketMQ's ``key:value,key:value`` pairs added to every sample."""
    labels: Labels = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition(":")
        if not sep or not key.strip():
            raise ValueError(f"metricsLabel item {item!r}: expected key:value")
        labels[key.strip()] = value.strip()
    return labels
