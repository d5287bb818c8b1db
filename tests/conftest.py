"""Shared fixtures: real ``mqnamesrv``/``mqbroker`` processes on 127.0.0.1 with free ports and tmp stores.

``broker_factory`` starts a name server and/or brokers; everything it started is stopped by PID at teardown.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.procs import ServerProcess, free_port

# Tests using these fixtures start server processes: they are marked ``integration`` at collection.
PROCESS_FIXTURES = frozenset({"broker_factory", "broker", "shared_broker"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


def _refuse_processes(item: pytest.Item) -> pytest.MonkeyPatch:
    patch = pytest.MonkeyPatch()

    def refuse(self: ServerProcess) -> ServerProcess:
        raise RuntimeError(f"{item.nodeid} starts {self.args[:3]}: mark it @pytest.mark.integration")

    patch.setattr(ServerProcess, "start", refuse)
    return patch


def _guarded(item: pytest.Item) -> Iterator[None]:
    """Run a test phase; without the ``integration`` marker, ``ServerProcess.start`` is refused during it."""
    if item.get_closest_marker("integration") is not None:
        return (yield)
    patch = _refuse_processes(item)
    try:
        return (yield)
    finally:
        patch.undo()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """A test (or a fixture it sets up, module-scoped ones too) that starts a server without the ``integration``
    marker fails, so ``pytest -m "not integration"`` stays a fast loop without processes."""
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    return (yield from _guarded(item))


# Small segments and short intervals keep tests fast; any key can be overridden per broker.
FAST_BROKER_OPTIONS: dict[str, str] = {
    "mappedFileSizeCommitLog": str(4 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": str(20 * 10_000),
    "flushIntervalCommitLog": "100",
    "flushIntervalConsumeQueue": "200",
    "flushConsumerOffsetInterval": "500",
    "registerBrokerIntervalMs": "1000",
    "statsIntervalMs": "5000",
    "warmMapedFileEnable": "false",
    "maxHashSlotNum": "10000",
    "maxIndexNum": "40000",
}


@dataclass
class NamesrvHandle:
    port: int
    process: ServerProcess

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        return self.process.stop(sig)


@dataclass
class BrokerHandle:
    """A broker process; ``restart()`` reuses its store and port (durability tests)."""

    name: str
    port: int
    store: Path
    args: list[str]
    log_path: Path
    process: ServerProcess
    options: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        return self.process.stop(sig)

    def kill(self) -> None:
        self.process.stop(signal.SIGKILL)

    def start(self, timeout: float = 30.0) -> BrokerHandle:
        self.process = ServerProcess(list(self.args), self.log_path, env=self.env).start()
        self.process.wait_port(self.port, timeout)
        return self

    def restart(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> BrokerHandle:
        self.stop(sig)
        return self.start(timeout)

    def log(self) -> str:
        return self.process.log()


class BrokerFactory:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self._processes: list[ServerProcess] = []
        self._brokers: list[BrokerHandle] = []
        self._count = 0

    def namesrv(self, broker_expired_seconds: float | None = None, timeout: float = 30.0) -> NamesrvHandle:
        self._count += 1
        port = free_port()
        args = [sys.executable, "-m", "namesrv.cli", "-p", str(port), "--host", "127.0.0.1"]
        if broker_expired_seconds is not None:
            args += ["--broker-expired-seconds", str(broker_expired_seconds)]
        proc = ServerProcess(args, self.tmp_path / f"namesrv-{self._count}.log").start()
        self._processes.append(proc)
        proc.wait_port(port, timeout)
        return NamesrvHandle(port, proc)

    def broker(
        self,
        namesrv: str | list[NamesrvHandle] | NamesrvHandle | None = None,
        *,
        name: str | None = None,
        cluster: str = "DefaultCluster",
        options: dict[str, str] | None = None,
        store: Path | None = None,
        timeout: float = 30.0,
        env: dict[str, str] | None = None,
    ) -> BrokerHandle:
        """Start ``mqbroker`` on a free port; ``namesrv`` None means a broker without name server."""
        self._count += 1
        name = name or f"broker-{self._count}"
        port = free_port()
        store = store or self.tmp_path / f"store-{name}"
        opts = {**FAST_BROKER_OPTIONS, "brokerName": name, "brokerClusterName": cluster, **(options or {})}
        args = [sys.executable, "-m", "broker.cli", "--store", str(store), "--port", str(port)]
        if isinstance(namesrv, NamesrvHandle):
            args += ["-n", namesrv.addr]
        elif isinstance(namesrv, list):
            args += ["-n", ";".join(n.addr for n in namesrv)]
        elif isinstance(namesrv, str):
            args += ["-n", namesrv]
        for key, value in opts.items():
            args += ["-o", f"{key}={value}"]
        log_path = self.tmp_path / f"{name}.log"
        proc = ServerProcess(args, log_path, env=env or {})
        handle = BrokerHandle(name, port, store, args, log_path, proc, opts, env or {})
        self._brokers.append(handle)
        handle.start(timeout)
        return handle

    def stop_all(self) -> None:
        for broker in reversed(self._brokers):
            broker.stop()
        for proc in reversed(self._processes):
            proc.stop()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(tmp_path)
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.fixture
def broker(broker_factory: BrokerFactory) -> BrokerHandle:
    """One standalone broker (no name server): QueryRoute answers with its own queues."""
    return broker_factory.broker()
