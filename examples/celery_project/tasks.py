"""The example project's tasks; ``celery -A tasks worker`` runs them (see docs/celery.md)."""

from __future__ import annotations

import time

from celery import Celery

import transports.celery  # noqa: F401  # registers rocketmq:// with kombu

app = Celery("tasks")
app.config_from_object("celeryconfig")


@app.task
def add(x: int, y: int) -> int:
    return x + y


@app.task
def now() -> float:
    """When the task started (the caller compares it with its countdown)."""
    return time.time()


@app.task(bind=True, max_retries=2)
def flaky(self, attempts_before_success: int) -> int:  # type: ignore[no-untyped-def]
    """Fails ``attempts_before_success`` times, retried 1 s later each time on the broker's timer."""
    if self.request.retries < attempts_before_success:
        raise self.retry(countdown=1)
    return self.request.retries
