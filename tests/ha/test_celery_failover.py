"""Celery through an automatic failover: a worker and a publisher given only the name server keep going when the
SYNC_MASTER holding their queue is SIGKILLed and etcd makes its slave the master; every task whose publish was
acknowledged runs (at least once: tasks delivered but not acked on the dead master may run again)."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator

import pytest
from celery import Celery

from oms.client.routes import ROUTE_REFRESH_S
from tests.celery import celery_app
from tests.celery.workers import Worker
from tests.ha.etcd import EtcdHandle
from tests.ha.test_failover import is_master, start_controller_namesrv, start_synced_pair
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

STAMP = "tests.celery.celery_app.stamp"
INVISIBLE_S = 10.0  # the broker's default receive minimum: these brokers keep their defaults


@pytest.fixture
def records(tmp_path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    folder = tmp_path / "records"
    folder.mkdir()
    monkeypatch.setenv("ORBITMQ_CELERY_RECORDS", str(folder))  # celery_app.records() reads the same folder
    yield str(folder)


def _publish(app: Celery, key: str, deadline: float) -> bool:
    """Send one stamp task, trying again while the group has no master (a failover under way); whether the broker
    acknowledged it before ``deadline``."""
    while time.monotonic() < deadline:
        try:
            app.send_task(STAMP, args=(key,), retry=False)
            return True
        except Exception:  # kombu and the transport raise their own types while the master is gone: try again
            time.sleep(0.2)
    return False


@pytest.mark.timeout(300)
def test_worker_and_publisher_follow_the_new_master(broker_factory, etcd: EtcdHandle, records: str) -> None:
    ns = start_controller_namesrv(broker_factory.tmp_path, etcd)
    worker: Worker | None = None
    app = Celery("failover_publisher", broker=f"rocketmq://{ns.addr}")
    app.conf.update(
        task_default_queue="celery",
        broker_transport_options={"invisible_time": INVISIBLE_S, "polling_timeout": 2.0, "binding_cache": 0.2},
    )
    try:
        old, new = start_synced_pair(broker_factory, ns, etcd, "FoCelery", "fo-celery")
        worker_started = time.time()
        worker = Worker(
            "fo",
            broker_factory.tmp_path / "worker-fo.log",
            {
                "ORBITMQ_CELERY_BROKER": f"rocketmq://{ns.addr}",
                "ORBITMQ_CELERY_RECORDS": records,
                "ORBITMQ_CELERY_INVISIBLE": str(INVISIBLE_S),
            },
        ).start()
        worker.wait_ready()

        before = [f"before-{i}" for i in range(3)]
        for key in before:
            assert _publish(app, key, time.monotonic() + 30), f"{key} not acknowledged with a healthy master"
        wait_until(
            lambda: all(celery_app.records(k) for k in before), 60, what="the tasks sent before the failover to run"
        )
        time.sleep(1.0)  # the slave has fetched the queue's topic (its bindings) and the consumer offsets by now

        old.process.stop(signal.SIGKILL)
        deadline = time.monotonic() + 90
        after = [f"after-{i}" for i in range(10)]
        acknowledged = [key for key in after if _publish(app, key, deadline)]
        assert acknowledged, "no publish was acknowledged after the failover"
        assert is_master(new), new.log()[-3000:]

        def ran() -> list[str]:
            return [k for k in acknowledged if not celery_app.records(k)]

        wait_until(lambda: not ran(), 120, what="every acknowledged task to run on the new master")
        # The worker asks for the route again when its receives fail: the tasks ran before its clients' periodic
        # route refresh (ROUTE_REFRESH_S after they started, later than the process start) could have found the
        # new master.
        last_run = max(min(at for _, at, _ in celery_app.records(k)) for k in acknowledged)  # first runs
        assert last_run < worker_started + ROUTE_REFRESH_S, (
            f"the last task ran {last_run - worker_started:.1f}s after the worker started: the worker found the new "
            f"master only at its periodic route refresh"
        )
        assert all(celery_app.records(k) for k in before)  # nothing that ran is lost from the records either
        assert worker.proc is not None and worker.proc.poll() is None, "the worker exited during the failover"
    finally:
        if worker is not None:
            worker.stop()
        app.pool.force_close_all()
        app.close()
        ns.process.stop()
