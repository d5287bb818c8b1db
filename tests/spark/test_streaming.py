"""Streaming reads and writes: admission control, restarts from the checkpoint (also after a driver SIGKILL),
``failOnDataLoss`` after retention deleted what the checkpoint points at, and a sink riding out a broker restart."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import oms
from spark_connector import IDEMPOTENCE_KEY
from tests.conftest import BrokerFactory, BrokerHandle
from tests.procs import ROOT
from tests.spark.conftest import body_set, create_topic, produce, worker_env
from tests.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def stream(spark: Any, broker: BrokerHandle, topic: str, **options: str) -> Any:
    return (
        spark.readStream.format("rocketmq")
        .option("endpoints", broker.addr)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .options(**options)
        .load()
    )


def run_available_now(df: Any, out: Path, checkpoint: Path) -> Any:
    query = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert not query.isActive
    if query.exception() is not None:
        raise query.exception()
    return query


def exactly_once(spark: Any, out: Path, expected_per_queue: dict[int, int]) -> None:
    """Every offset of every queue exactly once: no gap, no duplicate."""
    rows = spark.read.parquet(str(out)).select("queueId", "queueOffset").collect()
    seen: dict[int, list[int]] = {}
    for r in rows:
        seen.setdefault(r["queueId"], []).append(r["queueOffset"])
    assert {q: sorted(offsets) for q, offsets in seen.items()} == {
        q: list(range(n)) for q, n in expected_per_queue.items() if n
    }


def queue_sizes(ap: oms.MessagingAccessPoint, topic: str) -> dict[int, int]:
    with ap.resource_manager() as rm:
        return {q.queue_id: q.max_offset for q in rm.topic_status(topic).queues}


@pytest.mark.timeout(300)
def test_max_offsets_per_trigger_then_restart_from_checkpoint_exactly_once(
    spark: Any, spark_broker: BrokerHandle, access_point: oms.MessagingAccessPoint, tmp_path: Path
) -> None:
    topic = "SparkStreamed"
    create_topic(access_point, topic)
    produce(access_point, [oms.BytesMessage(f"s{i}", topic) for i in range(100)], per_batch=10)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    df = stream(spark, spark_broker, topic, maxOffsetsPerTrigger="30", group="spark-progress")
    query = run_available_now(df, out, checkpoint)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [30, 30, 30, 10]
    latest = query.recentProgress[-1]["sources"][0]["latestOffset"]
    assert f'"{topic}"' in latest and spark_broker.name in latest, "reportLatestOffset shows the brokers' ends"
    exactly_once(spark, out, queue_sizes(access_point, topic))

    # commits arrive one trigger late (and never for AvailableNow's last batch): progress up to batch 2 at least
    with access_point.resource_manager() as rm:
        committed = sum(max(0, q.consumer_offset) for q in rm.consumer_progress("spark-progress", topic).queues)
    assert 60 <= committed <= 100

    produce(access_point, [oms.BytesMessage(f"t{i}", topic) for i in range(60)], per_batch=10)
    again = run_available_now(stream(spark, spark_broker, topic), out, checkpoint)
    assert sum(p["numInputRows"] for p in again.recentProgress) == 60, "a restart reads only what is new"
    exactly_once(spark, out, queue_sizes(access_point, topic))
    assert body_set(spark.read.parquet(str(out)).collect()) == sorted(
        [f"s{i}" for i in range(100)] + [f"t{i}" for i in range(60)]
    )


@pytest.mark.timeout(420)
def test_driver_sigkill_mid_query_then_restart_loses_and_repeats_nothing(
    spark: Any, spark_broker: BrokerHandle, access_point: oms.MessagingAccessPoint, tmp_path: Path
) -> None:
    topic = "SparkKilled"
    create_topic(access_point, topic)
    produce(access_point, [oms.BytesMessage(f"k{i}", topic) for i in range(200)], per_batch=10)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    log = (tmp_path / "driver.log").open("wb")
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.spark.stream_driver", spark_broker.addr, topic, str(checkpoint), str(out)],
        cwd=ROOT,
        env={**os.environ, **worker_env()},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its JVM and Python workers form one group, killed together
    )
    try:
        commits = checkpoint / "commits"
        wait_until(lambda: commits.is_dir() and any(commits.glob("[0-9]*")), 300, "a first batch", interval=0.2)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
        log.close()
    done = len(list((checkpoint / "commits").glob("[0-9]*")))
    assert done < 10, "killed mid-query: 200 messages at 20 per trigger take 10 batches"
    run_available_now(stream(spark, spark_broker, topic), out, checkpoint)
    exactly_once(spark, out, queue_sizes(access_point, topic))


@pytest.mark.timeout(300)
def test_fail_on_data_loss_after_retention_deleted_the_next_offsets(
    spark: Any, broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    retention = {
        "mappedFileSizeCommitLog": str(64 * 1024),
        "fileReservedTime": "0",  # every full segment is expired ...
        "deleteWhen": ";".join(str(h) for h in range(24)),  # ... at any hour ...
        "cleanResourceInterval": "200",  # ... and looked for every 200 ms
    }
    broker = broker_factory.broker(options=retention)
    topic = "SparkRetained"
    with oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap:
        create_topic(ap, topic, queues=1)
        produce(ap, [oms.BytesMessage(f"a{i}", topic) for i in range(10)])
        out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
        run_available_now(stream(spark, broker, topic), out, checkpoint)
        assert spark.read.parquet(str(out)).count() == 10
        produce(ap, [oms.BytesMessage(b"x" * 1024, topic) for _ in range(300)], per_batch=20)
        with ap.create_pull_consumer(consumer_id="spark-test-probe") as probe:
            queue = probe.queues(topic)[0]
            wait_until(lambda: probe.earliest_offset(queue) > 10, 60, "retention to delete offsets 10+", interval=0.2)
            first, end = probe.earliest_offset(queue), probe.latest_offset(queue)
    # the same query twice: a file sink's output belongs with its checkpoint, so both are copied
    lenient, skipped_out = tmp_path / "checkpoint-lenient", tmp_path / "out-lenient"
    shutil.copytree(checkpoint, lenient)
    shutil.copytree(out, skipped_out)

    with pytest.raises(Exception, match="ROCKETMQ_DATA_LOSS") as info:
        run_available_now(stream(spark, broker, topic), out, checkpoint)
    assert re.search(
        r"option 'failOnDataLoss': queue SparkRetained/broker-\d+:0 offsets \[10, \d+\) are gone", str(info.value)
    )

    run_available_now(stream(spark, broker, topic, failOnDataLoss="false"), skipped_out, lenient)
    offsets = sorted(r["queueOffset"] for r in spark.read.parquet(str(skipped_out)).collect() if r["queueOffset"] >= 10)
    resumed = offsets[0]  # retention may have gone on after `first` was asked
    assert resumed >= first
    assert offsets == list(range(resumed, end)), "the lost offsets skipped, everything retained read once"


@pytest.mark.timeout(300)
def test_streaming_write_survives_a_broker_restart(spark: Any, broker_factory: BrokerFactory, tmp_path: Path) -> None:
    broker = broker_factory.broker()
    topic = "SparkSunk"
    with oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap:
        create_topic(ap, topic)
    source = tmp_path / "in"
    source.mkdir()
    for f in range(6):
        lines = [f'{{"body": "f{f}-{i}", "tags": "T{f}"}}' for i in range(40)]
        (source / f"part-{f}.json").write_text("\n".join(lines))
    rows = spark.readStream.schema("body string, tags string").option("maxFilesPerTrigger", 1).json(str(source))
    query = (
        rows.writeStream.format("rocketmq")
        .option("endpoints", broker.addr)
        .option("topic", topic)
        .option("sendTimeoutMs", "60000")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        wait_until(lambda: len(query.recentProgress) >= 2, 120, "two micro-batches", interval=0.2)
        broker.restart()
        query.processAllAvailable()
        assert query.exception() is None
    finally:
        query.stop()
    back = (
        spark.read.format("rocketmq")
        .option("endpoints", broker.addr)
        .option("subscribe", topic)
        .option("includeProperties", "true")
        .load()
        .collect()
    )
    expected = sorted(f"f{f}-{i}" for f in range(6) for i in range(40))
    assert sorted(set(body_set(back))) == expected, "nothing lost"
    by_key = {r["properties"][IDEMPOTENCE_KEY]: bytes(r["body"]).decode() for r in back}
    assert sorted(by_key.values()) == expected, "replays (if any) carry the same idempotence key"
    assert {r["tags"] for r in back} == {f"T{f}" for f in range(6)}
