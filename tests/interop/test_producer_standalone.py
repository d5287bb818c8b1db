"""``mqbroker --standalone``: one process, embedded name server; the quickstart example runs against it."""

from __future__ import annotations

import os
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
        base = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
        # the broker positionally, the name server by --addr, and by NAMESRV_ADDR (its first address) like the
        # other examples: a default of 127.0.0.1:8081 would fail here, no broker listens there
        for extra, env in (
            ([f"127.0.0.1:{port}"], base),
            (["--addr", f"127.0.0.1:{ns_port}"], base),
            ([], {**base, "NAMESRV_ADDR": f"127.0.0.1:{ns_port};127.0.0.1:1"}),
        ):
            out = subprocess.run(
                [sys.executable, str(ROOT / "examples" / "quickstart.py"), *extra],
                capture_output=True,
                text=True,
                timeout=90,
                env=env,
            )
            assert out.returncode == 0, (extra, out.stdout + out.stderr)
            assert "received" in out.stdout and "hello OrbitMQ" in out.stdout
    finally:
        code = proc.stop(signal.SIGTERM)
    assert code == 0, proc.log()
    assert "broker stopped" in proc.log()
    assert not (tmp_path / "store" / "abort").exists()
