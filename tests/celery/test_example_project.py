"""``examples/celery_project`` runs as documented: its demo against a real broker with a worker it starts."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import BrokerHandle
from tests.procs import ROOT

pytestmark = pytest.mark.integration


@pytest.mark.timeout(150)
def test_example_project_demo(celery_broker: BrokerHandle) -> None:
    demo = ROOT / "examples" / "celery_project" / "run_demo.py"
    done = subprocess.run(
        [sys.executable, str(demo), "--addr", celery_broker.addr, "--start-worker"],
        capture_output=True,
        text=True,
        timeout=140,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "add(2, 3) = 5" in done.stdout
    assert "chain((1+2)+10) = 13" in done.stdout
    assert "group = [0, 2, 4, 6]" in done.stdout
    assert "flaky succeeded after 1 retry" in done.stdout
