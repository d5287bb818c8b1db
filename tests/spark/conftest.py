"""One local SparkSession for the whole run (starting one costs 10-40 s) and one broker process for the Spark tests.

Spark's Python workers find the connector through ``PYTHONPATH`` (the repository root), which also lets Spark's
own lookup register ``pyspark_rocketmq.DefaultSource``: no test calls ``spark.dataSource.register``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import oms
from tests.conftest import BrokerFactory, BrokerHandle
from tests.procs import ROOT

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs Java (17)", allow_module_level=True)

SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}


def worker_env() -> dict[str, str]:
    """What a Spark driver (this one or a child process) needs so its Python workers run this checkout."""
    path = os.environ.get("PYTHONPATH", "")
    return {
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{path}" if path else str(ROOT),
    }


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    os.environ.update(worker_env())
    from pyspark.errors import PySparkRuntimeError

    builder = SparkSession.builder.master("local[2]").appName("orbitmq-spark-tests")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    # The JVM is started by a fork of this process, which by now runs other libraries' threads (gRPC's pollers
    # among them); once in a full run the child died before exec ("Java gateway process exited before sending
    # its port number", nothing on its stderr). A second launch is a new fork.
    for attempt in range(3):
        try:
            session = builder.getOrCreate()
            break
        except PySparkRuntimeError as exc:
            if exc.getCondition() != "JAVA_GATEWAY_EXITED" or attempt == 2:
                raise
            print(f"Spark's Java gateway exited at launch (attempt {attempt + 1}); launching again", file=sys.stderr)
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerHandle]:
    factory = BrokerFactory(tmp_path_factory.mktemp("spark-broker"))
    try:
        yield factory.broker()
    finally:
        factory.stop_all()


@pytest.fixture(scope="session")
def access_point(spark_broker: BrokerHandle) -> Iterator[oms.MessagingAccessPoint]:
    with oms.get_messaging_access_point(f"oms:rocketmq://{spark_broker.addr}/") as ap:
        yield ap


def create_topic(ap: oms.MessagingAccessPoint, topic: str, queues: int = 4) -> None:
    with ap.resource_manager() as rm:
        rm.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


def produce(ap: oms.MessagingAccessPoint, messages: list[oms.BytesMessage], per_batch: int = 25) -> None:
    """Send in several batches, so the messages spread over the queues."""
    with ap.create_producer(operation_timeout=10_000) as producer:
        for lo in range(0, len(messages), per_batch):
            producer.send_batch(messages[lo : lo + per_batch])


def body_set(rows: list[Any]) -> list[str]:
    return sorted(bytes(r["body"]).decode() for r in rows)


def per_queue_in_order(rows: list[Any]) -> bool:
    """Within each queue, offsets strictly increase in the order the rows came (no duplicate, no reordering)."""
    last: dict[tuple[str, str, int], int] = {}
    for r in rows:
        key = (r["topic"], r["brokerName"], r["queueId"])
        if r["queueOffset"] <= last.get(key, -1):
            return False
        last[key] = r["queueOffset"]
    return True


def stream_dir(tmp_path: Path, name: str) -> str:
    return str(tmp_path / name)
