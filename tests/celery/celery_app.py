"""The Celery app the worker tests run: ``celery -A tests.celery.celery_app worker``; configured by environment.

``ORBITMQ_CELERY_BROKER`` is the broker URL, ``ORBITMQ_CELERY_RECORDS`` a folder where tasks note what they did
(one file per task key, one line per run: ``pid time``), ``ORBITMQ_CELERY_INVISIBLE`` the invisible time.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from celery import Celery

import transports.celery  # noqa: F401  # registers rocketmq:// with kombu

app = Celery("orbitmq_tests", broker=os.environ.get("ORBITMQ_CELERY_BROKER", "rocketmq://127.0.0.1:8081"))
app.conf.update(
    result_backend="rpc://",
    broker_transport_options={
        "invisible_time": float(os.environ.get("ORBITMQ_CELERY_INVISIBLE", "4")),
        "polling_timeout": 2.0,
        "binding_cache": 0.2,
    },
    broker_connection_retry_on_startup=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=int(os.environ.get("ORBITMQ_CELERY_PREFETCH", "4")),
    worker_hijack_root_logger=False,
    result_expires=300,
)


def note(key: str, what: str = "") -> None:
    """Append ``pid time what`` to the record file of ``key`` (many processes may write: one write per line)."""
    folder = Path(os.environ.get("ORBITMQ_CELERY_RECORDS", "/tmp"))
    with open(folder / key, "a") as f:
        f.write(f"{os.getpid()} {time.time():.3f} {what}\n")


def records(key: str) -> list[tuple[int, float, str]]:
    path = Path(os.environ.get("ORBITMQ_CELERY_RECORDS", "/tmp")) / key
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        pid, at, *rest = line.split(" ", 2)
        out.append((int(pid), float(at), rest[0] if rest else ""))
    return out


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task
def noop() -> None:
    return None


@app.task
def stamp(key: str) -> float:
    note(key)
    return time.time()


@app.task(bind=True, max_retries=3)
def flaky(self, key: str, failures: int, countdown: float) -> int:  # type: ignore[no-untyped-def]
    note(key)
    runs = len(records(key))
    if runs <= failures:
        raise self.retry(countdown=countdown)
    return runs


@app.task(acks_late=True)
def slow(key: str, seconds: float) -> str:
    note(key, "start")
    time.sleep(seconds)
    note(key, "end")
    return "done"
