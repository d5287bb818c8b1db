"""``mallocKeepFreedMb``: the broker keeps the heap a request freed for the next request instead of giving it back
to the system and faulting it in again (orbitmq/malloc_tuning.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from broker.config import load_broker_settings
from orbitmq.config import ConfigError

ROOT = Path(__file__).resolve().parents[2]
# Four request-sized buffers alive at once, then freed, as a SendBatch's copies are: page faults per round.
_ROUNDS = """
import resource, sys
from orbitmq.malloc_tuning import keep_freed_memory
if sys.argv[1] == "kept":
    assert keep_freed_memory(64 << 20)
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(3):
    buffers = [b"x" * (6 << 20) for _ in range(4)]
    del buffers
start = faults()
for _ in range(20):
    buffers = [b"x" * (6 << 20) for _ in range(4)]
    del buffers
print((faults() - start) / 20)
"""


def _faults_per_round(mode: str) -> float:
    out = subprocess.run(
        [sys.executable, "-c", _ROUNDS, mode], capture_output=True, text=True, timeout=60, cwd=ROOT, check=True
    )
    return float(out.stdout)


@pytest.mark.timeout(120)
def test_freed_request_buffers_are_reused_without_page_faults() -> None:
    default, kept = _faults_per_round("default"), _faults_per_round("kept")
    assert kept < 10, f"{kept} page faults per round with the memory kept"
    assert default > 10 * max(kept, 1), f"glibc's defaults fault {default} pages per round: nothing to tune?"


def test_the_default_keeps_64_mib_and_a_bad_value_is_refused_at_load() -> None:
    assert load_broker_settings(None, {}).broker.mallocKeepFreedMb == 64
    assert load_broker_settings(None, {"mallocKeepFreedMb": "0"}).broker.mallocKeepFreedMb == 0
    for bad in ("-1", "4096"):
        with pytest.raises(ConfigError, match="mallocKeepFreedMb"):
            load_broker_settings(None, {"mallocKeepFreedMb": bad})
