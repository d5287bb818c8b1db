"""The two log appender examples run as scripts against a real broker: ship, then tail the records back."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BrokerHandle

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "logappender"


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    return subprocess.run(
        [sys.executable, str(EXAMPLES / script), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_every_log_example_is_tested() -> None:
    assert {p.name for p in EXAMPLES.glob("*.py")} == {"ship_logs.py", "tail_logs.py"}


@pytest.mark.timeout(120)
def test_ship_then_tail(shared_broker: BrokerHandle) -> None:
    shipped = _run("ship_logs.py", "--addr", shared_broker.addr, "--topic", "ExampleLogs", "--count", "20")
    assert shipped.returncode == 0, shipped.stdout + shipped.stderr
    assert shipped.stdout.splitlines()[-1] == "OK"
    run = re.search(r"^run (\w+): shipped 21 records to ExampleLogs, dropped 0", shipped.stdout, re.M)
    assert run is not None, shipped.stdout
    assert "INFO shop.checkout: order 0 paid" in shipped.stderr  # the console handler beside it

    tailed = _run("tail_logs.py", "--addr", shared_broker.addr, "--topic", "ExampleLogs", "--count", "21")
    assert tailed.returncode == 0, tailed.stdout + tailed.stderr
    lines = tailed.stdout.splitlines()
    assert lines[-2:] == ["tailed 21 records", "OK"]
    paid = [line for line in lines if " paid [keys=" in line]
    assert len(paid) == 20 and all(" INFO     shop.checkout: order " in line for line in paid)
    assert any(f"keys={run.group(1)}-7]" in line for line in paid)
    assert any(" ERROR    shop.checkout: payment failed" in line for line in lines)
    assert "    ValueError: card declined" in lines
