"""The connector on a cluster layout: executors in JVMs of their own, with their own Python workers (Spark's
``local-cluster`` master), so nothing can rely on the driver and the tasks sharing a process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import oms
from tests.conftest import BrokerHandle
from tests.procs import ROOT
from tests.spark.conftest import create_topic, worker_env

pytestmark = [pytest.mark.spark, pytest.mark.integration]

ROWS = 3000


@pytest.mark.timeout(420)
def test_write_then_read_batch_and_stream_on_separate_executors(
    spark_broker: BrokerHandle, access_point: oms.MessagingAccessPoint, tmp_path: Path
) -> None:
    topic = "SparkCluster"
    create_topic(access_point, topic)
    log = tmp_path / "app.log"
    with log.open("wb") as out:
        app = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.cluster_app", spark_broker.addr, topic, str(ROWS), str(tmp_path)],
            cwd=ROOT,
            env={**os.environ, **worker_env()},
            stdout=subprocess.PIPE,
            stderr=out,
            start_new_session=True,  # its JVMs (driver, master, worker, executors) and Python workers, killed together
        )
        try:
            stdout, _ = app.communicate(timeout=360)
        finally:
            if app.poll() is None:
                os.killpg(app.pid, signal.SIGKILL)
                app.wait(30)
    assert app.returncode == 0, log.read_text(errors="replace")[-4000:]
    summary = json.loads(stdout.decode().strip().splitlines()[-1])
    assert summary["master"].startswith("local-cluster")
    assert summary["executors"] == 2
    expected = sorted(f"c{i}" for i in range(ROWS))
    assert summary["batch_bodies"] == expected
    assert summary["stream_bodies"] == expected
    assert summary["stream_batches"] >= 3, "maxOffsetsPerTrigger of a third of the rows: three batches or more"
