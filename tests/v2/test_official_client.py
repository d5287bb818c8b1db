"""The official rocketmq-python-client 5.1.2 accepts our Telemetry settings replies.

The name server registers itself as the broker of the topic, so the client opens its Telemetry stream (and
heartbeats) to the name server's TelemetryHub.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from orbitmq.proto import namesrv_pb2 as pb
from tests.namesrv.helpers import internal_stub, namesrv_process
from tests.procs import ROOT

pytestmark = [pytest.mark.timeout(90), pytest.mark.integration]


async def register_self(addr: str, topic: str) -> None:
    reg = pb.BrokerRegistration(
        cluster_name="c",
        broker_name="self",
        broker_id=0,
        broker_addr=addr,
        topic_configs=[pb.TopicConfigData(topic_name=topic, read_queue_nums=2, write_queue_nums=2, perm=6)],
    )
    async with grpc.aio.insecure_channel(addr) as channel:
        result = await internal_stub(channel).RegisterBroker(reg, timeout=5)
    assert result.code == 20000


def test_push_consumer_and_producer_start_with_our_settings(tmp_path: Path) -> None:
    with namesrv_process(tmp_path) as (proc, addr):
        asyncio.run(register_self(addr, "probe-topic"))
        done = subprocess.run(
            [sys.executable, "-m", "tests.v2.official_client_probe", addr, "probe-topic"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, output
        assert "push-consumer-started" in output and "producer-started" in output and "done" in output, output
        started = float(output.split("push-consumer-started ")[1].split()[0])
        assert started < 8.0, output  # settings arrived, no 10 s startup timeout
        assert proc.alive() and "Traceback" not in proc.log(), proc.log()
