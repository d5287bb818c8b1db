"""The Celery app ``benchmarks/bench_celery.py`` runs on every broker: no-op tasks that leave a trace in a file.

``ORBITMQ_BENCH_BROKER`` is the broker URL, ``ORBITMQ_BENCH_DIR`` the folder of the trace files.
"""

from __future__ import annotations

import os
import time

from celery import Celery

import transports.celery  # noqa: F401  # registers rocketmq:// with kombu

QUEUE = "bench"
app = Celery("orbitmq_bench", broker=os.environ.get("ORBITMQ_BENCH_BROKER", "rocketmq://127.0.0.1:8081"))
app.conf.update(
    task_ignore_result=True,
    task_default_queue=QUEUE,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)
_DIR = os.environ.get("ORBITMQ_BENCH_DIR", "/tmp")


def _append(name: str, data: bytes) -> None:
    # one O_APPEND write per task: atomic between the pool's processes, a few microseconds
    fd = os.open(os.path.join(_DIR, name), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


@app.task
def tick(run: str) -> None:
    """The no-op task of the drain run: one byte per task, so the bench counts completions by file size."""
    _append(run, b".")


@app.task
def started(run: str, sent: float) -> None:
    """The latency task: publish-to-start time in ms, one line per task."""
    _append(run, f"{(time.time() - sent) * 1000:.3f}\n".encode())
