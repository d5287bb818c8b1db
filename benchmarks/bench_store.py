"""Store benchmark: append, read (hot tail vs cold backlog), index query, recovery, and raw disk bandwidth.

Everything runs in this process against a real DefaultMessageStore in a temporary directory on the project disk.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.common import median, pct
from broker.store.config import FlushDiskType, MessageStoreConfig
from broker.store.message import MessageExtBrokerInner, inner_batch_message
from broker.store.message_store import DefaultMessageStore
from orbitmq.message_batch import BatchEntry, encode_message_batch

MIB = 1 << 20


def _store(root: Path, flush: FlushDiskType, **kw: Any) -> DefaultMessageStore:
    cfg = MessageStoreConfig(storePathRootDir=str(root), flushDiskType=flush, **kw)
    store = DefaultMessageStore(cfg, ("127.0.0.1", 8081))
    store.load()
    store.start()
    # Steady state: the first segment exists and the background-prepared next one is ready, as on a
    # broker that has been running; the one-time cost of preparing a 1 GiB segment is not in the timings.
    assert store.put_message(MessageExtBrokerInner("Warmup", b"w", 0)).ok
    store.commitlog.files.wait_spare_ready(timeout=120)
    return store


def _msgs(n: int, size: int, keys: bool = False, start: int = 0) -> list[MessageExtBrokerInner]:
    body = os.urandom(size)
    return [
        MessageExtBrokerInner("Bench", body, i % 8, {"KEYS": f"key-{i}"} if keys else {})
        for i in range(start, start + n)
    ]


def disk_write_bandwidth(directory: Path, total: int) -> dict[str, float]:
    """Sequential write of incompressible data then fdatasync: the ceiling the commitlog writes against."""
    chunk = os.urandom(MIB)
    path = directory / "dd.tmp"
    t0 = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for _ in range(total // MIB):
            os.write(fd, chunk)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    elapsed = time.perf_counter() - t0
    path.unlink()
    return {"bytes": total, "seconds": elapsed, "mib_per_s": total / MIB / elapsed}


def append_batch(root: Path, n: int, size: int, batch: int = 256) -> dict[str, float]:
    store = _store(root, FlushDiskType.ASYNC_FLUSH)
    msgs = _msgs(n, size)
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        store.put_messages_async(msgs[i : i + batch])
    elapsed = time.perf_counter() - t0
    store.shutdown()
    return {"messages": n, "seconds": elapsed, "per_s": n / elapsed}


def append_inner_batch(root: Path, n: int, size: int, batch: int = 256) -> dict[str, float]:
    """The batch API on a BatchCQ topic: ``batch`` messages per inner-batch record (one ConsumeQueue entry and queue
    offset each). The payloads are encoded before the clock starts, as a producer sends them."""
    store = _store(root, FlushDiskType.ASYNC_FLUSH)
    body = os.urandom(size)
    payload = encode_message_batch([BatchEntry(0, body, {})] * batch)
    codes = [0] * batch
    records = [inner_batch_message("Bench", (i // batch) % 8, payload, codes) for i in range(0, n, batch)]
    t0 = time.perf_counter()
    for k in range(0, len(records), 8):
        store.put_messages_async(records[k : k + 8])
    elapsed = time.perf_counter() - t0
    store.shutdown()
    return {"messages": len(records) * batch, "seconds": elapsed, "per_s": len(records) * batch / elapsed}


def append_single(root: Path, n: int, size: int) -> dict[str, float]:
    store = _store(root, FlushDiskType.ASYNC_FLUSH)
    msgs = _msgs(n, size)
    t0 = time.perf_counter()
    for m in msgs:
        store.put_message_async(m)
    elapsed = time.perf_counter() - t0
    store.shutdown()
    return {"messages": n, "seconds": elapsed, "per_s": n / elapsed}


def append_sync(root: Path, n: int, size: int, writers: int) -> dict[str, float]:
    store = _store(root, FlushDiskType.SYNC_FLUSH)
    per = n // writers
    latencies: list[list[float]] = [[] for _ in range(writers)]

    batches = [_msgs(per, size) for _ in range(writers)]  # built before the clock starts

    def writer(idx: int) -> None:
        msgs = batches[idx]
        lat = latencies[idx]
        for m in msgs:
            t = time.perf_counter()
            r = store.put_message(m)
            lat.append(time.perf_counter() - t)
            assert r.ok, r

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    store.shutdown()
    flat = [x for lat in latencies for x in lat]
    return {
        "writers": writers,
        "messages": per * writers,
        "seconds": elapsed,
        "per_s": per * writers / elapsed,
        "latency_p50_ms": pct(flat, 50) * 1000,
        "latency_p99_ms": pct(flat, 99) * 1000,
    }


def append_sync_aio(root: Path, n: int, size: int, writers: int, wrap: bool = False) -> dict[str, Any]:
    """SYNC_FLUSH writers as asyncio tasks on one loop, as the broker calls the store.

    ``wrap=False`` awaits ``put_message_aio``; ``wrap=True`` awaits ``asyncio.wrap_future(put_message_async)``.
    """
    store = _store(root, FlushDiskType.SYNC_FLUSH)
    per = n // writers
    batches = [_msgs(per, size) for _ in range(writers)]
    latencies: list[float] = []

    async def writer(msgs: list[MessageExtBrokerInner]) -> None:
        for m in msgs:
            t = time.perf_counter()
            if wrap:
                r = await asyncio.wrap_future(store.put_message_async(m))
            else:
                r = await store.put_message_aio(m)
            latencies.append(time.perf_counter() - t)
            assert r.ok, r

    async def main() -> float:
        t0 = time.perf_counter()
        await asyncio.gather(*(writer(b) for b in batches))
        return time.perf_counter() - t0

    elapsed = asyncio.run(main())
    store.shutdown()
    return {
        "writers": writers,
        "api": "put_message_async+wrap_future" if wrap else "put_message_aio",
        "messages": per * writers,
        "seconds": elapsed,
        "per_s": per * writers / elapsed,
        "latency_p50_ms": pct(latencies, 50) * 1000,
        "latency_p99_ms": pct(latencies, 99) * 1000,
    }


def read_queue(store: DefaultMessageStore, queue_id: int, start: int, count: int) -> dict[str, float]:
    t0 = time.perf_counter()
    offset, got = start, 0
    while got < count:
        r = store.get_message("bench", "Bench", queue_id, offset, 32)
        if not r.messages:
            break
        got += len(r.messages)
        offset = r.next_begin_offset
    elapsed = time.perf_counter() - t0
    return {"messages": got, "seconds": elapsed, "per_s": got / elapsed if elapsed else 0.0}


def read_raw_queue(store: DefaultMessageStore, queue_id: int, count: int) -> dict[str, float]:
    """``get_message_raw`` (the PullBatch read) of ``count`` messages of one queue, 1024 per call."""
    t0 = time.perf_counter()
    offset, got = 0, 0
    while got < count:
        r = store.get_message_raw("bench", "Bench", queue_id, offset, 1024)
        if not r.raw_count:
            break
        got += r.raw_count
        offset = r.next_begin_offset
    elapsed = time.perf_counter() - t0
    return {"messages": got, "seconds": elapsed, "per_s": got / elapsed if elapsed else 0.0}


def crc_read_check(root: Path, n: int, size: int) -> dict[str, Any]:
    """The cost of the read path's CRC check: the first read of records this process did not write (checked,
    record by record) against reading them again (the range is known good) and reading records it appended."""
    store = _store(root, FlushDiskType.ASYNC_FLUSH)
    msgs = _msgs(n, size)
    for m in msgs:
        m.queue_id = 0
    for i in range(0, n, 256):
        store.put_messages(msgs[i : i + 256])
    written = read_raw_queue(store, 0, n)  # appended by this process: known good, never checked
    store.shutdown()
    store = DefaultMessageStore(store.config, ("127.0.0.1", 8081))
    store.load()
    store.start()
    try:
        first = read_raw_queue(store, 0, n)  # every record's CRC checked once
        again = read_raw_queue(store, 0, n)
    finally:
        store.shutdown()
    return {
        "messages": n,
        "body_bytes": size,
        "appended_here_per_s": round(written["per_s"]),
        "first_read_checked_per_s": round(first["per_s"]),
        "read_again_per_s": round(again["per_s"]),
        "first_read_over_again": round(first["per_s"] / again["per_s"], 3) if again["per_s"] else None,
    }


def drop_page_cache() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def backlog_suite(root: Path, backlog: int, read_count: int, index_keys: int) -> dict[str, Any]:
    """Build a backlog, then measure: hot-tail vs cold reads, index queries, clean and crash recovery."""
    store = _store(root, FlushDiskType.ASYNC_FLUSH, maxIndexNum=max(4 * index_keys, 1000))
    t0 = time.perf_counter()
    batch = 1000
    for i in range(0, backlog, batch):
        store.put_messages_async(_msgs(batch, 100, keys=i < index_keys, start=i))
    build_s = time.perf_counter() - t0
    while store.dispatch_behind_bytes() > 0:
        time.sleep(0.05)
    per_queue = backlog // 8
    # hot tail: the newest messages, still in the page cache
    hot = [read_queue(store, q, per_queue - read_count // 8, read_count // 8) for q in range(2)]
    # index queries, keys chosen at random among the indexed ones
    rng = random.Random(1)
    now = int(time.time() * 1000)
    lat: list[float] = []
    for _ in range(2000):
        i = rng.randrange(index_keys)
        t = time.perf_counter()
        found = store.query_message("Bench", f"key-{i}", 32, now - 3_600_000, now + 60_000)
        lat.append(time.perf_counter() - t)
        assert found and found[0].keys == [f"key-{i}"]
    store.shutdown()
    # clean restart
    t = time.perf_counter()
    again = DefaultMessageStore(store.config, ("127.0.0.1", 8081))
    again.load()
    clean_s = time.perf_counter() - t
    again.start()
    # cold backlog: the oldest messages, page cache dropped when allowed
    dropped = drop_page_cache()
    cold = [read_queue(again, q, 0, read_count // 8) for q in range(2)]
    # crash: stop the threads without a final checkpoint, leave the abort file
    again.put_messages_async(_msgs(1000, 100))
    again.halt()
    again.commitlog.flush()
    t = time.perf_counter()
    crashed = DefaultMessageStore(store.config, ("127.0.0.1", 8081))
    crashed.load()
    crash_s = time.perf_counter() - t
    recovered = crashed.stats.recovered_records
    crashed.shutdown()
    hot_rate = median([h["per_s"] for h in hot])
    cold_rate = median([c["per_s"] for c in cold])
    return {
        "backlog_messages": backlog,
        "backlog_build_seconds": build_s,
        "commitlog_bytes": sum(p.stat().st_size for p in (root / "commitlog").iterdir()),
        "read_hot_tail": hot,
        "read_cold_backlog": cold,
        "page_cache_dropped": dropped,
        "read_cold_over_hot": cold_rate / hot_rate if hot_rate else None,
        "index_keys": index_keys,
        "index_query_p50_ms": pct(lat, 50) * 1000,
        "index_query_p99_ms": pct(lat, 99) * 1000,
        "restart_clean_seconds": clean_s,
        "restart_crash_seconds": crash_s,
        "crash_records_rescanned": recovered,
    }


def run(quick: bool = False) -> dict[str, Any]:
    scale = 10 if quick else 1
    base = Path(os.environ.get("BENCH_DIR", Path(__file__).resolve().parent.parent / ".bench-tmp"))
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=base))
    out: dict[str, Any] = {"quick": quick}
    try:

        def fresh(name: str) -> Path:
            p = work / name
            shutil.rmtree(p, ignore_errors=True)
            return p

        out["disk_sequential_write"] = disk_write_bandwidth(work, (1024 if not quick else 128) * MIB)
        for size in (100, 1024):
            n = 1_000_000 // scale if size == 100 else 300_000 // scale
            out[f"append_batch_async_{size}B"] = [append_batch(fresh(f"b{size}-{r}"), n, size) for r in range(3)]
            out[f"append_inner_batch_async_{size}B"] = [
                append_inner_batch(fresh(f"i{size}-{r}"), n, size) for r in range(3)
            ]
            out[f"append_single_async_{size}B"] = [append_single(fresh(f"s{size}-{r}"), n // 2, size) for r in range(3)]
            out[f"append_sync_1_writer_{size}B"] = append_sync(fresh(f"y1-{size}"), 3000 // max(1, scale // 5), size, 1)
            out[f"append_sync_64_writers_{size}B"] = append_sync(fresh(f"y64-{size}"), 64_000 // scale, size, 64)
            out[f"append_sync_aio_1_writer_{size}B"] = append_sync_aio(
                fresh(f"a1-{size}"), 3000 // max(1, scale // 5), size, 1
            )
            out[f"append_sync_aio_64_writers_{size}B"] = append_sync_aio(
                fresh(f"a64-{size}"), 128_000 // scale, size, 64
            )
            out[f"append_sync_wrapped_64_writers_{size}B"] = append_sync_aio(
                fresh(f"w64-{size}"), 64_000 // scale, size, 64, wrap=True
            )
        out["crc_read_check_100B"] = [crc_read_check(fresh(f"crc-{r}"), 200_000 // scale, 100) for r in range(3)]
        backlog = int(os.environ.get("BENCH_BACKLOG", 1_000_000 if quick else 10_000_000))
        out["backlog"] = backlog_suite(fresh("backlog"), backlog, 200_000 // scale, min(1_000_000, backlog))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    b = out["backlog"]
    out["summary"] = {
        "disk_write_mib_s": round(out["disk_sequential_write"]["mib_per_s"]),
        "append_batch_async_100B_per_s": round(median([r["per_s"] for r in out["append_batch_async_100B"]])),
        "append_batch_async_1KiB_per_s": round(median([r["per_s"] for r in out["append_batch_async_1024B"]])),
        "append_inner_batch_async_100B_per_s": round(
            median([r["per_s"] for r in out["append_inner_batch_async_100B"]])
        ),
        "append_inner_batch_async_1KiB_per_s": round(
            median([r["per_s"] for r in out["append_inner_batch_async_1024B"]])
        ),
        "append_single_async_100B_per_s": round(median([r["per_s"] for r in out["append_single_async_100B"]])),
        "append_sync_1_writer_100B_per_s": round(out["append_sync_1_writer_100B"]["per_s"]),
        "append_sync_64_writers_100B_per_s": round(out["append_sync_64_writers_100B"]["per_s"]),
        "append_sync_aio_1_writer_100B_per_s": round(out["append_sync_aio_1_writer_100B"]["per_s"]),
        "append_sync_aio_64_writers_100B_per_s": round(out["append_sync_aio_64_writers_100B"]["per_s"]),
        "append_sync_wrapped_64_writers_100B_per_s": round(out["append_sync_wrapped_64_writers_100B"]["per_s"]),
        "append_sync_aio_64_writers_1KiB_per_s": round(out["append_sync_aio_64_writers_1024B"]["per_s"]),
        "read_hot_per_s": round(median([h["per_s"] for h in b["read_hot_tail"]])),
        "read_cold_per_s": round(median([c["per_s"] for c in b["read_cold_backlog"]])),
        "read_cold_over_hot": b["read_cold_over_hot"],
        "crc_first_read_over_again": median([c["first_read_over_again"] for c in out["crc_read_check_100B"]]),
        "index_query_p50_ms": b["index_query_p50_ms"],
        "index_query_p99_ms": b["index_query_p99_ms"],
        "restart_clean_s": b["restart_clean_seconds"],
        "restart_crash_s": b["restart_crash_seconds"],
        "backlog_messages": b["backlog_messages"],
    }
    sm = out["summary"]
    kib_rate = sm["append_batch_async_1KiB_per_s"]
    record_1k = 1024 + 100  # body plus header, topic, properties and CRC, roughly
    sm["append_batch_1KiB_mib_s_over_disk_mib_s"] = kib_rate * record_1k / MIB / max(1, sm["disk_write_mib_s"])
    sm["sync_aio_64_over_1_writer"] = sm["append_sync_aio_64_writers_100B_per_s"] / max(
        1, sm["append_sync_aio_1_writer_100B_per_s"]
    )
    sm["targets"] = {
        "batch_100B_async_500k_per_s": sm["append_batch_async_100B_per_s"] >= 500_000,
        "inner_batch_100B_async_500k_per_s": sm["append_inner_batch_async_100B_per_s"] >= 500_000,
        "sync_64_writers_50k_per_s": max(
            sm["append_sync_64_writers_100B_per_s"], sm["append_sync_aio_64_writers_100B_per_s"]
        )
        >= 50_000,
        "cold_read_within_20pct_of_hot": (b["read_cold_over_hot"] or 0) >= 0.8,
        "index_query_under_1ms": b["index_query_p50_ms"] < 1.0,
        "clean_restart_under_2s": b["restart_clean_seconds"] < 2.0,
    }
    return out
