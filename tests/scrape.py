"""Reading a process's Prometheus ``/metrics`` in tests: every sample by name, and the one sample with given labels."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def value(metrics: Samples, name: str, **labels: str) -> float:
    """The one sample of ``name`` whose labels include ``labels`` (AssertionError names what was there)."""
    hits = [v for got, v in metrics.get(name, []) if labels.items() <= got.items()]
    assert len(hits) == 1, (name, labels, metrics.get(name))
    return hits[0]


def buckets(metrics: Samples, name: str, **labels: str) -> dict[str, float]:
    """``le`` -> cumulative count of the histogram ``name`` whose labels include ``labels``."""
    return {got["le"]: v for got, v in metrics.get(f"{name}_bucket", []) if labels.items() <= got.items()}
