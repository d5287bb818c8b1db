"""Helpers for tests that start real server processes on 127.0.0.1: free ports, start, wait, stop by PID."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.waiting import wait_until as _wait_until  # tests import it from tests.waiting

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


class _PortPool:
    """The ports handed out in this test process. The kernel may give a port it just gave again once its probe
    socket is closed: ``ns_port, port = free_port(), free_port()`` once got one port twice, and the broker could
    not listen (the name server had it). A port is handed out once per run."""

    def __init__(self) -> None:
        self._given: set[int] = set()
        self._lock = threading.Lock()

    def take(self) -> int:
        with self._lock:
            while True:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.bind(("127.0.0.1", 0))
                    port = int(s.getsockname()[1])
                if port not in self._given:
                    self._given.add(port)
                    return port


_PORTS = _PortPool()


def free_port() -> int:
    """A port free on 127.0.0.1 now and not handed out before in this run."""
    return _PORTS.take()


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


@dataclass
class ServerProcess:
    """A child process started by a test; always stopped by PID, SIGKILL as the last resort."""

    args: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> ServerProcess:
        env = {**os.environ, **self.env}
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_port(self, port: int, timeout: float = 30.0, host: str = "127.0.0.1") -> None:
        def ready() -> bool:
            if not self.alive():
                raise RuntimeError(f"{self.args[0]} exited early:\n{self.log()}")
            return port_open(port, host)

        _wait_until(ready, timeout, what=f"port {port} of {self.args}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=timeout)
        with contextlib.suppress(Exception):
            self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        self.stop(signal.SIGKILL)


@contextlib.contextmanager
def running(
    args: Sequence[str],
    log_path: Path,
    port: int | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> Iterator[ServerProcess]:
    server = ServerProcess(list(args), log_path, env=env or {}).start()
    try:
        if port is not None:
            server.wait_port(port, timeout)
        yield server
    finally:
        server.stop()
