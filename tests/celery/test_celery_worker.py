"""A real Celery app and real ``celery worker`` processes on the rocketmq transport, against a real broker.

Two workers serve the ``celery`` queue for the whole module; the kill and warm-shutdown tests start their own
workers on queues of their own. Every worker is a process group of its own, stopped by PID at teardown.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from celery import Celery, chain, group

import oms
from tests.celery import celery_app
from tests.celery.conftest import INVISIBLE_S
from tests.celery.workers import Worker
from tests.conftest import BrokerHandle
from tests.procs import ROOT
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

app = celery_app.app


@dataclass
class Env:
    broker: BrokerHandle
    records: Path
    logs: Path
    workers: list[Worker] = field(default_factory=list)

    def worker(self, name: str, *args: str, invisible: float = INVISIBLE_S, prefetch: int = 4) -> Worker:
        env = {
            "ORBITMQ_CELERY_BROKER": f"rocketmq://{self.broker.addr}",
            "ORBITMQ_CELERY_RECORDS": str(self.records),
            "ORBITMQ_CELERY_INVISIBLE": str(invisible),
            "ORBITMQ_CELERY_PREFETCH": str(prefetch),
        }
        w = Worker(name, self.logs / f"{name}.log", env, list(args))
        self.workers.append(w)
        return w.start()


@pytest.fixture(scope="module")
def env(celery_broker: BrokerHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    records = tmp_path_factory.mktemp("records")
    os.environ["ORBITMQ_CELERY_RECORDS"] = str(records)  # the test process reads the same records
    app.conf.broker_url = f"rocketmq://{celery_broker.addr}"
    e = Env(celery_broker, records, tmp_path_factory.mktemp("worker-logs"))
    try:
        for w in (e.worker("w1"), e.worker("w2")):
            w.wait_ready()
        yield e
    finally:
        for w in e.workers:
            w.stop()
        with contextlib.suppress(Exception):  # the rpc backend's reply consumer polls until stopped
            app.backend.result_consumer.stop()
        app.pool.force_close_all()  # app.close() only forgets the pool: its connections would go on polling
        app.close()


def _runs(key: str, what: str = "") -> list[tuple[int, float, str]]:
    return [r for r in celery_app.records(key) if not what or r[2] == what]


@pytest.mark.timeout(120)
def test_delay_get_chain_and_group(env: Env) -> None:
    assert celery_app.add.delay(2, 3).get(timeout=30) == 5
    assert chain(celery_app.add.s(1, 2), celery_app.add.s(3), celery_app.add.s(4))().get(timeout=30) == 10
    assert group(celery_app.add.s(i, i) for i in range(6))().get(timeout=30) == [0, 2, 4, 6, 8, 10]


@pytest.mark.timeout(240)
def test_inspect_ping_answered_by_every_live_worker(env: Env) -> None:
    names = {w.nodename for w in env.workers[:2]}
    replies: dict[str, object] = {}

    def all_answered() -> bool:
        replies.update(app.control.inspect(timeout=2.0).ping() or {})
        return names <= set(replies)

    wait_until(all_answered, 30, "ping replies from both workers", interval=0.1)
    # A broadcast reply that misses its collection window (a loaded machine) is not lost by the transport but late
    # for that call: each call below is repeated until every live worker has answered it, like the ping above.
    queues: dict[str, list[dict[str, object]]] = {}
    stats: dict[str, dict[str, dict[str, object]]] = {}

    def queues_and_stats_answered() -> bool:
        inspect = app.control.inspect(timeout=3.0)
        queues.update(inspect.active_queues() or {})
        stats.update(inspect.stats() or {})
        return names <= set(queues) and names <= set(stats)

    wait_until(queues_and_stats_answered, 60, "active_queues and stats from both workers", interval=0.1)
    assert all("celery" in {q["name"] for q in queues[n]} for n in names)
    assert all(stats[n]["broker"]["transport"] == "rocketmq" for n in names)
    seen = ""

    def cli_ping_answered() -> bool:
        nonlocal seen
        cli = subprocess.run(
            [sys.executable, "-m", "celery", "-A", "tests.celery.celery_app", "inspect", "ping", "-t", "5"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "ORBITMQ_CELERY_BROKER": f"rocketmq://{env.broker.addr}"},
            timeout=60,
        )
        assert cli.returncode == 0 or "No nodes replied" in cli.stdout + cli.stderr, cli.stdout + cli.stderr
        seen += cli.stdout
        return all(name in seen for name in names)

    wait_until(cli_ping_answered, 120, "`celery inspect ping` answered by both workers", interval=0.1)


@pytest.mark.timeout(120)
def test_retry_with_countdown(env: Env) -> None:
    key = "flaky"
    assert celery_app.flaky.delay(key, 1, 1.5).get(timeout=30) == 2
    runs = _runs(key)
    assert len(runs) == 2
    assert runs[1][1] - runs[0][1] >= 1.4  # the retry waited for its countdown on the broker


@pytest.mark.timeout(120)
def test_eta_is_held_by_the_broker_not_the_worker(env: Env) -> None:
    key = "eta"
    sent = time.time()
    result = celery_app.stamp.apply_async((key,), countdown=3)
    time.sleep(1.0)
    inspect = app.control.inspect(timeout=2.0)
    scheduled = inspect.scheduled() or {}
    reserved = inspect.reserved() or {}
    assert scheduled and all(v == [] for v in scheduled.values()), scheduled  # no worker holds the ETA task
    assert all(v == [] for v in reserved.values()), reserved
    started = result.get(timeout=30)
    assert started >= sent + 3 - 0.05
    assert len(_runs(key)) == 1


@pytest.mark.timeout(120)
def test_acks_late_task_longer_than_the_invisible_time_runs_once(env: Env) -> None:
    key = "long-acks-late"
    assert celery_app.slow.delay(key, INVISIBLE_S * 2.5).get(timeout=60) == "done"
    time.sleep(1.0)
    assert [r[2] for r in _runs(key)] == ["start", "end"]


@pytest.mark.timeout(120)
def test_revoked_countdown_task_never_runs(env: Env) -> None:
    key = "revoked"
    result = celery_app.stamp.apply_async((key,), countdown=2)
    result.revoke()
    time.sleep(4.0)
    assert _runs(key) == []
    ok = celery_app.stamp.apply_async((key + "-other",), countdown=0.1)
    ok.get(timeout=30)


@pytest.mark.timeout(150)
def test_sigkilled_worker_task_runs_on_another_worker(env: Env) -> None:
    key = "killed"
    doomed = env.worker("w-doomed", "-Q", "killq").wait_ready()
    result = celery_app.slow.apply_async((key, 2.0), queue="killq")
    wait_until(lambda: bool(_runs(key, "start")), 30, "the task to start", interval=0.05)
    doomed.signal_group(signal.SIGKILL)
    assert doomed.proc is not None
    doomed.proc.wait(10)
    env.worker("w-rescue", "-Q", "killq").wait_ready()
    assert result.get(timeout=60) == "done"
    starts = _runs(key, "start")
    ends = _runs(key, "end")
    assert len(starts) == 2 and len(ends) == 1
    assert ends[0][0] != starts[0][0]


@pytest.mark.timeout(150)
def test_warm_shutdown_returns_prefetched_tasks_at_once(env: Env) -> None:
    key = "warm"
    invisible = 60.0  # far longer than the test: what comes back early was returned by the shutdown
    first = env.worker("w-warm", "-Q", "warmq", "-c", "1", invisible=invisible).wait_ready()
    long = celery_app.slow.apply_async((key, 3.0), queue="warmq")
    wait_until(lambda: bool(_runs(key, "start")), 30, "the long task to start", interval=0.05)
    quick = [celery_app.stamp.apply_async((f"{key}-{i}",), queue="warmq") for i in range(3)]
    time.sleep(1.0)  # the worker has prefetched them behind the long task
    first.stop(signal.SIGTERM, timeout=30)  # warm: the running task finishes, the rest goes back
    assert long.get(timeout=30) == "done"
    stopped = time.time()
    second = env.worker("w-warm2", "-Q", "warmq", invisible=invisible).wait_ready()
    for r in quick:
        assert r.get(timeout=30) >= stopped
    assert time.time() - stopped < invisible
    app.control.shutdown(destination=[second.nodename])  # remote control: the worker stops itself
    assert second.proc is not None
    second.proc.wait(60)


@pytest.mark.timeout(60)
def test_bad_input_is_refused_at_publish(env: Env) -> None:
    with pytest.raises(oms.OMSMessageFormatException, match="limit"):
        celery_app.add.delay("x" * (5 * 1024 * 1024), "y")
    assert celery_app.add.delay(1, 1).get(timeout=30) == 2  # nothing stuck behind it
    bad = Celery("bad", broker=f"rocketmq://{env.broker.addr}")
    bad.conf.broker_transport_options = {"invisble_time": 10}
    with pytest.raises(ValueError, match="unknown option 'invisble_time'"), bad.connection_for_write() as conn:
        conn.connect()


@pytest.mark.timeout(180)
def test_broker_restart_mid_run(env: Env) -> None:
    before = [celery_app.add.delay(i, 1) for i in range(5)]
    assert [r.get(timeout=30) for r in before] == [i + 1 for i in range(5)]
    env.broker.restart()
    after = [celery_app.add.delay(i, 2) for i in range(5)]
    assert [r.get(timeout=90) for r in after] == [i + 2 for i in range(5)]
