"""Spark connector benchmark: streaming read and batch write rows/s on ``local[2]``, 100-byte bodies, against
the Python Data Source API's own floors (an in-memory source building the same Arrow batches; a sink dropping
them) and the raw ``Consume/PullBatch`` / ``Produce/SendBatch`` clients in the same run.

``python -m benchmarks.run_all spark`` (or ``python -m benchmarks.bench_spark [--quick]``); starts its own broker
and SparkSession.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import oms
from benchmarks.bench_e2e import BODY_SIZE, Broker, bench_batched_produce, bench_pull_batch, bench_send_batch
from benchmarks.common import median, proc_cpu_s, write_result

ROOT = Path(__file__).resolve().parent.parent
BATCH = 1024
QUEUES = 4  # bench_e2e's raw clients read queues 0-3 of an auto-created topic
READ_GOAL_ROWS_PER_S = 150_000
READ_GOAL_RATIO = 0.5
WRITE_GOAL_ROWS_PER_S = 100_000
# The reader as it was before this round's change: records decoded into pull_columns' Python lists, then Arrow
# arrays built from the lists (instead of Arrow arrays built from the pulled payloads), measured in the same rounds
# so the change shows as a same-run ratio.
UNTUNED_READ = {"pullDecoding": "columns"}


def _memory_source() -> Any:
    """An in-memory stream source yielding the rocketmq schema's Arrow batches built the same way (the floor)."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    from spark_connector.options import DEFAULT_RECORD_BATCH_SIZE
    from spark_connector.schema import arrow_schema, source_schema, to_record_batch

    @dataclass(frozen=True)
    class Part(InputPartition):
        queue_id: int
        start: int
        end: int

    class Reader(DataSourceStreamReader):
        def __init__(self, rows_per_queue: int) -> None:
            self.rows = rows_per_queue

        def initialOffset(self) -> dict[str, int]:
            return {"done": 0}

        def latestOffset(self) -> dict[str, int]:  # type: ignore[override]  # Spark takes the old zero-arg form
            return {"done": 1}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[Any]:
            if start == end:
                return []
            return [Part(q, 0, self.rows) for q in range(QUEUES)]

        def read(self, partition: Any) -> Iterator[Any]:
            schema = arrow_schema(source_schema(False))
            body = b"x" * BODY_SIZE
            now = int(time.time() * 1000)
            # record batches as large as the connector's (its default recordBatchSize): the same rows the same way
            for lo in range(partition.start, partition.end, DEFAULT_RECORD_BATCH_SIZE):
                offsets = list(range(lo, min(partition.end, lo + DEFAULT_RECORD_BATCH_SIZE)))
                n = len(offsets)
                cols = oms.MessageColumns(
                    offsets, [f"01MEM{o:027X}" for o in offsets], [None] * n, [None] * n, [body] * n,
                    [now] * n, [now] * n, [0] * n,
                )  # fmt: skip
                yield to_record_batch(cols, "MemTopic", "mem", partition.queue_id, schema, False)

    class MemorySource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rocketmq_bench_memory"

        def schema(self) -> Any:
            return source_schema(False)

        def streamReader(self, schema: Any) -> Reader:
            return Reader(int(self.options["rowsPerQueue"]))

    return MemorySource


def _discard_sink() -> Any:
    """A batch sink that takes the same Arrow batches as the connector's writer, converts the body column to Python
    as it does, and drops them: the Python Data Source API's own cost of a write job (the write floor)."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    @dataclass
    class Dropped(WriterCommitMessage):
        rows: int

    class Writer(DataSourceArrowWriter):
        def write(self, iterator: Iterator[Any]) -> Dropped:
            rows = 0
            for batch in iterator:
                rows += len(batch.column(0).to_pylist())
            return Dropped(rows)

    class DiscardSink(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rocketmq_bench_discard"

        def writer(self, schema: Any, overwrite: bool) -> Writer:
            return Writer()

    return DiscardSink


def _cpu_s(pid: int) -> float:
    try:
        return proc_cpu_s(pid)
    except OSError:  # gone: it counted until its last reading
        return 0.0


def _spark_processes() -> dict[int, str]:
    """The local session's processes by role: Spark's Python workers and its JVM."""
    roles: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if b"pyspark.daemon pyspark.worker" in args:
            roles[int(entry.name)] = "python_workers"
        elif b"java" in args and b"spark" in args:
            roles[int(entry.name)] = "jvm"
    return roles


def _timed_write(frame: Any, rows: int, fmt: str, broker_pid: int, **options: str) -> dict[str, Any]:
    """Rows/s of a batch write, and each side's CPU per row: where a write's time goes on a shared 2-core machine."""
    before = {**_spark_processes(), broker_pid: "broker"}
    cpu0 = {pid: _cpu_s(pid) for pid in before}
    t0 = time.perf_counter()
    frame.write.format(fmt).options(**options).mode("append").save()
    elapsed = time.perf_counter() - t0
    cpu: dict[str, float] = {}
    for pid, role in {**before, **_spark_processes()}.items():
        cpu[role] = cpu.get(role, 0.0) + max(0.0, _cpu_s(pid) - cpu0.get(pid, 0.0))
    return {
        "rows": rows,
        "rows_per_s": round(rows / elapsed),
        "wall_s": round(elapsed, 2),
        "cpu_us_per_row": {role: round(seconds / rows * 1e6, 2) for role, seconds in sorted(cpu.items())},
    }


def _session() -> Any:
    from pyspark.sql import SparkSession

    path = os.environ.get("PYTHONPATH", "")
    os.environ.update(
        {
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT),
        }
    )
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _stream_rows_per_s(df: Any, checkpoint: str) -> dict[str, Any]:
    """AvailableNow into the ``noop`` sink; rows/s over the batches' execution time (query start excluded)."""
    t0 = time.perf_counter()
    query = df.writeStream.format("noop").option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    query.awaitTermination()
    wall = time.perf_counter() - t0
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    busy_ms = sum(p["durationMs"]["triggerExecution"] for p in progress)
    return {
        "rows": rows,
        "batches": len(progress),
        "rows_per_s": round(rows / (busy_ms / 1000)) if busy_ms else 0,
        "wall_s": round(wall, 2),
    }


def _warm_up(spark: Any, endpoints: str, tmp: str) -> None:
    """One small run of each path first: a session's first Python source and sink start their workers (10-20 s)."""
    asyncio.run(bench_batched_produce(endpoints, "BenchSparkWarm", 4 * BATCH, BATCH, 1))
    warm = spark.readStream.format("rocketmq").option("endpoints", endpoints).option("subscribe", "BenchSparkWarm")
    _stream_rows_per_s(warm.option("startingOffsets", "earliest").load(), f"{tmp}/ckpt-warm")
    mem = spark.readStream.format("rocketmq_bench_memory").option("rowsPerQueue", BATCH).load()
    _stream_rows_per_s(mem, f"{tmp}/ckpt-warm-mem")
    spark.range(BATCH).selectExpr("'warm' AS value").write.format("rocketmq_bench_discard").mode("append").save()
    spark.range(BATCH).selectExpr("'warm' AS value").write.format("rocketmq").option("endpoints", endpoints).option(
        "topic", "BenchSparkWarm"
    ).mode("append").save()


def run(quick: bool = False) -> dict[str, Any]:
    n = 102_400 if quick else 409_600
    # as many rows as the read: a write job's own start (~0.3-0.9 s here) would otherwise be most of the time
    n_write = n
    rounds = 1 if quick else 3
    spark = _session()
    spark.dataSource.register(_memory_source())
    spark.dataSource.register(_discard_sink())
    raw_pull, spark_read, untuned_read, floor, raw_send, spark_write, write_floor = [], [], [], [], [], [], []
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        broker = Broker(Path(tmp) / "store")
        try:
            topic = "BenchSparkRead"
            asyncio.run(bench_batched_produce(broker.addr, topic, n, BATCH, 4))
            _warm_up(spark, broker.addr, tmp)
            for r in range(rounds):  # interleaved, so drift on shared cores hits every side alike
                raw_pull.append(asyncio.run(bench_pull_batch(broker.addr, topic, BATCH)))
                reader = (
                    spark.readStream.format("rocketmq")
                    .option("endpoints", broker.addr)
                    .option("subscribe", topic)
                    .option("startingOffsets", "earliest")
                )
                spark_read.append(_stream_rows_per_s(reader.load(), f"{tmp}/ckpt-read-{r}"))
                untuned_read.append(_stream_rows_per_s(reader.options(**UNTUNED_READ).load(), f"{tmp}/ckpt-old-{r}"))
                mem = spark.readStream.format("rocketmq_bench_memory").option("rowsPerQueue", n // QUEUES).load()
                floor.append(_stream_rows_per_s(mem, f"{tmp}/ckpt-mem-{r}"))

                raw_send.append(asyncio.run(bench_send_batch(broker.addr, f"BenchRawSend{r}", n_write, BATCH, 4)))
                out = spark.range(n_write, numPartitions=2).selectExpr(f"repeat('x', {BODY_SIZE}) AS value")
                out.cache().count()  # the rows exist before the clock starts: only the sink is timed
                spark_write.append(
                    _timed_write(
                        out,
                        n_write,
                        "rocketmq",
                        broker.proc.pid,
                        endpoints=broker.addr,
                        topic=f"BenchSparkWrite{r}",
                        batchSize="1024",
                    )
                )
                write_floor.append(_timed_write(out, n_write, "rocketmq_bench_discard", broker.proc.pid))
                out.unpersist()
        finally:
            broker.stop()
            spark.stop()
    read_med = median([r["rows_per_s"] for r in spark_read])
    untuned_med = median([r["rows_per_s"] for r in untuned_read])
    floor_med = median([r["rows_per_s"] for r in floor])
    pull_med = median([r["msgs_per_s"] for r in raw_pull])
    write_med = median([r["rows_per_s"] for r in spark_write])
    send_med = median([r["msgs_per_s"] for r in raw_send])
    write_floor_med = median([r["rows_per_s"] for r in write_floor])
    summary = {
        "stream_read_rows_per_s": round(read_med),
        "stream_read_untuned_rows_per_s": round(untuned_med),
        "read_ratio_over_untuned": round(read_med / untuned_med, 3),
        "untuned_read_options": UNTUNED_READ,
        "memory_source_floor_rows_per_s": round(floor_med),
        "raw_pull_batch_msgs_per_s": round(pull_med),
        "read_ratio_over_floor": round(read_med / floor_med, 3),
        "read_ratio_over_raw_pull_batch": round(read_med / pull_med, 3),
        "batch_write_rows_per_s": round(write_med),
        "raw_send_batch_msgs_per_s": round(send_med),
        "write_ratio_over_raw_send_batch": round(write_med / send_med, 3),
        "write_cpu_us_per_row": {
            role: median([w["cpu_us_per_row"].get(role, 0.0) for w in spark_write])
            for role in ("broker", "python_workers", "jvm")
        },
        "write_floor_rows_per_s": round(write_floor_med),
        "write_ratio_over_floor": round(write_med / write_floor_med, 3),
        "read_goal_rows_per_s": READ_GOAL_ROWS_PER_S,
        "read_goal_ratio_over_raw": READ_GOAL_RATIO,
        "write_goal_rows_per_s": WRITE_GOAL_ROWS_PER_S,
        "read_meets_goal": read_med >= READ_GOAL_ROWS_PER_S and read_med / pull_med >= READ_GOAL_RATIO,
        "write_meets_goal": write_med >= WRITE_GOAL_ROWS_PER_S,
        "rows": n,
        "write_rows": n_write,
        "body_bytes": BODY_SIZE,
        "master": "local[2]",
        "rounds": rounds,
    }
    return {
        "summary": summary,
        "stream_read": spark_read,
        "stream_read_untuned": untuned_read,
        "memory_floor": floor,
        "raw_pull_batch": raw_pull,
        "batch_write": spark_write,
        "raw_send_batch": raw_send,
        "write_floor": write_floor,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    result = run(quick=args.quick)
    path = write_result("spark", result)
    print(json.dumps(result["summary"], indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
