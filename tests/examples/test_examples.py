"""Every script in ``examples/`` run as a subprocess against a real broker, checked by exit code and output.

The examples run in parallel threads (each has its own topics and groups) so the delay example sets the pace.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import BrokerFactory, BrokerHandle

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
RUN_TIMEOUT = 60.0  # seconds per example run
NAMES = (
    "sync_producer",
    "async_producer",
    "oneway_producer",
    "push_consumer",
    "ordered",
    "delay",
    "batch",
    "sql_filter",
    "transaction",
    "oms_producer",
    "oms_pull_consumer",
    "oms_push_consumer",
)


def run_example(name: str, addr: str, *extra: str, timeout: float = RUN_TIMEOUT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("NAMESRV_ADDR", None)
    return subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), "--addr", addr, *extra],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def example_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerHandle]:
    """One broker for all examples; check-backs start after 1 s so the transaction example is quick."""
    factory = BrokerFactory(tmp_path_factory.mktemp("examples"))
    try:
        yield factory.broker(options={"transactionTimeOut": "1000", "transactionCheckInterval": "300"})
    finally:
        factory.stop_all()


@pytest.fixture(scope="module")
def runs(example_broker: BrokerHandle) -> Iterator[dict[str, Future[subprocess.CompletedProcess[str]]]]:
    """Every example started at once; each test waits for its own."""
    with ThreadPoolExecutor(max_workers=len(NAMES)) as pool:
        futures = {name: pool.submit(run_example, name, example_broker.addr) for name in NAMES}
        yield futures


def finished(runs: dict[str, Future[subprocess.CompletedProcess[str]]], name: str) -> str:
    """The example's stdout, after checking that it exited 0 and printed OK last."""
    proc = runs[name].result(timeout=RUN_TIMEOUT + 10)
    assert proc.returncode == 0, f"{name} exited {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.stdout.splitlines()[-1] == "OK", proc.stdout
    return proc.stdout


def test_every_example_is_tested() -> None:
    scripts = {p.stem for p in EXAMPLES.glob("*.py") if not p.stem.startswith("_") and p.stem != "quickstart"}
    assert scripts == set(NAMES)


@pytest.mark.timeout(90)
def test_sync_producer(runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    out = finished(runs, "sync_producer")
    assert len(re.findall(r"^sent \d+ status=SEND_OK msg_id=\w+", out, re.M)) == 10
    assert "sent 10 messages synchronously" in out


@pytest.mark.timeout(90)
def test_async_producer(runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    out = finished(runs, "async_producer")
    assert sorted(int(i) for i in re.findall(r"^(\d+)\s+OK \w+", out, re.M)) == list(range(10))
    assert "sent 10 messages asynchronously" in out


@pytest.mark.timeout(90)
def test_oneway_producer(runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    out = finished(runs, "oneway_producer")
    assert "broker stored 10 messages" in out


@pytest.mark.timeout(90)
def test_push_consumer(runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    out = finished(runs, "push_consumer")
    run = re.search(r"^sent 10 messages \(run (\w+)\)", out, re.M)
    assert run is not None, out
    got = re.findall(rf"^received '{run.group(1)}:(\d+)' tag=TagA", out, re.M)
    assert sorted(map(int, got)) == list(range(10))


@pytest.mark.timeout(90)
def test_ordered_steps_keep_their_order_per_order_id(runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    out = finished(runs, "ordered")
    consumed: dict[str, list[str]] = {}
    for order_id, step in re.findall(r"^consumed order (\d+) step (\w+)", out, re.M):
        consumed.setdefault(order_id, []).append(step)
    assert consumed == {
        "15103111039": ["create", "pay", "push", "finish"],
        "15103111065": ["create", "pay", "finish"],
        "15103117235": ["create", "pay", "finish"],
    }
    assert "order 15103111039 in order: create -> pay -> push -> finish" in out
    # one order, one queue
    queues: dict[str, set[str]] = {}
    for order_id, queue in re.findall(r"^sent order (\d+) step \w+: SEND_OK queue=(\S+)", out, re.M):
        queues.setdefault(order_id, set()).add(queue)
    assert len(queues) == 3 and all(len(q) == 1 for q in queues.values()), queues


@pytest.mark.timeout(90)
def test_delay_level_3_arrives_about_10s_later(runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    out = finished(runs, "delay")
    assert "with delay level 3" in out
    delay = re.search(r"^delay observed: ([\d.]+)s", out, re.M)
    assert delay is not None, out
    assert 9.0 <= float(delay.group(1)) <= 13.0, out


@pytest.mark.timeout(90)
def test_batch_splitter_sends_a_big_list_in_several_requests(
    runs: dict[str, Future[subprocess.CompletedProcess[str]]],
) -> None:
    out = finished(runs, "batch")
    assert "small batch: 3 messages in one request" in out
    size = re.search(r"^big list: (\d+) messages, (\d+) bytes", out, re.M)
    assert size is not None and int(size.group(2)) > 4 * 1024 * 1024, out
    batches = [(int(n), int(b)) for n, b in re.findall(r"^batch \d+: (\d+) messages, (\d+) bytes, sent", out, re.M)]
    assert len(batches) >= 2, out
    assert sum(n for n, _ in batches) == int(size.group(1))
    assert all(b <= 4 * 1024 * 1024 for _, b in batches)
    assert f"broker stored {3 + int(size.group(1))} messages" in out


@pytest.mark.timeout(90)
def test_sql_filter_gets_only_a_between_0_and_3(runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    out = finished(runs, "sql_filter")
    got = sorted(int(a) for a in re.findall(r"^received '.*' a=(\d+)", out, re.M))
    assert got == [0, 1, 2, 3], out


@pytest.mark.timeout(90)
def test_transaction_unknown_then_resolved_by_check_back(
    runs: dict[str, Future[subprocess.CompletedProcess[str]]],
) -> None:
    out = finished(runs, "transaction")
    assert len(re.findall(r"^local transaction of '.*': unknown", out, re.M)) == 4
    assert len(re.findall(r"^sent half message \d: transaction_id=\w+ resolution=UNKNOWN", out, re.M)) == 4
    assert re.search(r"^waiting for the broker's check-backs: .*transactionCheckInterval", out, re.M)  # not silent
    for i, decision in enumerate(("commit", "rollback", "commit", "rollback")):
        assert f"message {i}: unknown, then {decision} by check-back" in out
    received = sorted(int(i) for i in re.findall(r"^received '\w+:(\d+)'", out, re.M))
    assert received == [0, 2], out


@pytest.mark.timeout(90)
def test_oms_producer(runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    out = finished(runs, "oms_producer")
    assert re.search(r"^send sync message OK, msgId: \w+", out, re.M)
    assert re.search(r"^send async message OK, msgId: \w+", out, re.M)
    assert "send oneway message OK" in out
    assert "broker stored the sync, async and one-way messages" in out


@pytest.mark.timeout(90)
def test_oms_pull_consumer(runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    out = finished(runs, "oms_pull_consumer")
    sent = re.search(r"^send message OK, msgId: (\w+)", out, re.M)
    assert sent is not None, out
    assert f"pulled the message sent, msgId: {sent.group(1)}" in out


@pytest.mark.timeout(90)
def test_oms_push_consumer(runs: dict[str, Future[subprocess.CompletedProcess[str]]]) -> None:
    out = finished(runs, "oms_push_consumer")
    sent = re.search(r"^send message OK, msgId: (\w+)", out, re.M)
    assert sent is not None, out
    assert f"received one message: {sent.group(1)}" in out
    assert "consumed the message sent" in out


@pytest.mark.timeout(60)
def test_an_unreachable_broker_fails_with_a_message(tmp_path: Path) -> None:
    from tests.procs import free_port

    proc = run_example("sync_producer", f"127.0.0.1:{free_port()}", "--timeout", "3", timeout=40)
    assert proc.returncode != 0
    assert "FAILED" in proc.stderr, proc.stderr


def test_namesrv_addr_is_the_default_access_point(broker_factory: BrokerFactory) -> None:
    """Without ``--addr`` the example reads ``NAMESRV_ADDR``."""
    broker = broker_factory.broker()
    env = {**os.environ, "NAMESRV_ADDR": broker.addr}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "sync_producer.py")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "sent 10 messages synchronously" in proc.stdout
