"""Process life: records pending at exit are delivered by atexit within the deadline, a hung broker does not hold
exit, a forked child logs through a fresh sender, and the client's own DEBUG logs never loop through the handler."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from plugins.logappender import RocketMQHandler
from tests.conftest import BrokerHandle
from tests.logappender.conftest import FAST, read_topic, records_of

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _run(code: str, timeout: float = 60, **env: str) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**{k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}, **env},
    )
    return proc, time.monotonic() - t0


@pytest.mark.timeout(60)
def test_records_pending_at_exit_are_delivered_by_atexit(shared_broker: BrokerHandle) -> None:
    proc, _ = _run(
        f"""
        import logging, time
        from plugins.logappender import RocketMQHandler
        handler = RocketMQHandler("AtExit", namesrv_addr={shared_broker.addr!r}, linger=30, close_timeout=10)
        log = logging.getLogger("exiting")
        log.addHandler(handler)
        for i in range(300):
            log.warning("pending %d", i)
        print("queued", handler.counters().queued, flush=True)
        print("exit at", time.monotonic(), flush=True)
        # no flush, no close: a 30 s linger still holds every record when the interpreter exits
        """
    )
    ended = time.monotonic()
    assert proc.returncode == 0, proc.stderr
    assert "queued 300" in proc.stdout
    exiting = float(proc.stdout.split("exit at")[1].split()[0])
    assert ended - exiting < 10.0  # within close_timeout: the linger did not hold exit
    records = records_of(read_topic(shared_broker.addr, "AtExit", 300))
    assert sorted(r["message"] for r in records) == sorted(f"pending {i}" for i in range(300))


@pytest.mark.timeout(60)
def test_a_broker_that_never_answers_does_not_hold_exit_beyond_the_deadline(silent_port: int) -> None:
    proc, _ = _run(
        f"""
        import logging, time
        from plugins.logappender import RocketMQHandler
        handler = RocketMQHandler("Hung", namesrv_addr="127.0.0.1:{silent_port}", close_timeout=1.0,
                                  send_timeout=30, linger=0)
        log = logging.getLogger("hung")
        log.addHandler(handler)
        for i in range(50):
            log.error("never stored %d", i)
        time.sleep(0.3)  # the first batch is in flight, waiting for an answer that never comes
        print("exiting", time.monotonic(), flush=True)
        """
    )
    ended = time.monotonic()
    assert proc.returncode == 0, proc.stderr
    exiting = float(proc.stdout.split("exiting")[1].split()[0])
    # close_timeout (1 s) for the appender, and the oms client's own goodbye (about 1 s) after it
    assert ended - exiting < 4.0, (ended - exiting, proc.stderr)
    assert "dropped 0 records (queue full" in proc.stderr and "50 (send errors or closed)" in proc.stderr


@pytest.mark.timeout(90)
def test_a_forked_child_logs_through_a_fresh_sender(shared_broker: BrokerHandle) -> None:
    proc, _ = _run(
        f"""
        import logging, os, sys
        from plugins.logappender import RocketMQHandler
        handler = RocketMQHandler("Forked", namesrv_addr={shared_broker.addr!r}, linger=0.005)
        log = logging.getLogger("forking")
        log.setLevel(logging.INFO)
        log.addHandler(handler)
        for i in range(20):
            log.info("parent %d", i)
        assert handler.flush(20)
        pid = os.fork()
        if pid == 0:
            for i in range(30):
                log.info("child %d", i)
            ok = handler.flush(30)
            print("child", os.getpid(), ok, handler.counters(), flush=True)
            sys.exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        for i in range(20, 40):
            log.info("parent %d", i)
        print("parent", os.getpid(), handler.flush(20), "child status", status, flush=True)
        """,
        timeout=80,
        # grpcio's fork handlers crash about one child in three when the client's loop thread is busy at fork
        # time (plain oms, no appender, shows it too); switched off, the child starts clean (docs/logappender.md)
        GRPC_ENABLE_FORK_SUPPORT="false",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "child status 0" in proc.stdout, proc.stdout + proc.stderr
    records = records_of(read_topic(shared_broker.addr, "Forked", 70))
    parent_pid = int(proc.stdout.split("parent ")[1].split()[0])
    child_pid = int(proc.stdout.split("child ")[1].split()[0])
    by_pid: dict[int, list[str]] = {}
    for r in sorted(records, key=lambda r: r["seq"]):
        by_pid.setdefault(r["process"], []).append(r["message"])
    assert sorted(by_pid[parent_pid]) == sorted(f"parent {i}" for i in range(40))
    assert by_pid[child_pid] == [f"child {i}" for i in range(30)]  # the child's own, in its order


@pytest.mark.timeout(60)
def test_client_debug_logs_on_the_root_logger_do_not_loop(shared_broker: BrokerHandle) -> None:
    root = logging.getLogger()
    old_level = root.level
    handler = RocketMQHandler("RootDebug", namesrv_addr=shared_broker.addr, **FAST)
    # the counts below are exact: a third-party library's background thread left by an earlier test (its records
    # reach the root logger too) must not count; the client's own loggers still reach the handler's exclusion
    handler.addFilter(lambda r: r.name.split(".")[0] in {"rootdebug", "oms", "grpc", "plugins"})
    seen: list[str] = []

    class Spy(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.name)

    spy = Spy()
    root.addHandler(handler)
    root.addHandler(spy)
    root.setLevel(logging.DEBUG)
    try:
        app = logging.getLogger("rootdebug.app")
        for i in range(100):
            app.debug("debug %d", i)
        assert handler.flush(20)
        logging.getLogger("oms.client").debug("the client's own record")  # excluded by name
    finally:
        root.removeHandler(handler)
        root.removeHandler(spy)
        root.setLevel(old_level)
        handler.close(5)
    assert any(name.startswith("oms") for name in seen)  # the client did log at DEBUG meanwhile
    c = handler.counters()
    assert (c.accepted, c.sent, c.dropped_overflow, c.dropped_error) == (100, 100, 0, 0)
    records = records_of(read_topic(shared_broker.addr, "RootDebug", 100))
    assert len(records) == 100 and {r["logger"] for r in records} == {"rootdebug.app"}


@pytest.mark.timeout(90)
def test_a_multiprocessing_child_delivers_without_flushing(shared_broker: BrokerHandle) -> None:
    proc, _ = _run(
        f"""
        import logging, multiprocessing, os
        from plugins.logappender import RocketMQHandler
        handler = RocketMQHandler("MpChild", namesrv_addr={shared_broker.addr!r}, linger=30)
        log = logging.getLogger("mp")
        log.setLevel(logging.INFO)
        log.addHandler(handler)
        log.info("parent before")
        assert handler.flush(20)

        def work():
            for i in range(25):
                log.info("mp child %d", i)
            # no flush: multiprocessing ends the child with os._exit, atexit does not run

        if __name__ == "__main__":
            child = multiprocessing.get_context("fork").Process(target=work)
            child.start()
            child.join(60)
            print("child exit", child.exitcode, flush=True)
        """,
        timeout=80,
        GRPC_ENABLE_FORK_SUPPORT="false",
    )
    assert proc.returncode == 0 and "child exit 0" in proc.stdout, proc.stdout + proc.stderr
    records = records_of(read_topic(shared_broker.addr, "MpChild", 26))
    assert sorted(r["message"] for r in records if r["message"].startswith("mp child")) == sorted(
        f"mp child {i}" for i in range(25)
    )
