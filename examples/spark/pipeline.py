"""A pipeline on the Spark connector: an application produces click events, a Structured Streaming job counts them
per page and 10-second event-time window, and writes the counts to the topic ``PageCounts`` and to Parquet.

``python examples/spark/pipeline.py --endpoints 127.0.0.1:8081 [--events 2000] [--out /tmp/page-counts]``
needs a broker (``make run``), pyspark and Java 17. The job runs with ``Trigger.AvailableNow`` (all events there
now, then stop) so the script ends; drop the trigger for a job that keeps running.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import oms

EVENTS_TOPIC = "ClickEvents"
COUNTS_TOPIC = "PageCounts"
PAGES = ("/home", "/cart", "/checkout", "/search")


def produce_events(endpoints: str, n: int, run: str) -> dict[str, int]:
    """The application side: ``n`` click events over the last minute of event time; the clicks per page."""
    now_ms = int(time.time() * 1000)
    per_page: dict[str, int] = {}
    messages = []
    for i in range(n):
        page = random.choice(PAGES)
        per_page[page] = per_page.get(page, 0) + 1
        event = {"run": run, "page": page, "user": f"u{i % 97}", "ts": now_ms - random.randrange(60_000)}
        messages.append(oms.BytesMessage(json.dumps(event), EVENTS_TOPIC, tags="click", keys=[event["user"]]))
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{endpoints}/") as ap,
        ap.resource_manager() as rm,
        ap.create_producer() as producer,
    ):
        for topic in (EVENTS_TOPIC, COUNTS_TOPIC):
            if topic not in rm.list_topics():
                rm.create_topic(topic, read_queue_nums=4, write_queue_nums=4)
        for lo in range(0, n, 256):
            producer.send_batch(messages[lo : lo + 256])
    return per_page


def count_windows(spark: Any, endpoints: str, run: str, out: Path) -> None:
    """The Spark job: events -> per-page counts per 10-second window -> the PageCounts topic and Parquet."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    events = (
        spark.readStream.format("rocketmq")
        .option("endpoints", endpoints)
        .option("subscribe", EVENTS_TOPIC)
        .option("subExpression", "click")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "5000")
        .load()
        .select(F.from_json(F.col("body").cast("string"), "run string, page string, user string, ts long").alias("e"))
        .where(F.col("e.run") == run)
        .select(F.col("e.page").alias("page"), (F.col("e.ts") / 1000).cast("timestamp").alias("eventTime"))
    )
    counts = (
        events.withWatermark("eventTime", "20 seconds")
        .groupBy(F.window("eventTime", "10 seconds"), "page")
        .count()
        .select(
            F.lit(run).alias("run"),
            F.col("window.start").alias("windowStart"),
            F.col("window.end").alias("windowEnd"),
            "page",
            "count",
        )
    )

    def write_both(batch: DataFrame, batch_id: int) -> None:
        # update mode: a window's latest count wins; the key lets a consumer keep only that one
        batch.persist()
        batch.selectExpr(
            "to_json(struct(*)) AS body",
            "concat(page, '@', CAST(windowStart AS STRING)) AS keys",
            "'count' AS tags",
        ).write.format("rocketmq").option("endpoints", endpoints).option("topic", COUNTS_TOPIC).mode("append").save()
        batch.withColumn("batchId", F.lit(batch_id)).write.mode("append").parquet(str(out / "parquet"))
        batch.unpersist()

    query = (
        counts.writeStream.outputMode("update")
        .foreachBatch(write_both)
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def latest_counts(spark: Any, endpoints: str, run: str, out: Path) -> tuple[dict[str, int], dict[str, int]]:
    """Clicks per page as the topic and the Parquet files tell it (the last update of each window)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def totals(df: Any) -> dict[str, int]:
        latest = Window.partitionBy("page", "windowStart").orderBy(F.col("count").desc())
        final = df.withColumn("rank", F.row_number().over(latest)).where("rank = 1")
        return {r["page"]: r["total"] for r in final.groupBy("page").agg(F.sum("count").alias("total")).collect()}

    topic = (
        spark.read.format("rocketmq")
        .option("endpoints", endpoints)
        .option("subscribe", COUNTS_TOPIC)
        .load()
        .select(
            F.from_json(F.col("body").cast("string"), "run string, windowStart string, page string, count long").alias(
                "c"
            )
        )
        .select("c.*")
        .where(F.col("run") == run)
    )
    parquet = spark.read.parquet(str(out / "parquet")).where(F.col("run") == run)
    return totals(topic), totals(parquet)


def run_pipeline(spark: Any, endpoints: str, events: int, out: Path) -> dict[str, dict[str, int]]:
    run = os.urandom(4).hex()
    produced = produce_events(endpoints, events, run)
    count_windows(spark, endpoints, run, out)
    from_topic, from_parquet = latest_counts(spark, endpoints, run, out)
    return {"produced": produced, "topic": from_topic, "parquet": from_parquet}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoints", default=os.environ.get("NAMESRV_ADDR") or "127.0.0.1:8081")
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=None, help="Parquet and checkpoint directory (default: a tmp dir)")
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", "2").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # explicit registration: Spark's automatic one only sees pyspark_rocketmq when it is on the workers' sys.path
    from spark_connector import RocketMQDataSource

    spark.dataSource.register(RocketMQDataSource)
    try:
        out = args.out or Path(tempfile.mkdtemp(prefix="page-counts-"))
        result = run_pipeline(spark, args.endpoints, args.events, out)
    finally:
        spark.stop()
    print(json.dumps(result, indent=2, sort_keys=True))
    ok = result["produced"] == result["topic"] == result["parquet"]
    print("OK" if ok else "FAILED: the counts differ")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
