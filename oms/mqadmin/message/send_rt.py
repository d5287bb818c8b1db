"""What the round-trip commands share (checkMsgSendRT, clusterRT, sendMsgStatus): timed sends of generated bodies
through one producer, and their summary."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from oms.message import BytesMessage
from oms.producer.producer import Producer
from oms.queue import MessageQueue

Selector = Callable[[Sequence[MessageQueue], BytesMessage, Any], MessageQueue]


@dataclass(frozen=True)
class SendRT:
    """Round trips of ``count`` sends to one target: milliseconds of each, and failures."""

    target: str
    rts_ms: tuple[float, ...] = ()
    failures: tuple[str, ...] = field(default=(), hash=False)

    @property
    def avg_ms(self) -> float:
        return statistics.fmean(self.rts_ms) if self.rts_ms else 0.0

    @property
    def max_ms(self) -> float:
        return max(self.rts_ms, default=0.0)


def timed_sends(
    producer: Producer,
    target: str,
    topic: str,
    count: int,
    size: int,
    *,
    selector: Selector | None = None,
    interval_s: float = 0.0,
    progress: TextIO | None = None,
) -> SendRT:
    """``count`` sends of a ``size``-byte body, timed one by one; a failed send is recorded, not raised."""
    body = b"a" * size
    rts: list[float] = []
    failures: list[str] = []
    for n in range(count):
        started = time.perf_counter()
        try:
            producer.send(BytesMessage(body, topic), selector=selector)
            rts.append((time.perf_counter() - started) * 1000)
        except Exception as exc:  # the command reports every failure; one must not end the measurement
            failures.append(f"{type(exc).__name__}: {exc}")
        if progress is not None and count >= 10 and (n + 1) % max(1, count // 10) == 0:
            progress.write(f"{target}: {n + 1}/{count} sent\n")
            progress.flush()
        if interval_s:
            time.sleep(interval_s)
    return SendRT(target, tuple(rts), tuple(failures))


def rt_table_rows(results: Sequence[SendRT]) -> list[tuple[Any, ...]]:
    return [(r.target, len(r.rts_ms), len(r.failures), f"{r.avg_ms:.3f}", f"{r.max_ms:.3f}") for r in results]


RT_HEADERS = ["Target", "Sent", "Failed", "Avg RT(ms)", "Max RT(ms)"]
