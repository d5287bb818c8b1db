"""What metrics cost: SendBatch and PullBatch throughput of a broker with ``metricsExporterType=PROM`` against the
same broker with metrics off, interleaved in the same run (goal: at most 3% slower), plus one scrape's time; and
``oms``'s ``send_batch`` with the client's own metrics recorded against the same with recording stubbed out.

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

import oms
from benchmarks.bench_e2e import Broker, bench_pull_batch, bench_send_batch
from benchmarks.bench_oms import bench_oms_send_batch
from oms.client.metrics import ClientMetrics

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


def _paired_cost(sides: dict[str, list[float]]) -> float:
    """1 - the median of each round's on/off ratio: the two sides of a round ran back to back, so slow drift of the
    shared machine cancels in the ratio where it does not in a ratio of medians."""
    return 1 - statistics.median(on / off for off, on in zip(sides["off"], sides["on"], strict=True))


def _no_send_metrics(self: ClientMetrics, topic: str, messages: int, seconds: float, ok: bool) -> None:
    """``ClientMetrics.on_send`` with nothing recorded: the "off" side of the client comparison."""


def client_send_batch(addr: str, n: int, rounds: int) -> dict[str, list[float]]:
    """oms ``send_batch`` msgs/s with the client's metrics recorded ("on") and not ("off"), interleaved; and the
    client process's CPU µs per message ("cpu_us_on"/"cpu_us_off"), which other jobs on the machine disturb less
    than wall-clock throughput (the broker runs in its own process)."""
    out: dict[str, list[float]] = {"off": [], "on": [], "cpu_us_off": [], "cpu_us_on": []}
    recording = ClientMetrics.on_send
    with oms.get_messaging_access_point(f"oms:rocketmq://{addr}/") as ap:
        for r in range(rounds):
            for side in ("off", "on") if r % 2 == 0 else ("on", "off"):
                ClientMetrics.on_send = recording if side == "on" else _no_send_metrics  # type: ignore[method-assign]
                try:
                    cpu = time.process_time()
                    result = bench_oms_send_batch(ap, f"BenchClientMetrics{r}", n, 4)
                    out[f"cpu_us_{side}"].append(round((time.process_time() - cpu) / result["messages"] * 1e6, 3))
                    out[side].append(result["msgs_per_s"])
                finally:
                    ClientMetrics.on_send = recording  # type: ignore[method-assign]
    return out


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
            client = client_send_batch(brokers["off"].addr, n // 2, rounds)
        finally:
            for b in brokers.values():
                b.stop()
    send_off, send_on = statistics.median(sends["off"]), statistics.median(sends["on"])
    pull_off, pull_on = statistics.median(pulls["off"]), statistics.median(pulls["on"])
    send_cost = 1 - send_on / send_off
    pull_cost = 1 - pull_on / pull_off
    client_off, client_on = statistics.median(client["off"]), statistics.median(client["on"])
    client_cost = 1 - client_on / client_off
    return {
        "summary": {
            "send_batch_msgs_per_s_metrics_off": round(send_off),
            "send_batch_msgs_per_s_metrics_on": round(send_on),
            "send_batch_cost": round(send_cost, 4),
            "pull_batch_msgs_per_s_metrics_off": round(pull_off),
            "pull_batch_msgs_per_s_metrics_on": round(pull_on),
            "pull_batch_cost": round(pull_cost, 4),
            "scrape_ms_p50": round(scrape_ms, 2),
            "oms_send_batch_msgs_per_s_client_metrics_off": round(client_off),
            "oms_send_batch_msgs_per_s_client_metrics_on": round(client_on),
            "oms_send_batch_client_metrics_cost": round(client_cost, 4),
            "send_batch_cost_paired": round(_paired_cost(sends), 4),
            "pull_batch_cost_paired": round(_paired_cost(pulls), 4),
            "oms_send_batch_client_metrics_cost_paired": round(_paired_cost(client), 4),
            "oms_send_batch_client_cpu_us_per_msg_off": statistics.median(client["cpu_us_off"]),
            "oms_send_batch_client_cpu_us_per_msg_on": statistics.median(client["cpu_us_on"]),
            "goal_cost": COST_GOAL,
            "meets_goal": send_cost <= COST_GOAL and pull_cost <= COST_GOAL and client_cost <= COST_GOAL,
            "rounds": rounds,
            "messages_per_round": n,
        },
        "send_batch": sends,
        "pull_batch": pulls,
        "oms_send_batch": client,
    }
