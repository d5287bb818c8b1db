"""``make run`` as the README gives it: the broker and its embedded name server on the ports asked for."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.procs import ROOT, free_port, port_open
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.mark.timeout(120)
def test_make_run_takes_the_broker_and_name_server_ports(tmp_path: Path) -> None:
    port, ns_port = free_port(), free_port()
    log = (tmp_path / "make-run.log").open("wb")
    make = subprocess.Popen(
        ["make", "-s", "run", f"PORT={port}", f"NAMESRV_PORT={ns_port}", f"STORE={tmp_path / 'store'}"],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # make and the broker it starts: one process group, stopped together below
    )
    try:
        wait_until(lambda: port_open(port) and port_open(ns_port), 60, "broker and name server ports of make run")
        assert make.poll() is None  # without NAMESRV_PORT the name server would sit on 9876 and this never opens
    finally:
        os.killpg(make.pid, signal.SIGTERM)
        try:
            make.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait(timeout=30)
        log.close()
    wait_until(lambda: not port_open(port) and not port_open(ns_port), 30, "ports released")
