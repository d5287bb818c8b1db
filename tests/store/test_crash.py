"""A SYNC_FLUSH writer killed with SIGKILL at random moments loses nothing it acknowledged."""

from __future__ import annotations

import hashlib
import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.store.config import FlushDiskType
from broker.store.message_store import DefaultMessageStore
from tests.procs import ROOT
from tests.store.conftest import small_config

pytestmark = pytest.mark.integration


def payload(i: int) -> bytes:
    return hashlib.sha256(str(i).encode()).hexdigest().encode() * (1 + i % 7)


@pytest.mark.timeout(120)
def test_sigkill_rounds_keep_every_acknowledged_append(tmp_path: Path) -> None:
    rng = random.Random(7)
    acked: dict[int, tuple[int, int]] = {}  # message number -> (queue, queue offset)
    next_i = 0
    for _round in range(4):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.store.crash_writer", str(tmp_path), str(next_i)],
            stdout=subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            # The kill lands at a random moment once the writer is acknowledging (on a loaded machine its start
            # alone can take longer than the random delay).
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], 60)
            assert ready, "the writer printed nothing within 60 s"
            first = proc.stdout.readline()
            time.sleep(0.2 + rng.random() * 1.2)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
        lines = (first + out).decode().splitlines()
        for line in lines:
            parts = line.split()
            if len(parts) == 3:  # the last line may be torn by the kill
                i, q, off = map(int, parts)
                acked[i] = (q, off)
        assert lines, "the writer acknowledged nothing"
        next_i = max(acked) + 1 + 10_000  # unacknowledged numbers from this round are never reused

        store = DefaultMessageStore(small_config(tmp_path, flushDiskType=FlushDiskType.SYNC_FLUSH), ("127.0.0.1", 1))
        store.load()
        try:
            for q in range(3):
                got = store.get_message("g", "C", q, 0, 1_000_000, max_total_bytes=1 << 40)
                offsets = [m.queue_offset for m in got.messages]
                assert offsets == list(range(len(offsets))), "queue offsets must be contiguous"
                by_offset = {m.queue_offset: m for m in got.messages}
                for m in got.messages:
                    assert m.body == payload(int(m.properties["KEYS"])), "a readable record must be whole"
                for i, (qq, off) in acked.items():
                    if qq == q:
                        assert off in by_offset, f"acknowledged message {i} lost"
                        assert by_offset[off].body == payload(i)
        finally:
            store.shutdown()
