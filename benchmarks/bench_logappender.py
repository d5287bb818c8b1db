"""Log appender benchmark: what ``logger.info`` costs the application thread with ``RocketMQHandler`` against
``FileHandler`` and ``NullHandler`` (same run), sustained records/s to the broker with the sender thread's CPU
share, and log call to stored latency (p50/p99).

``python -m benchmarks.run_all logappender`` (or ``python -m benchmarks.bench_logappender [--quick]``); starts its
own broker.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import oms
from benchmarks.bench_e2e import Broker
from benchmarks.common import median, pct, write_result
from plugins.logappender import AppenderConfig, RocketMQHandler, iter_records


def _logger(name: str, handler: logging.Handler) -> logging.Logger:
    logger = logging.getLogger(f"bench.logappender.{name}")
    logger.handlers.clear()
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    return logger


def _per_call_us(logger: logging.Logger, n: int) -> tuple[float, float]:
    """(wall, CPU of this thread) per call in µs: the CPU figure is the application thread's own work; wall also
    holds waits for the GIL (the sender thread) and for a core (the machine is shared)."""
    info = logger.info
    t0, c0 = time.perf_counter(), time.thread_time()
    for i in range(n):
        info("request %s done", i)
    return (time.perf_counter() - t0) / n * 1e6, (time.thread_time() - c0) / n * 1e6


def bench_call_cost(addr: str, tmp: Path, n: int, rounds: int) -> dict[str, Any]:
    """Per-call cost on the application thread; the three handlers interleaved per round (shared-core drift)."""
    file_handler = logging.FileHandler(tmp / "app.log")
    rmq = RocketMQHandler("BenchLogCost", namesrv_addr=addr, queue_size=4 * n, send_timeout=30)
    loggers = {
        "null": _logger("null", logging.NullHandler()),
        "file": _logger("file", file_handler),
        "rocketmq": _logger("rocketmq", rmq),
    }
    runs: dict[str, list[float]] = {k: [] for k in loggers}
    cpu: dict[str, list[float]] = {k: [] for k in loggers}
    process_cpu: dict[str, list[float]] = {k: [] for k in loggers}
    collections: dict[str, list[int]] = {k: [0, 0, 0] for k in loggers}  # the cyclic GC's runs per generation
    run_delay: dict[str, list[float]] = {k: [] for k in loggers}  # the logging thread runnable, waiting for a core
    for logger in loggers.values():
        _per_call_us(logger, 1000)  # warm-up (the sender connects)
    rmq.flush(30)
    # the appender's other threads in this process: its sender and the client's loop (read around each round,
    # outside the timed loop): how much of their work for a round's records fell inside the timed loop
    sender = rmq.shipper._thread
    client = [t for t in threading.enumerate() if t.name.startswith("oms-")]
    others: dict[str, list[list[float]]] = {"sender": [[], []], "client": [[], []]}  # [in the loop, after it]
    for _ in range(rounds):
        for name, logger in loggers.items():
            p0 = time.process_time()
            gc0 = [g["collections"] for g in gc.get_stats()]
            d0, s0, c0 = _run_delay_s(), _thread_cpu(sender), _threads_cpu(client)
            wall_us, cpu_us = _per_call_us(logger, n)
            d1, s1, c1 = _run_delay_s(), _thread_cpu(sender), _threads_cpu(client)
            if name == "rocketmq":
                rmq.flush(60)  # each round ends with an idle sender: its work for the round's records is counted
                s2, c2 = _thread_cpu(sender), _threads_cpu(client)
                for part, (a, b, c) in (("sender", (s0, s1, s2)), ("client", (c0, c1, c2))):
                    others[part][0].append(round((b - a) / n * 1e6, 3))
                    others[part][1].append(round((c - b) / n * 1e6, 3))
            process_cpu[name].append((time.process_time() - p0) / n * 1e6)
            for gen, stats in enumerate(gc.get_stats()):
                collections[name][gen] += stats["collections"] - gc0[gen]
            runs[name].append(wall_us)
            cpu[name].append(cpu_us)
            run_delay[name].append(round((d1 - d0) / n * 1e6, 3))
    counters = rmq.counters()
    rmq.close(30)
    file_handler.close()
    med = {k: round(median(v), 3) for k, v in runs.items()}
    med_cpu = {k: round(median(v), 3) for k, v in cpu.items()}
    med_proc = {k: round(median(v), 3) for k, v in process_cpu.items()}
    return {
        "calls_per_round": n,
        "rounds": rounds,
        "us_per_call_median": med,
        "us_per_call_runs": {k: [round(x, 3) for x in v] for k, v in runs.items()},
        "thread_cpu_us_per_call_median": med_cpu,
        "thread_cpu_us_per_call_runs": {k: [round(x, 3) for x in v] for k, v in cpu.items()},
        "rocketmq_over_null_us": round(med["rocketmq"] - med["null"], 3),
        "rocketmq_over_file_ratio": round(med["rocketmq"] / med["file"], 3),
        "rocketmq_over_null_cpu_us": round(med_cpu["rocketmq"] - med_cpu["null"], 3),
        "rocketmq_over_file_cpu_ratio": round(med_cpu["rocketmq"] / med_cpu["file"], 3),
        # every thread of this process (the sender and the client's loop too) until the round's records are
        # stored: under one GIL the logging thread's wall time cannot go below this for long
        "process_cpu_us_per_call_median": med_proc,
        "process_cpu_us_per_call_runs": {k: [round(x, 3) for x in v] for k, v in process_cpu.items()},
        "rocketmq_over_file_process_cpu_ratio": round(med_proc["rocketmq"] / med_proc["file"], 3),
        # garbage collections (generations 0, 1, 2) during all rounds of each handler, every thread
        "gc_collections": collections,
        "rocketmq_records_sent": counters.sent,
        "rocketmq_dropped": counters.dropped_overflow + counters.dropped_error,
        # µs per call the logging thread was runnable but waited for a core (/proc schedstat), per round
        "run_delay_us_per_call_runs": run_delay,
        # the sender's and the client loop's CPU per record, inside each round's timed loop and in the flush after
        "sender_cpu_us_per_call_in_loop_runs": others["sender"][0],
        "sender_cpu_us_per_call_after_loop_runs": others["sender"][1],
        "client_cpu_us_per_call_in_loop_runs": others["client"][0],
        "client_cpu_us_per_call_after_loop_runs": others["client"][1],
        "rounds_by_state": _round_states(runs, others["sender"]),
    }


STEADY_SHARE = 0.75  # a round is steady when the sender did at least this share of its work inside the timed loop


def _round_states(runs: dict[str, list[float]], sender: list[list[float]]) -> dict[str, Any]:
    """Each round's goals (µs over NullHandler ≤ 3, below FileHandler; the handlers alternate within a round, so a
    round compares like with like) and its state: steady (the sender kept pace inside the timed loop) or quiet (it
    fell behind and finished in the flush)."""
    in_loop, after = sender
    rounds = []
    for i, (rmq, null, file) in enumerate(zip(runs["rocketmq"], runs["null"], runs["file"], strict=True)):
        share = in_loop[i] / (in_loop[i] + after[i]) if in_loop[i] + after[i] else 0.0
        rounds.append(
            {
                "state": "steady" if share >= STEADY_SHARE else "quiet",
                "sender_share_in_loop": round(share, 3),
                "over_null_us": round(rmq - null, 3),
                "over_file_ratio": round(rmq / file, 3),
                "le_3us_over_null": rmq - null <= 3.0,
                "below_file": rmq < file,
            }
        )
    counts: dict[str, Any] = {"rounds": rounds}
    for state in ("steady", "quiet", "all"):
        chosen = [r for r in rounds if state in ("all", r["state"])]
        counts[state] = {
            "rounds": len(chosen),
            "le_3us_over_null": sum(r["le_3us_over_null"] for r in chosen),
            "below_file": sum(r["below_file"] for r in chosen),
            "both": sum(r["le_3us_over_null"] and r["below_file"] for r in chosen),
        }
    return counts


def _run_delay_s() -> float:
    """This thread's time runnable but not running (waiting for a core), in seconds."""
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


def _threads_cpu(threads: list[threading.Thread]) -> float:
    return sum(_thread_cpu(t) for t in threads if t.is_alive())


def _thread_cpu(thread: threading.Thread | None) -> float:
    if thread is None or thread.ident is None:
        return 0.0
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))


def bench_throughput(addr: str, n: int, records_per_message: int) -> dict[str, Any]:
    """``n`` records logged as fast as one thread can; records/s = n / (first call .. broker acked the last)."""
    handler = RocketMQHandler(
        f"BenchLogRate{records_per_message}",
        namesrv_addr=addr,
        queue_size=n,
        send_timeout=30,
        records_per_message=records_per_message,
    )
    logger = _logger(f"rate{records_per_message}", handler)
    logger.info("warm-up")
    handler.flush(30)
    sender = handler.shipper._thread
    cpu0, proc0 = _thread_cpu(sender), time.process_time()
    t0 = time.perf_counter()
    info = logger.info
    for i in range(n):
        info("request %s done", i)
    t_logged = time.perf_counter()
    flushed = handler.flush(120)
    elapsed = time.perf_counter() - t0
    sender_cpu, proc_cpu = _thread_cpu(sender) - cpu0, time.process_time() - proc0
    c = handler.counters()
    handler.close(30)
    return {
        "records": n,
        "records_per_message": records_per_message,
        "flushed": flushed,
        "sent": c.sent - 1,
        "dropped": c.dropped_overflow + c.dropped_error,
        "records_per_s": round((c.sent - 1) / elapsed),
        "logging_thread_records_per_s": round(n / (t_logged - t0)),
        "elapsed_s": round(elapsed, 3),
        "sender_cpu_s": round(sender_cpu, 3),
        "sender_cpu_us_per_record": round(sender_cpu / max(1, c.sent - 1) * 1e6, 2),
        "sender_cpu_share_of_wall": round(sender_cpu / elapsed, 3),
        "sender_cpu_share_of_process_cpu": round(sender_cpu / proc_cpu, 3) if proc_cpu else None,
        "process_cpu_share_of_wall": round(proc_cpu / elapsed, 3),
    }


def bench_ceiling(addr: str, n: int) -> dict[str, Any]:
    """What bounds records/s from one process, each part alone: the logging loop with a ``NullHandler`` (no
    shipping at all), and the sender fed ``n`` records made beforehand (encode, pack, send, no logging thread
    competing for the GIL)."""
    null = _logger("ceiling.null", logging.NullHandler())
    info = null.info
    t0 = time.perf_counter()
    for i in range(n):
        info("request %s done", i)
    null_rate = n / (time.perf_counter() - t0)
    handler = RocketMQHandler("BenchLogCeiling", namesrv_addr=addr, queue_size=n, send_timeout=30)
    logger = _logger("ceiling.sender", handler)
    logger.info("warm-up")
    handler.flush(30)
    # the records as the handler would queue them (what emit queues: queue_item), made before the clock starts
    records = [
        handler.queue_item(logger.makeRecord(logger.name, logging.INFO, __file__, 1, "request %s done", (i,), None))
        for i in range(n)
    ]
    shipper = handler.shipper
    sender = shipper._thread
    cpu0 = _thread_cpu(sender)
    t0 = time.perf_counter()
    shipper._queue.extend(records)  # what n offers would leave, in one step: the sender alone is measured
    shipper._wake.set()
    flushed = handler.flush(120)
    elapsed = time.perf_counter() - t0
    sender_cpu = _thread_cpu(sender) - cpu0
    sent = handler.counters().sent - 1
    handler.close(30)
    return {
        "records": n,
        "null_handler_loop_records_per_s": round(null_rate),
        "sender_alone_records_per_s": round(sent / elapsed),
        "sender_alone_flushed": flushed,
        "sender_alone_cpu_us_per_record": round(sender_cpu / max(1, sent) * 1e6, 2),
    }


def bench_latency(addr: str, rate: int, seconds: float) -> dict[str, Any]:
    """Records at ``rate``/s carry their call time; the broker's store timestamp (ms) closes the interval."""
    topic = "BenchLogLatency"
    handler = RocketMQHandler(topic, namesrv_addr=addr, send_timeout=30)
    logger = _logger("latency", handler)
    logger.info("warm-up", extra={"t_ns": time.time_ns()})
    handler.flush(30)
    total = int(rate * seconds)
    t0 = time.perf_counter()
    for i in range(total):
        target = t0 + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        logger.info("paced %s", i, extra={"t_ns": time.time_ns()})
    handler.flush(60)
    handler.close(30)
    lat: list[float] = []
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{addr}/") as ap,
        ap.create_pull_consumer(consumer_id="bench-logappender-latency") as consumer,
    ):
        for queue in consumer.queues(topic):
            offset = 0
            while True:
                result = consumer.pull(queue, offset, 512)
                if not result.messages:
                    break
                for m in result.messages:
                    stored_ms = m.store_timestamp or 0
                    for rec in iter_records(m.get_body(), m.user_headers().get("records")):
                        if rec.get("message", "").startswith("paced"):
                            lat.append(stored_ms - rec["t_ns"] / 1e6)
                offset = result.next_offset
    return {
        "rate": rate,
        "records": len(lat),
        "expected": total,
        "latency_ms_p50": round(pct(lat, 50), 2),
        "latency_ms_p99": round(pct(lat, 99), 2),
        "note": "store timestamps have millisecond resolution; linger is 10 ms by default",
    }


def run(quick: bool = False) -> dict[str, Any]:
    n_cost = 20_000 if quick else 100_000
    rounds = 3 if quick else 5
    n_rate = 50_000 if quick else 300_000
    with tempfile.TemporaryDirectory(prefix="bench-logappender-") as tmp:
        broker = Broker(Path(tmp) / "store")
        try:
            cost = bench_call_cost(broker.addr, Path(tmp), n_cost, rounds)
            default_rpm = AppenderConfig.build("BenchLogRate", namesrv_addr=broker.addr).records_per_message
            packed = bench_throughput(broker.addr, n_rate, default_rpm)
            unpacked = bench_throughput(broker.addr, n_rate // 10, 1)
            ceiling = bench_ceiling(broker.addr, n_rate // 2)
            latency = bench_latency(broker.addr, 2000 if not quick else 1000, 5.0 if not quick else 2.0)
        finally:
            broker.stop()
    med = cost["us_per_call_median"]
    summary = {
        "us_per_call_null": med["null"],
        "us_per_call_file": med["file"],
        "us_per_call_rocketmq": med["rocketmq"],
        "rocketmq_over_null_us": cost["rocketmq_over_null_us"],
        "rocketmq_over_file_ratio": cost["rocketmq_over_file_ratio"],
        "target_below_file": med["rocketmq"] < med["file"],
        "target_over_null_le_3us": cost["rocketmq_over_null_us"] <= 3.0,
        "thread_cpu_us_per_call": cost["thread_cpu_us_per_call_median"],
        "rocketmq_over_null_cpu_us": cost["rocketmq_over_null_cpu_us"],
        "rocketmq_over_file_cpu_ratio": cost["rocketmq_over_file_cpu_ratio"],
        "process_cpu_us_per_call": cost["process_cpu_us_per_call_median"],
        "rocketmq_over_file_process_cpu_ratio": cost["rocketmq_over_file_process_cpu_ratio"],
        "sender_cpu_us_per_record_packed": packed["sender_cpu_us_per_record"],
        "records_per_s_packed": packed["records_per_s"],
        "records_per_s_one_per_message": unpacked["records_per_s"],
        "sender_cpu_share_of_wall_packed": packed["sender_cpu_share_of_wall"],
        "target_100k_records_per_s": packed["records_per_s"] >= 100_000,
        "ceiling_null_handler_loop_records_per_s": ceiling["null_handler_loop_records_per_s"],
        "ceiling_sender_alone_records_per_s": ceiling["sender_alone_records_per_s"],
        "ceiling_sender_alone_cpu_us_per_record": ceiling["sender_alone_cpu_us_per_record"],
        "call_cost_rounds_by_state": {k: v for k, v in cost["rounds_by_state"].items() if k != "rounds"},
        "log_to_stored_ms_p50": latency["latency_ms_p50"],
        "log_to_stored_ms_p99": latency["latency_ms_p99"],
    }
    return {
        "summary": summary,
        "call_cost": cost,
        "throughput": packed,
        "throughput_unpacked": unpacked,
        "ceiling": ceiling,
        "latency": latency,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    result = run(quick=args.quick)
    path = write_result("logappender", result)
    print(json.dumps(result["summary"], indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
