"""What metrics cost: SendBatch and PullBatch throughput of a broker with ``metricsExporterType=PROM`` against the
same broker with metrics off, interleaved in the same run (goal: at most 3% slower), plus one scrape's time.

``python -m benchmarks.run_all metrics`` (``--quick`` for a smoke run).
"""

from __future__ import annotations

import asyncio
import socket
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from benchmarks.bench_e2e import Broker, bench_pull_batch, bench_send_batch

COST_GOAL = 0.03
BATCH = 1024  # messages per SendBatch / PullBatch call, as in the e2e benchmark


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scrape_ms(port: int) -> float:
    t0 = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        response.read()
    return (time.perf_counter() - t0) * 1000


def run(quick: bool = False) -> dict[str, Any]:
    n = 51_200 if quick else 204_800
    rounds = 2 if quick else 5
    port = _free_port()
    sends: dict[str, list[float]] = {"off": [], "on": []}
    pulls: dict[str, list[float]] = {"off": [], "on": []}
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as tmp:
        for side in ("off", "on"):
            (Path(tmp) / side).mkdir()
        brokers = {
            "off": Broker(Path(tmp) / "off" / "store"),
            "on": Broker(
                Path(tmp) / "on" / "store", {"metricsExporterType": "PROM", "metricsPromExporterPort": str(port)}
            ),
        }
        try:
            for b in brokers.values():  # warm-up: topics created, first segments mapped
                asyncio.run(bench_send_batch(b.addr, "BenchMetricsWarm", 4 * BATCH, BATCH, 4))
            for r in range(rounds):
                order = ("off", "on") if r % 2 == 0 else ("on", "off")  # drift on shared cores hits both sides
                for side in order:
                    addr = brokers[side].addr
                    sends[side].append(
                        asyncio.run(bench_send_batch(addr, f"BenchMetrics{r}", n, BATCH, 4))["msgs_per_s"]
                    )
                    pulls[side].append(asyncio.run(bench_pull_batch(addr, f"BenchMetrics{r}", BATCH))["msgs_per_s"])
            scrape_ms = statistics.median(_scrape_ms(port) for _ in range(5))
        finally:
            for b in brokers.values():
                b.stop()
    send_off, send_on = statistics.median(sends["off"]), statistics.median(sends["on"])
    pull_off, pull_on = statistics.median(pulls["off"]), statistics.median(pulls["on"])
    send_cost = 1 - send_on / send_off
    pull_cost = 1 - pull_on / pull_off
    return {
        "summary": {
            "send_batch_msgs_per_s_metrics_off": round(send_off),
            "send_batch_msgs_per_s_metrics_on": round(send_on),
            "send_batch_cost": round(send_cost, 4),
            "pull_batch_msgs_per_s_metrics_off": round(pull_off),
            "pull_batch_msgs_per_s_metrics_on": round(pull_on),
            "pull_batch_cost": round(pull_cost, 4),
            "scrape_ms_p50": round(scrape_ms, 2),
            "goal_cost": COST_GOAL,
            "meets_goal": send_cost <= COST_GOAL and pull_cost <= COST_GOAL,
            "rounds": rounds,
            "messages_per_round": n,
        },
        "send_batch": sends,
        "pull_batch": pulls,
    }
