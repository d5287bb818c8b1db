"""oms SDK benchmark: batched produce and queue-level pull through ``oms`` against raw ``Produce/SendBatch`` and
``Consume/PullBatch`` (prebuilt requests, the frame transport oms uses) in the same run, rounds interleaved.

``python -m benchmarks.run_all oms`` (or ``python -m benchmarks.bench_oms [--quick]``); starts its own broker.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import oms
from benchmarks.bench_e2e import BODY_SIZE, Broker, bench_batched_produce, bench_pull_batch, bench_send_batch
from benchmarks.common import pct, write_result

BATCH = 1024
THREADS = 4
BODY = b"x" * BODY_SIZE


def _url(addr: str) -> str:
    return f"oms:rocketmq://{addr}/"


def bench_oms_send_batch(
    ap: oms.MessagingAccessPoint, topic: str, total: int, threads: int, columns: bool = False
) -> dict[str, Any]:
    """``send_batch`` of ``BATCH`` prebuilt 100-byte messages from ``threads`` threads (one batch in flight each);
    ``columns``: ``send_columns`` of the same bodies (no message objects)."""
    rounds = total // BATCH
    # send_columns takes bodies, no message objects: building them anyway would leave 200k live objects for the
    # garbage collector to walk during the columns round
    batches = [] if columns else [[oms.BytesMessage(BODY, topic) for _ in range(BATCH)] for _ in range(rounds)]
    bodies = [BODY] * BATCH
    with ap.create_producer(operation_timeout=30_000) as producer:
        producer.send_batch([oms.BytesMessage(BODY, topic) for _ in range(BATCH)])  # warm-up: route, channel

        def send(k: int) -> int:
            if columns:
                return len(producer.send_columns(topic, bodies))
            return len(producer.send_batch(batches[k]))

        lock = threading.Lock()
        nxt = [0]

        def worker() -> int:
            sent = 0
            while True:
                with lock:
                    k = nxt[0]
                    nxt[0] += 1
                if k >= rounds:
                    return sent
                sent += send(k)

        t0, cpu0 = time.perf_counter(), time.process_time()
        with ThreadPoolExecutor(threads) as pool:
            sent = sum(pool.map(lambda _: worker(), range(threads)))
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    return {
        "call": "send_columns" if columns else "send_batch",
        "messages": sent,
        "batch": BATCH,
        "threads": threads,
        "msgs_per_s": round(sent / elapsed),
        "mb_per_s": round(sent * BODY_SIZE / elapsed / 1e6, 1),
        "client_cpu_us_per_msg": round(cpu / sent * 1e6, 2),
    }


def _with_cpu(bench: Any) -> dict[str, Any]:
    """Run a raw benchmark coroutine, adding the client's CPU per message (all threads of this process)."""
    cpu0 = time.process_time()
    result: dict[str, Any] = asyncio.run(bench)
    result["client_cpu_us_per_msg"] = round((time.process_time() - cpu0) / result["messages"] * 1e6, 2)
    return result


def bench_oms_send_async(ap: oms.MessagingAccessPoint, topic: str, n: int, in_flight: int) -> dict[str, Any]:
    """Single-message ``send_async`` with up to ``in_flight`` sends outstanding (for reference: not batched)."""
    with ap.create_producer(operation_timeout=30_000) as producer:
        producer.send(oms.BytesMessage(BODY, topic))
        window = threading.BoundedSemaphore(in_flight)
        futures = []
        t0 = time.perf_counter()
        for _ in range(n):
            window.acquire()
            future = producer.send_async(oms.BytesMessage(BODY, topic))
            future.add_listener(lambda _f: window.release())
            futures.append(future)
        for future in futures:
            future.get(60)
        elapsed = time.perf_counter() - t0
    return {"messages": n, "in_flight": in_flight, "msgs_per_s": round(n / elapsed)}


def bench_oms_send_aio(ap: oms.MessagingAccessPoint, topic: str, n: int, in_flight: int) -> dict[str, Any]:
    """``await producer.aio().send(...)`` from ``in_flight`` tasks of one asyncio loop, ``n`` sends in all."""
    with ap.create_producer(operation_timeout=30_000) as producer:
        producer.send(oms.BytesMessage(BODY, topic))
        aio = producer.aio()

        async def sender(count: int) -> None:
            for _ in range(count):
                await aio.send(oms.BytesMessage(BODY, topic))

        async def all_senders() -> float:
            t0 = time.perf_counter()
            await asyncio.gather(*(sender(n // in_flight) for _ in range(in_flight)))
            return time.perf_counter() - t0

        elapsed = asyncio.run(all_senders())
    sent = n // in_flight * in_flight
    return {"messages": sent, "in_flight": in_flight, "msgs_per_s": round(sent / elapsed)}


def bench_oms_pull(ap: oms.MessagingAccessPoint, topic: str, batch: int) -> dict[str, Any]:
    """Drain every queue with the pull consumer's queue-level ``pull()`` (one thread per queue)."""
    with ap.create_pull_consumer(consumer_id="bench-oms-pull", operation_timeout=30_000) as pc:
        queues = pc.queues(topic)

        def drain(queue: oms.MessageQueue) -> tuple[int, int]:
            offset, count, body_bytes = 0, 0, 0
            while True:
                result = pc.pull(queue, offset, batch)
                if not result.messages:
                    return count, body_bytes
                count += len(result.messages)
                body_bytes += sum(len(m.body) for m in result.messages)
                offset = result.next_offset

        t0 = time.perf_counter()
        with ThreadPoolExecutor(len(queues)) as pool:
            counts = list(pool.map(drain, queues))
        elapsed = time.perf_counter() - t0
    total = sum(c for c, _ in counts)
    return {"messages": total, "batch": batch, "queues": len(queues), "msgs_per_s": round(total / elapsed)}


def bench_oms_pull_aio(ap: oms.MessagingAccessPoint, topic: str, batch: int) -> dict[str, Any]:
    """The same drain through ``consumer.aio().pull()``, every queue in one asyncio loop (as the raw client)."""
    with ap.create_pull_consumer(consumer_id="bench-oms-pull-aio", operation_timeout=30_000) as pc:
        queues = pc.queues(topic)
        aio = pc.aio()

        async def drain(queue: oms.MessageQueue) -> int:
            offset, count = 0, 0
            while True:
                result = await aio.pull(queue, offset, batch)
                if not result.messages:
                    return count
                count += len(result.messages)
                offset = result.next_offset

        async def drain_all() -> list[int]:
            return list(await asyncio.gather(*(drain(q) for q in queues)))

        t0 = time.perf_counter()
        total = sum(asyncio.run(drain_all()))
        elapsed = time.perf_counter() - t0
    return {"messages": total, "batch": batch, "queues": len(queues), "msgs_per_s": round(total / elapsed)}


def bench_oms_sync_send(ap: oms.MessagingAccessPoint, topic: str, n: int) -> dict[str, Any]:
    with ap.create_producer(operation_timeout=10_000) as producer:
        producer.send(oms.BytesMessage(BODY, topic))  # warm-up
        lat = []
        t0 = time.perf_counter()
        for _ in range(n):
            s = time.perf_counter()
            producer.send(oms.BytesMessage(BODY, topic))
            lat.append((time.perf_counter() - s) * 1000)
        elapsed = time.perf_counter() - t0
    return {
        "messages": n,
        "msgs_per_s": round(n / elapsed),
        "latency_ms_p50": round(pct(lat, 50), 3),
        "latency_ms_p99": round(pct(lat, 99), 3),
    }


def bench_oms_push(ap: oms.MessagingAccessPoint, topic: str, n: int, batch_size: int = 1) -> dict[str, Any]:
    """A clustering push consumer (new group, from the first message) consuming ``n`` stored messages."""
    done = threading.Event()
    lock = threading.Lock()
    stamps: list[float] = []

    def on_message(message: Any, context: oms.ConsumeContext) -> object:
        count = len(message) if isinstance(message, list) else 1
        with lock:
            stamps.extend([time.perf_counter()] * count)
            if len(stamps) >= n:
                done.set()
        return oms.ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    group = f"bench-oms-push-{batch_size}"
    t0 = time.perf_counter()
    with ap.create_push_consumer(
        consumer_id=group, consume_from_where="first", consume_message_batch_max_size=batch_size
    ) as consumer:
        consumer.attach_queue(topic, on_message, batch=batch_size > 1)
        finished = done.wait(max(60.0, n / 200))
        total_elapsed = time.perf_counter() - t0
    with lock:
        got = len(stamps)
        first, last = (stamps[0], stamps[-1]) if stamps else (t0, t0)
    steady = max(last - first, 1e-9)
    return {
        "messages": got,
        "expected": n,
        "completed": finished,
        "listener_batch": batch_size,
        "msgs_per_s": round(got / steady),
        "msgs_per_s_incl_startup": round(got / total_elapsed),
    }


def _best(runs: list[dict[str, Any]]) -> dict[str, Any]:
    best = max(runs, key=lambda r: r["msgs_per_s"])
    return {**best, "runs_msgs_per_s": [r["msgs_per_s"] for r in runs]}


def run(quick: bool = False) -> dict[str, Any]:
    n_batched = 20_480 if quick else 204_800
    n_sync = 300 if quick else 2000
    n_push = 3000 if quick else 20_000
    rounds = 1 if quick else 3
    runs: dict[str, list[dict[str, Any]]] = {
        k: [] for k in ("raw_v2", "raw_send_batch", "oms_send_batch", "oms_send_columns", "raw_pull", "oms_pull")
    }
    oms_pull_aio = []
    with tempfile.TemporaryDirectory(prefix="bench-oms-") as tmp:
        broker = Broker(Path(tmp) / "store")
        try:
            with oms.get_messaging_access_point(_url(broker.addr)) as ap:
                for r in range(rounds):  # interleaved, so drift on shared cores hits both sides alike
                    raw_topic, oms_topic = f"BenchRawT{r}", f"BenchOmsT{r}"
                    # the baseline: Produce/SendBatch with prebuilt requests over the transport oms uses (frames)
                    runs["raw_send_batch"].append(
                        _with_cpu(bench_send_batch(broker.addr, f"BenchRawSB{r}", n_batched, BATCH, 4, "frames"))
                    )
                    runs["oms_send_batch"].append(bench_oms_send_batch(ap, oms_topic, n_batched, THREADS))
                    runs["oms_send_columns"].append(
                        bench_oms_send_batch(ap, f"BenchOmsColT{r}", n_batched, THREADS, columns=True)
                    )
                    runs["raw_v2"].append(
                        asyncio.run(bench_batched_produce(broker.addr, raw_topic, n_batched, BATCH, 4))
                    )
                    # both consumers read the same stored messages
                    runs["raw_pull"].append(asyncio.run(bench_pull_batch(broker.addr, oms_topic, BATCH, "frames")))
                    runs["oms_pull"].append(bench_oms_pull(ap, oms_topic, BATCH))
                    oms_pull_aio.append(bench_oms_pull_aio(ap, oms_topic, BATCH))
                sync = bench_oms_sync_send(ap, "BenchOmsSyncT", n_sync)
                send_async = bench_oms_send_async(ap, "BenchOmsAsyncT", n_sync * 5, 1000)
                send_aio = bench_oms_send_aio(ap, "BenchOmsAioT", n_sync * 5, 1000)
                push_topic = "BenchOmsPushT"
                with ap.create_producer(operation_timeout=30_000) as producer:
                    for k in range(0, n_push, BATCH):
                        producer.send_batch([oms.BytesMessage(BODY, push_topic) for _ in range(min(BATCH, n_push - k))])
                push = bench_oms_push(ap, push_topic, n_push)
                push32 = bench_oms_push(ap, push_topic, n_push, batch_size=32)
        finally:
            broker.stop()
    best = {k: _best(v) for k, v in runs.items()}
    best["oms_pull_aio"] = _best(oms_pull_aio)
    rate = {k: v["msgs_per_s"] for k, v in best.items()}
    # per round, then the median: both sides of a ratio were measured minutes apart at most
    produce_ratios = [
        o["msgs_per_s"] / r["msgs_per_s"] for o, r in zip(runs["oms_send_batch"], runs["raw_send_batch"], strict=True)
    ]
    columns_ratios = [
        o["msgs_per_s"] / r["msgs_per_s"] for o, r in zip(runs["oms_send_columns"], runs["raw_send_batch"], strict=True)
    ]
    pull_ratios = [o["msgs_per_s"] / r["msgs_per_s"] for o, r in zip(runs["oms_pull"], runs["raw_pull"], strict=True)]
    produce_ratio = statistics.median(produce_ratios)
    pull_ratio = statistics.median(pull_ratios)
    summary = {
        "raw_send_batch_msgs_per_s": rate["raw_send_batch"],
        "oms_send_batch_msgs_per_s": rate["oms_send_batch"],
        "produce_ratio_oms_over_raw_send_batch": round(produce_ratio, 3),
        "produce_ratios_per_round": [round(x, 3) for x in produce_ratios],
        "oms_send_columns_msgs_per_s": rate["oms_send_columns"],
        "columns_ratio_oms_over_raw_send_batch": round(statistics.median(columns_ratios), 3),
        # CPU per message of the client process (load on the machine moves rates, much less this)
        "client_cpu_us_per_msg": {
            k: statistics.median(r["client_cpu_us_per_msg"] for r in runs[k])
            for k in ("raw_send_batch", "oms_send_batch", "oms_send_columns")
        },
        "raw_v2_batched_produce_msgs_per_s": rate["raw_v2"],
        "oms_send_batch_over_raw_v2": round(rate["oms_send_batch"] / rate["raw_v2"], 3),
        "raw_pull_batch_msgs_per_s": rate["raw_pull"],
        "oms_pull_msgs_per_s": rate["oms_pull"],
        "pull_ratio_oms_over_raw": round(pull_ratio, 3),
        "oms_pull_aio_msgs_per_s": rate["oms_pull_aio"],
        "pull_aio_ratio_oms_over_raw": round(rate["oms_pull_aio"] / rate["raw_pull"], 3),
        "oms_sync_send_msgs_per_s": sync["msgs_per_s"],
        "oms_send_async_msgs_per_s": send_async["msgs_per_s"],
        "oms_send_aio_msgs_per_s": send_aio["msgs_per_s"],
        "oms_push_clustering_msgs_per_s": push["msgs_per_s"],
        "oms_push_clustering_batch32_msgs_per_s": push32["msgs_per_s"],
        # issue 22: oms batched produce >= 0.9x raw SendBatch, oms pull >= 0.7x raw PullBatch, same run
        "target_produce_ratio": 0.9,
        "target_pull_ratio": 0.7,
        "produce_meets_target": produce_ratio >= 0.9,
        "pull_meets_target": pull_ratio >= 0.7,
        "body_bytes": BODY_SIZE,
        "rounds": rounds,
    }
    return {
        "summary": summary,
        "produce": {k: best[k] for k in ("raw_send_batch", "oms_send_batch", "oms_send_columns", "raw_v2")},
        "pull": {
            "raw_pull_batch": best["raw_pull"],
            "oms_pull": best["oms_pull"],
            "oms_pull_aio": best["oms_pull_aio"],
        },
        "sync_send": sync,
        "send_async": send_async,
        "send_aio": send_aio,
        "push": push,
        "push32": push32,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    result = run(quick=args.quick)
    path = write_result("oms", result)
    print(json.dumps(result["summary"], indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
