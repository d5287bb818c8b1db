"""``celery worker`` processes for the tests: each a process group of its own, stopped by PID (with its pool)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from tests.procs import ROOT
from tests.waiting import wait_until


@dataclass
class Worker:
    """``celery worker`` in a session of its own, so its pool children stop with it."""

    name: str
    log_path: Path
    env: dict[str, str]
    args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Worker:
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "tests.celery.celery_app",
            "worker",
            "-n",
            f"{self.name}@%h",
            "-P",
            "prefork",
            "-c",
            "2",
            "--without-mingle",
            "--without-gossip",
            "-l",
            "INFO",
            *self.args,
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child holds it; closed with the process
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **self.env}, cwd=ROOT, start_new_session=True
        )
        log.close()
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_ready(self, timeout: float = 60.0) -> Worker:
        def ready() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker {self.name} exited early:\n{self.log()[-3000:]}")
            return " ready." in self.log()

        wait_until(ready, timeout, f"worker {self.name} ready", interval=0.1)
        return self

    @property
    def nodename(self) -> str:
        return f"{self.name}@{os.uname().nodename}"

    def signal_group(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, sig)  # the main process only: a warm shutdown lets its pool finish the task
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal_group(signal.SIGKILL)
            self.proc.wait(10)
        with contextlib.suppress(ProcessLookupError):  # pool children left behind by a SIGKILLed parent
            os.killpg(self.proc.pid, signal.SIGKILL)
