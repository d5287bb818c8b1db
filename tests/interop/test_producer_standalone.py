"""``mqbroker --standalone``: one process, embedded name server; the quickstart example runs against it."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.procs import ROOT, ServerProcess, free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
def test_standalone_quickstart(tmp_path):
    port, ns_port = free_port(), free_port()
    args = [
        sys.executable, "-m", "broker.cli", "--standalone", "--store", str(tmp_path / "store"),
        "--port", str(port), "--namesrv-port", str(ns_port), "-o", "warmMapedFileEnable=false",
        "-o", "mappedFileSizeCommitLog=4194304",
    ]  # fmt: skip
    proc = ServerProcess(args, tmp_path / "standalone.log").start()
    try:
        proc.wait_port(port)
        proc.wait_port(ns_port)
        wait_until(lambda: "access point" in proc.log(), 10, what="ready line")
        assert f"127.0.0.1:{port}" in proc.log()
        for access_point in (f"127.0.0.1:{port}", f"127.0.0.1:{ns_port}"):
            out = subprocess.run(
                [sys.executable, str(ROOT / "examples" / "quickstart.py"), access_point],
                capture_output=True,
                text=True,
                timeout=90,
            )
            assert out.returncode == 0, out.stdout + out.stderr
            assert "received" in out.stdout and "hello OrbitMQ" in out.stdout
    finally:
        code = proc.stop(signal.SIGTERM)
    assert code == 0, proc.log()
    assert "broker stopped" in proc.log()
    assert not (tmp_path / "store" / "abort").exists()
