"""The latency benchmarks' paced sender: every tick sent once, stamped with its schedule, lateness reported."""

from __future__ import annotations

import asyncio
import itertools

import pytest

from benchmarks.common import (
    STAMP_BYTES,
    latency_ms,
    paced_sends,
    paced_total,
    stamped_body,
)


def test_stamped_body_round_trips_the_stamp() -> None:
    body = stamped_body(1_700_000_000_123_456_789, 100)
    assert len(body) == 100
    assert latency_ms(body, 1_700_000_000_123_456_789 + 2_500_000) == pytest.approx(2.5)
    with pytest.raises(OverflowError):
        stamped_body(-1, 100)  # a stamp is a time since the epoch
    assert len(stamped_body(0, STAMP_BYTES)) == STAMP_BYTES


@pytest.mark.timeout(30)
def test_paced_sends_sends_every_tick_on_schedule() -> None:
    calls: list[tuple[int, int, int]] = []

    async def send(k: int, n: int, stamp: int) -> None:
        calls.append((k, n, stamp))
        if k == 3:
            raise RuntimeError("refused")  # counted, the run goes on

    run = asyncio.run(asyncio.wait_for(paced_sends(2_000, 0.2, 5.0, send), 20))
    assert [k for k, _, _ in calls] == list(range(40))
    assert {n for _, n, _ in calls} == {10}
    assert run.ticks * run.per_tick == paced_total(2_000, 0.2, 5.0) == 400
    assert run.send_errors == 1
    stamps = [s for _, _, s in calls]
    assert {b - a for a, b in itertools.pairwise(stamps)} == {5_000_000}  # the schedule, not the clock
    assert len(run.lags_ms) == 40 and min(run.lags_ms) >= 0
    summary = run.as_dict()
    assert summary["batch_per_tick"] == 10 and summary["send_errors"] == 1
    assert 0 < summary["achieved_send_rate"] <= 2_000 * 1.1
