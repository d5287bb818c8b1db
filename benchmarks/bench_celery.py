"""Celery on OrbitMQ (the rocketmq:// transport) against Celery on Redis and on RabbitMQ, measured in the same run.

``python -m benchmarks.bench_celery [--quick]`` (``make bench`` runs it through run_all). For each broker, a server
started here on 127.0.0.1 with a fresh data dir, the Celery app of ``benchmarks/celery_bench_app.py`` and the same
worker command for all (``celery worker -P prefork -c 2``, default flags, ``-l WARNING``):

* publish rate: N no-op tasks sent with one producer (``send_task``), tasks/s;
* drain rate: a worker started on the N queued tasks; from its first finished task to its last (its start-up is
  not counted), tasks/s; each task appends one byte to a file, which is how completions are counted;
* solo drain rate: the same with ``celery worker -P solo`` (one process: tasks run on the thread that receives
  them, so the transport's share of each task and its receive pipelining weigh more);
* publish-to-start latency: sequential tasks 10 ms apart on a running worker, each writing ``now - sent``.

Publish and drain are repeated (median reported); latency too, its percentiles over all rounds' samples. Rounds go
round-robin over the brokers. A peer whose server or client is missing is reported as
"not installed" (``make bench-peers-install`` installs them). Every process started is stopped by its PID.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks.bench_peers import (
    RABBIT_SERVER,
    _free_port,
    _log_tail,
    _missing,
    _stop_pid,
    _tree,
    _which,
    rabbitmq_node,
)
from benchmarks.common import pct, proc_cpu_s, write_result

ROOT = Path(__file__).resolve().parent.parent
N_FULL = 10_000
N_QUICK = 2_000
REPEATS_FULL = 3
LATENCY_N_FULL = 300
LATENCY_N_QUICK = 100
LATENCY_GAP_S = 0.010
POOLS = {"prefork": ["-P", "prefork", "-c", "2"], "solo": ["-P", "solo"], "threads": ["-P", "threads", "-c", "2"]}
COMMON_ARGS = ["-l", "WARNING", "-Q", "bench"]


def worker_args(pool: str = "prefork") -> list[str]:
    """The ``celery worker`` flags of a run with ``pool`` (prefork: the issue's measurement, drain and latency)."""
    return [*POOLS[pool], *COMMON_ARGS]


WORKER_ARGS = worker_args()
PHASE_TIMEOUT_S = 180.0
AB_STALL_S = 5.0
AB_LATENCY_ROUND_TIMEOUT_S = 240.0
TICK = "benchmarks.celery_bench_app.tick"
STARTED = "benchmarks.celery_bench_app.started"


# the server processes behind each URL (RabbitMQ: beam.smp and its helpers), for CPU per task in a drain
SERVER_PIDS: dict[str, set[int]] = {}


class NotInstalled(Exception):
    """The peer's server binary or Python client is missing."""


# -- servers ------------------------------------------------------------------------------------------------------


@contextmanager
def orbitmq_server(workdir: Path) -> Iterator[str]:
    with orbitmq_broker(workdir) as (url, proc):
        SERVER_PIDS[url] = {proc.pid}
        yield url


@contextmanager
def orbitmq_broker(workdir: Path, root: Path = ROOT) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A broker of the code under ``root`` (the A/B mode runs a base checkout's), its URL and process."""
    port = _free_port()
    log = open(workdir / "broker.log", "wb")  # noqa: SIM115 - closed below
    args = [sys.executable, "-m", "broker.cli", "--store", str(workdir / "store"), "--port", str(port)]
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, cwd=root, env=_code_env(root))
    try:
        _wait(lambda: b"ready on" in (workdir / "broker.log").read_bytes(), proc, 60, "mqbroker")
        yield f"rocketmq://127.0.0.1:{port}", proc
    finally:
        _stop_pid(proc)
        log.close()


@contextmanager
def redis_server(workdir: Path) -> Iterator[str]:
    binary = _which("redis-server", "/usr/bin/redis-server")
    if (why := _missing(binary, "redis-server", "redis")) is not None:
        raise NotInstalled(why)
    port = _free_port()
    args = [str(binary), "--bind", "127.0.0.1", "--port", str(port), "--dir", str(workdir), "--save", "",
            "--appendonly", "no", "--daemonize", "no"]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        import redis

        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=5)

        def ready() -> bool:
            try:
                return bool(client.ping())
            except redis.ConnectionError:
                return False

        _wait(ready, proc, 15, "redis-server")
        client.close()
        SERVER_PIDS[f"redis://127.0.0.1:{port}/0"] = {proc.pid}
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        _stop_pid(proc)


@contextmanager
def rabbitmq_server(workdir: Path) -> Iterator[str]:
    binary = RABBIT_SERVER if os.access(RABBIT_SERVER, os.X_OK) else None
    if (why := _missing(binary, str(RABBIT_SERVER), "amqp")) is not None:
        raise NotInstalled(why)
    if os.geteuid() != 0:
        raise NotInstalled("needs root to start rabbitmq-server from /usr/lib/rabbitmq/bin")
    epmd_bin = _which("epmd", "/usr/lib/erlang/bin/epmd")
    if epmd_bin is None:
        raise NotInstalled("epmd not found (erlang-base missing)")
    base = workdir / "rabbitmq"
    port, epmd_port, env = rabbitmq_node(base, "orbitcelery")
    epmd = subprocess.Popen(
        [str(epmd_bin), "-address", "127.0.0.1", "-port", str(epmd_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    log = open(base / "stdout.log", "wb")  # noqa: SIM115 - closed below
    server = subprocess.Popen([str(binary)], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=base)
    pids: set[int] = set()
    try:
        from kombu import Connection

        url = f"amqp://guest:guest@127.0.0.1:{port}//"

        def ready() -> bool:
            try:
                with Connection(url, connect_timeout=2) as c:
                    c.connect()
                return True
            except Exception:  # not up yet
                return False

        try:
            _wait(ready, server, 120, "rabbitmq-server", interval=0.5)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {_log_tail(base / 'stdout.log')}") from None
        pids = _tree(server.pid)
        SERVER_PIDS[url] = pids
        yield url
    finally:
        pids |= _tree(server.pid)
        _stop_pid(server, grace_s=60)
        for pid in pids - {server.pid}:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _stop_pid(epmd)
        log.close()


BROKERS: dict[str, Callable[[Path], contextlib.AbstractContextManager[str]]] = {
    "orbitmq": orbitmq_server,
    "redis": redis_server,
    "rabbitmq": rabbitmq_server,
}


def _wait(ready: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float, what: str, interval=0.05) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready after {timeout}s")
        time.sleep(interval)


# -- workers and measurements -------------------------------------------------------------------------------------


def _code_env(root: Path) -> dict[str, str]:
    """The environment of a process running the code under ``root``: ``-m`` puts the working directory (``root``)
    first on sys.path, PYTHONPATH keeps it ahead of the venv's editable install in whatever it imports later."""
    return {**os.environ, "PYTHONPATH": str(root)}


@contextmanager
def worker(
    url: str, workdir: Path, name: str, root: Path = ROOT, pool: str = "prefork"
) -> Iterator[subprocess.Popen[bytes]]:
    env = {**_code_env(root), "ORBITMQ_BENCH_BROKER": url, "ORBITMQ_BENCH_DIR": str(workdir)}
    cmd = [sys.executable, "-m", "celery", "-A", "benchmarks.celery_bench_app", "worker", "-n", f"{name}@%h"]
    log = open(workdir / f"{name}.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [*cmd, *worker_args(pool)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=root,
        start_new_session=True,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # pool children left behind
        log.close()


def _client(url: str) -> Any:
    from celery import Celery

    import transports.celery  # noqa: F401

    app = Celery("orbitmq_bench_client", broker=url)
    app.conf.update(task_ignore_result=True, task_default_queue="bench")
    return app


def publish(app: Any, n: int, run: str) -> float:
    """Send ``n`` ticks with one producer; tasks/s."""
    with app.producer_or_acquire() as producer:
        app.send_task(TICK, args=(run,), producer=producer)  # connection, queue declaration: not timed
        start = time.perf_counter()
        for _ in range(n - 1):
            app.send_task(TICK, args=(run,), producer=producer)
        return (n - 1) / (time.perf_counter() - start)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _await_first_task(proc: subprocess.Popen[bytes], trace: Path, log: Path) -> float:
    """Wait until the worker finished its first task (its start-up is not timed); the phase's deadline."""
    deadline = time.monotonic() + PHASE_TIMEOUT_S
    while _size(trace) == 0:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"worker never ran a task: {_log_tail(log, 10)}")
        time.sleep(0.002)
    return deadline


def drain(url: str, workdir: Path, n: int, run: str, name: str, pool: str = "prefork") -> dict[str, Any]:
    """Start a worker on ``n`` queued ticks: tasks/s from its first finished task to its last."""
    trace = workdir / run
    with worker(url, workdir, name, pool=pool) as proc:
        deadline = _await_first_task(proc, trace, workdir / f"{name}.log")
        t0, first = time.perf_counter(), _size(trace)
        pids = _drain_pids(proc.pid, SERVER_PIDS.get(url, set()))
        cpu0 = {what: _cpu_sum(p) for what, p in pids.items()}
        while _size(trace) < n and time.monotonic() < deadline:
            time.sleep(0.002)
        elapsed = time.perf_counter() - t0
        cpu1 = {what: _cpu_sum(p) for what, p in pids.items()}
        done = _size(trace)
    per_task = 1000 / max(1, done - first)
    return {
        "tasks": done,
        "rate": (done - first) / elapsed if elapsed > 0 else 0.0,
        "timed_out": done < n,
        # where the CPU of the drain went (ms per task): the worker's main process, its pool children, the server
        "cpu_ms_per_task": {what: round((cpu1[what] - cpu0[what]) * per_task, 3) for what in pids},
    }


def _drain_pids(worker_pid: int, server: set[int]) -> dict[str, set[int]]:
    with contextlib.suppress(OSError):
        children = {int(p) for p in Path(f"/proc/{worker_pid}/task/{worker_pid}/children").read_text().split()}
        return {"worker_main": {worker_pid}, "pool_children": children, "server": server}
    return {"worker_main": {worker_pid}, "server": server}


def _cpu_sum(pids: set[int]) -> float:
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError):
            total += proc_cpu_s(pid)
    return total


def latency(app: Any, url: str, workdir: Path, count: int) -> dict[str, Any]:
    return latency_summary(latency_samples(app, url, workdir, count))


def latency_summary(ms: list[float]) -> dict[str, Any]:
    return {"count": len(ms), "p50_ms": round(pct(ms, 50), 2), "p90_ms": round(pct(ms, 90), 2),
            "p99_ms": round(pct(ms, 99), 2)}  # fmt: skip


def latency_samples(app: Any, url: str, workdir: Path, count: int) -> list[float]:
    """Publish-to-start of ``count`` sequential tasks on a fresh worker, in ms."""
    trace = workdir / "latency"
    trace.unlink(missing_ok=True)  # an earlier round's: the warm-up below waits for this worker's first task
    with worker(url, workdir, "latency") as proc:
        # warm up until the worker answers, then sequential tasks LATENCY_GAP_S apart
        deadline = time.monotonic() + 60
        while _size(trace) == 0:
            app.send_task(STARTED, args=("latency", time.time()))
            time.sleep(0.2)
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("latency worker did not start")
        time.sleep(0.5)
        trace.unlink()
        with app.producer_or_acquire() as producer:
            for _ in range(count):
                app.send_task(STARTED, args=("latency", time.time()), producer=producer)
                time.sleep(LATENCY_GAP_S)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            lines = trace.read_text().splitlines() if trace.exists() else []
            if len(lines) >= count:
                break
            time.sleep(0.05)
    return [float(x) for x in lines]


def run(quick: bool = False, brokers: list[str] | None = None) -> dict[str, Any]:
    """Start every broker, then publish+drain round-robin over them ``repeats`` times (so a change of load on the
    shared machine hits all of them alike), then latency rounds round-robin too; a broker's percentiles are over
    the samples of all its rounds (one round per broker moved a peer's p99 by a third between runs)."""
    n = N_QUICK if quick else N_FULL
    repeats = 1 if quick else REPEATS_FULL
    latency_n = LATENCY_N_QUICK if quick else LATENCY_N_FULL
    names = brokers or list(BROKERS)
    results: dict[str, dict[str, Any]] = {}
    live: dict[str, tuple[str, Any, Path]] = {}  # name -> (url, client app, workdir)
    with contextlib.ExitStack() as stack:
        for name in names:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"bench-celery-{name}-")))
            try:
                url = stack.enter_context(BROKERS[name](workdir))
            except NotInstalled as exc:
                results[name] = {"status": "not installed", "reason": str(exc)}
                continue
            except Exception as exc:  # recorded; the other brokers still run
                results[name] = {"status": "failed", "reason": f"{type(exc).__name__}: {exc}"}
                continue
            app = _client(url)
            stack.callback(_close_app, app)
            live[name] = (url, app, workdir)
            results[name] = {"status": "ok", "url": url, "publish_rates": [], "drains": [], "solo_drains": []}

        def drains(name: str, r: dict[str, Any], url: str, app: Any, workdir: Path, i: int) -> None:
            r["publish_rates"].append(round(publish(app, n, f"drain-{i}")))
            r["drains"].append(drain(url, workdir, n, f"drain-{i}", f"drain{i}"))
            publish(app, n, f"solo-{i}")
            r["solo_drains"].append(drain(url, workdir, n, f"solo-{i}", f"solo{i}", "solo"))

        samples: dict[str, list[float]] = {name: [] for name in live}

        def latencies(name: str, r: dict[str, Any], url: str, app: Any, workdir: Path, i: int) -> None:
            ms = latency_samples(app, url, workdir, latency_n)
            samples[name].extend(ms)
            r.setdefault("latency_rounds", []).append(latency_summary(ms))

        _round_robin(live, results, repeats, "", drains)
        _round_robin(live, results, repeats, "latency ", latencies)
        for name in live:
            r = results[name]
            if r["status"] != "ok":
                continue
            r["latency"] = latency_summary(samples[name])
            r["publish_rate"] = round(statistics.median(r["publish_rates"]))
            r["drain_rate"] = round(statistics.median(d["rate"] for d in r["drains"]))
            r["drains"] = [{**d, "rate": round(d["rate"])} for d in r["drains"]]
            r["solo_drain_rate"] = round(statistics.median(d["rate"] for d in r["solo_drains"]))
            r["solo_drains"] = [{**d, "rate": round(d["rate"])} for d in r["solo_drains"]]
            r["cpu_ms_per_task"] = {
                what: round(statistics.median(d["cpu_ms_per_task"].get(what, 0.0) for d in r["drains"]), 3)
                for what in r["drains"][0]["cpu_ms_per_task"]
            }
            print(f"bench_celery: {name}: {json.dumps(r)}", file=sys.stderr, flush=True)
    return {
        "tasks": n,
        "repeats": repeats,
        "latency_tasks": latency_n,
        "latency_rounds": repeats,
        "worker": " ".join(WORKER_ARGS),
        "solo_worker": " ".join(worker_args("solo")),
        "brokers": results,
        "summary": summary(results),
    }


Step = Callable[[str, dict[str, Any], str, Any, Path, int], None]


def _round_robin(
    live: dict[str, tuple[str, Any, Path]], results: dict[str, dict[str, Any]], repeats: int, phase: str, step: Step
) -> None:
    """``repeats`` rounds of ``step`` over the live brokers in turn; a broker whose step raises is marked failed and
    left out from then on (the others go on)."""
    for i in range(repeats):
        for name, (url, app, workdir) in live.items():
            r = results[name]
            if r["status"] != "ok":
                continue
            print(f"bench_celery: {name} {phase}round {i + 1}/{repeats}", file=sys.stderr, flush=True)
            try:
                step(name, r, url, app, workdir, i)
            except Exception as exc:
                r.update(status="failed", reason=f"{type(exc).__name__}: {exc}")


def _close_app(app: Any) -> None:
    app.pool.force_close_all()
    app.close()


def summary(brokers: dict[str, Any]) -> dict[str, Any]:
    ours = brokers.get("orbitmq", {})
    peers = {k: v for k, v in brokers.items() if k != "orbitmq" and v.get("status") == "ok"}
    s: dict[str, Any] = {
        name: (
            {
                "drain_tasks_per_s": r["drain_rate"],
                "solo_drain_tasks_per_s": r["solo_drain_rate"],
                "publish_tasks_per_s": r["publish_rate"],
                "latency_p50_ms": r["latency"]["p50_ms"],
                "latency_p99_ms": r["latency"]["p99_ms"],
                "cpu_ms_per_task": r.get("cpu_ms_per_task"),
            }
            if r.get("status") == "ok"
            else r.get("status")
        )
        for name, r in brokers.items()
    }
    if ours.get("status") == "ok" and peers:
        best = max(peers.values(), key=lambda r: r["drain_rate"])
        s["drain_over_best_peer"] = round(ours["drain_rate"] / best["drain_rate"], 2)
        s["solo_drain_over_best_peer"] = round(
            ours["solo_drain_rate"] / max(r["solo_drain_rate"] for r in peers.values()), 2
        )
        s["publish_over_best_peer"] = round(ours["publish_rate"] / max(r["publish_rate"] for r in peers.values()), 2)
        s["latency_p99_vs_peers"] = {
            name: round(ours["latency"]["p99_ms"] / r["latency"]["p99_ms"], 2) for name, r in peers.items()
        }
        s["goal_drain_1_5x_best_peer"] = s["drain_over_best_peer"] >= 1.5
        s["goal_p99_below_both"] = all(v < 1 for v in s["latency_p99_vs_peers"].values())
    return s


# -- A/B: this checkout against a base checkout, alternated rounds ---------------------------------------------------


def _thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread of ``pid``, keyed ``<comm>/<tid>`` (Python 3.11 names no native threads: the main
    thread shows the command, the others too, so the tid tells them apart)."""
    out: dict[str, float] = {}
    with contextlib.suppress(FileNotFoundError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(FileNotFoundError, ProcessLookupError):
                out[tid] = proc_cpu_s(pid, int(tid))
    return out


def ab_round(root: Path, n: int, workdir: Path, pool: str = "prefork") -> dict[str, Any]:
    """One drain of ``n`` queued no-op tasks by the code under ``root`` (its broker and worker): the rate and the
    CPU per task of the worker's main process (and of each of its threads) and of the broker, first to last task."""
    with orbitmq_broker(workdir, root) as (url, broker_proc):
        app = _client(url)
        try:
            publish(app, n, "ab")
            trace = workdir / "ab"
            with worker(url, workdir, "ab", root, pool) as proc:
                deadline = _await_first_task(proc, trace, workdir / "ab.log")
                t0, first = time.perf_counter(), _size(trace)
                w0, b0, th0 = proc_cpu_s(proc.pid), proc_cpu_s(broker_proc.pid), _thread_cpu(proc.pid)
                size, moved = first, t0
                # until all ran, or nothing ran for AB_STALL_S (a publish that failed on a loaded machine)
                while size < n and time.monotonic() < deadline and time.perf_counter() - moved < AB_STALL_S:
                    time.sleep(0.002)
                    if (now := _size(trace)) != size:
                        size, moved = now, time.perf_counter()
                w1, b1, th1 = proc_cpu_s(proc.pid), proc_cpu_s(broker_proc.pid), _thread_cpu(proc.pid)
                elapsed = moved - t0
                done = size - first
        finally:
            _close_app(app)
    per_task = 1000 / max(1, done)
    threads = sorted(((th1[t] - th0.get(t, 0.0)) * per_task for t in th1), reverse=True)
    return {
        "drain_tasks_per_s": round(done / elapsed),
        "worker_main_cpu_ms_per_task": round((w1 - w0) * per_task, 3),
        "worker_threads_cpu_ms_per_task": [round(x, 3) for x in threads if x > 0.001],
        "broker_cpu_ms_per_task": round((b1 - b0) * per_task, 3),
        "load": round(os.getloadavg()[0], 2),
        "short": size < n,  # fewer tasks than published ran (CPU per task then includes the idle wait)
    }


def ab(base: Path, n: int, rounds: int, pool: str = "prefork") -> dict[str, Any]:
    """Rounds alternate base and this checkout (the first of each pair alternates too), so a change of load on the
    shared machine hits both alike; medians per side."""
    detail: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    sides = {"before": base, "after": ROOT}
    for i in range(rounds):
        order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
        for side in order:
            with tempfile.TemporaryDirectory(prefix=f"bench-celery-ab-{side}-") as tmp:
                r = ab_round(sides[side], n, Path(tmp), pool)
            print(f"bench_celery ab: round {i + 1}/{rounds} {side}: {json.dumps(r)}", file=sys.stderr, flush=True)
            detail[side].append(r)
    keys = ("drain_tasks_per_s", "worker_main_cpu_ms_per_task", "broker_cpu_ms_per_task")
    summary = {side: {k: statistics.median(r[k] for r in rs) for k in keys} for side, rs in detail.items()}
    b, a = summary["before"], summary["after"]
    summary["drain_after_over_before"] = round(a["drain_tasks_per_s"] / b["drain_tasks_per_s"], 2)
    summary["worker_cpu_after_over_before"] = round(
        a["worker_main_cpu_ms_per_task"] / b["worker_main_cpu_ms_per_task"], 2
    )
    summary["broker_cpu_after_over_before"] = round(a["broker_cpu_ms_per_task"] / b["broker_cpu_ms_per_task"], 2)
    return {
        "what": f"celery drain on OrbitMQ, base checkout {base} vs this one, alternated rounds, one broker and one "
        f"'celery worker {' '.join(worker_args(pool))}' per round, no-op tasks published first",
        "tasks": n,
        "rounds": rounds,
        "rounds_detail": detail,
        "summary": summary,
    }


# One latency phase of the code under a checkout, run in a process of its own (PYTHONPATH and cwd = that checkout:
# publisher, broker and worker all run its code). Only names both sides have. A fresh broker first allocates and
# pre-touches its commit log segment (seconds of CPU; older checkouts held the GIL for it): the phase starts once
# the broker is idle, as it is in the full run's latency phase (which comes after the drains).
_LATENCY_ROUND = """
import json, sys, tempfile, time
from pathlib import Path
from benchmarks.bench_celery import TICK, _client, _close_app, latency, orbitmq_broker
from benchmarks.common import proc_cpu_s
count = int(sys.argv[1])
with tempfile.TemporaryDirectory(prefix="bench-celery-abl-") as tmp:
    with orbitmq_broker(Path(tmp)) as (url, broker):
        app = _client(url)
        try:
            app.send_task(TICK, args=("warm",))  # the queue and its topic
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                before = proc_cpu_s(broker.pid)
                time.sleep(0.5)
                if proc_cpu_s(broker.pid) - before < 0.025:
                    break
            print(json.dumps(latency(app, url, Path(tmp), count)))
        finally:
            _close_app(app)
"""


def ab_latency(base: Path, count: int, rounds: int) -> dict[str, Any]:
    """Publish-to-start latency of ``base`` and of this checkout in alternated rounds (the first of each pair
    alternates too), each round a fresh broker and worker of that side's code; medians of p50/p90/p99 per side."""
    detail: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    sides = {"before": base, "after": ROOT}
    for i in range(rounds):
        for side in ["before", "after"] if i % 2 == 0 else ["after", "before"]:
            root = sides[side]
            out = subprocess.run(
                [sys.executable, "-c", _LATENCY_ROUND, str(count)],
                cwd=root,
                env=_code_env(root),
                capture_output=True,
                timeout=AB_LATENCY_ROUND_TIMEOUT_S,
                check=True,
            )
            r = {**json.loads(out.stdout.decode().strip().splitlines()[-1]), "load": round(os.getloadavg()[0], 2)}
            print(f"bench_celery ab-latency: round {i + 1}/{rounds} {side}: {json.dumps(r)}", file=sys.stderr)
            detail[side].append(r)
    keys = ("p50_ms", "p90_ms", "p99_ms")
    summary: dict[str, Any] = {
        side: {k: round(statistics.median(r[k] for r in rs), 2) for k in keys} for side, rs in detail.items()
    }
    summary["after_over_before"] = {k: round(summary["after"][k] / summary["before"][k], 2) for k in keys}
    return {
        "what": f"celery publish-to-start latency on OrbitMQ, base checkout {base} vs this one, alternated rounds, "
        f"one broker and one 'celery worker {' '.join(WORKER_ARGS)}' per round, {count} sequential tasks "
        f"{LATENCY_GAP_S * 1000:.0f} ms apart",
        "tasks": count,
        "rounds": rounds,
        "rounds_detail": detail,
        "summary": summary,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--ab", type=Path, metavar="BASE", help="drain A/B against the checkout at BASE (OrbitMQ only)")
    parser.add_argument("--ab-tasks", type=int, default=6000)
    parser.add_argument("--ab-rounds", type=int, default=3)
    parser.add_argument("--ab-pool", choices=sorted(POOLS), default="prefork", help="the drain A/B's worker pool")
    parser.add_argument(
        "--ab-latency", type=Path, metavar="BASE", help="latency A/B against the checkout at BASE (OrbitMQ only)"
    )
    parser.add_argument("--ab-latency-tasks", type=int, default=LATENCY_N_FULL)
    parser.add_argument("brokers", nargs="*", default=list(BROKERS))
    args = parser.parse_args(argv)
    if args.ab_latency is not None:
        name, result = "celery-ab-latency", ab_latency(args.ab_latency.resolve(), args.ab_latency_tasks, args.ab_rounds)
    elif args.ab is not None:
        name, result = "celery-ab", ab(args.ab.resolve(), args.ab_tasks, args.ab_rounds, args.ab_pool)
    else:
        name, result = "celery", run(args.quick, args.brokers)
    path = write_result(name, result)
    print(json.dumps(result["summary"], indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
