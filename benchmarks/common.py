"""Shared benchmark helpers: percentiles, machine info, the JSON result writer and the paced sender of the
latency runs (OrbitMQ's and the peers' alike)."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def pct(values: list[float], p: float) -> float:
    xs = sorted(values)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))]


def proc_cpu_s(pid: int, tid: int | None = None) -> float:
    """utime + stime of a process (all its threads, not its children) or of one of its threads, in seconds;
    ``OSError`` once it is gone."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def threads_cpu_s(pid: int) -> dict[int, tuple[float, float]]:
    """Per live thread of a process: seconds on a CPU and seconds runnable but waiting for one (schedstat), by
    thread id (threads that end in between are missed)."""
    out: dict[int, tuple[float, float]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                on_cpu, waiting = f.read().split()[:2]
        except OSError:
            continue  # the thread ended between the listing and the read
        out[int(tid)] = (int(on_cpu) / 1e9, int(waiting) / 1e9)
    return out


def busiest_thread(
    before: dict[int, tuple[float, float]], after: dict[int, tuple[float, float]], seconds: float
) -> dict[str, float]:
    """The thread runnable for the largest share of ``seconds`` between two :func:`threads_cpu_s` snapshots: its
    share on a CPU and its share on a CPU or waiting for one. A runnable share near 1.0 says that thread (a Python
    event loop, grpc's poller) is what bounds the process; on a loaded machine much of it is waiting."""
    best = (0.0, 0.0)
    for tid, (cpu, wait) in after.items():
        cpu0, wait0 = before.get(tid, (0.0, 0.0))
        spent = (cpu - cpu0, wait - wait0)
        if sum(spent) > sum(best):
            best = spent
    if seconds <= 0:
        return {"cpu": float("nan"), "runnable": float("nan")}
    return {"cpu": round(best[0] / seconds, 3), "runnable": round(sum(best) / seconds, 3)}


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def machine() -> dict[str, Any]:
    load = os.getloadavg()
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_at_start": load,
    }


def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = RESULTS / f"{name}-{stamp}.json"
    path.write_text(json.dumps({"bench": name, "time": stamp, "machine": machine(), **data}, indent=2))
    return path


# The latency workload: 10,000 msg/s as a batch every 5 ms. Smaller ticks raise the RPC rate, which is what costs
# in Python clients (docs/broker.md, latency).
LATENCY_RATE = 10_000
LATENCY_TICK_MS = 5.0
STAMP_BYTES = 8


def paced_total(rate: int, seconds: float, tick_ms: float) -> int:
    """How many messages :func:`paced_sends` sends with these arguments."""
    return int(seconds * 1000 / tick_ms) * max(1, round(rate * tick_ms / 1000))


def stamped_body(stamp_ns: int, size: int) -> bytes:
    """A ``size``-byte body that starts with the scheduled send time (ns since the epoch, big-endian)."""
    return stamp_ns.to_bytes(STAMP_BYTES, "big") + b"p" * (size - STAMP_BYTES)


def latency_ms(body: bytes, now_ns: int) -> float:
    return (now_ns - int.from_bytes(body[:STAMP_BYTES], "big")) / 1e6


@dataclass
class PacedRun:
    """What :func:`paced_sends` did: ``ticks`` sends of ``per_tick`` messages over ``elapsed_s``."""

    ticks: int
    per_tick: int
    elapsed_s: float
    send_errors: int
    lags_ms: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "batch_per_tick": self.per_tick,
            "achieved_send_rate": round(self.ticks * self.per_tick / self.elapsed_s) if self.elapsed_s else 0,
            "send_errors": self.send_errors,
            "send_lag_ms_p50": round(pct(self.lags_ms, 50), 3),
            "send_lag_ms_p99": round(pct(self.lags_ms, 99), 3),
        }


async def paced_sends(
    rate: int, seconds: float, tick_ms: float, send: Callable[[int, int, int], Awaitable[Any]]
) -> PacedRun:
    """Call ``send(tick, per_tick, stamp_ns)`` on the running loop every ``tick_ms``; ``stamp_ns`` is the tick's
    scheduled time, so a sender falling behind shows up as latency (no coordinated omission). Waits for every send.

    The ticks come from a thread: asyncio's timers ride on epoll's whole-millisecond timeout and woke the sender
    0.6 ms late at p50 (1.2 ms p99); a thread's sleep is on time and the hand-over wakes the loop at once.
    """
    per_tick = max(1, round(rate * tick_ms / 1000))
    ticks = int(seconds * 1000 / tick_ms)
    loop = asyncio.get_running_loop()
    sends: list[asyncio.Future[Any]] = []
    lags: list[float] = []
    all_sent = asyncio.Event()
    t0 = time.perf_counter()
    wall0 = time.time_ns()

    def fire(k: int, target: float) -> None:
        lags.append((time.perf_counter() - target) * 1000)
        sends.append(asyncio.ensure_future(send(k, per_tick, wall0 + int(k * tick_ms * 1e6))))
        if k == ticks - 1:
            all_sent.set()

    def pace() -> None:
        for k in range(ticks):
            target = t0 + k * tick_ms / 1000
            delay = target - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            loop.call_soon_threadsafe(fire, k, target)

    pacer = threading.Thread(target=pace, name="pacer", daemon=True)
    pacer.start()
    await asyncio.wait_for(all_sent.wait(), seconds + 30)
    pacer.join(5)
    elapsed = time.perf_counter() - t0
    outcomes = await asyncio.gather(*sends, return_exceptions=True)
    errors = sum(1 for o in outcomes if isinstance(o, BaseException))
    return PacedRun(ticks, per_tick, elapsed, errors, lags)
