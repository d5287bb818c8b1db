"""A name server and a broker, both with remoting listeners, for the ali-ons tests; and the Node driver runner."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import oms
from tests.conftest import BrokerFactory, BrokerHandle, NamesrvHandle
from tests.procs import ROOT, ServerProcess, free_port
from tests.waiting import wait_until

DRIVER = Path(__file__).with_name("ali_ons_driver.js")
NODE_CLIENTS = ROOT / ".cache" / "node-clients"


@dataclass
class Stack:
    ns: NamesrvHandle
    remoting_ns: str  # "127.0.0.1:<name server remoting port>", what ali-ons is given
    broker: BrokerHandle

    @property
    def broker_port(self) -> int:
        return int(self.broker.options["remotingListenPort"])


def remoting_broker(factory: BrokerFactory, options: dict[str, str] | None = None, **kwargs: Any) -> BrokerHandle:
    """A broker with a remoting listener on a free port (``options["remotingListenPort"]``), returned once that
    listener accepts connections (the broker's start waits for its gRPC port only)."""
    port = free_port()
    broker = factory.broker(options={**(options or {}), "remotingListenPort": str(port)}, **kwargs)
    broker.process.wait_port(port)
    return broker


def find_node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail("node is required for the remoting interop tests (Node 20 is part of the machine)")
    subprocess.run(["bash", str(ROOT / "scripts" / "install_node_clients.sh")], check=True, timeout=600)
    return found


@contextmanager
def remoting_stack(
    tmp: Path, options: dict[str, str], *, name: str = "remoting-a", credentials: tuple[str, str] | None = None
) -> Iterator[Stack]:
    """``credentials``: the account ``oms`` uses to see the broker register (an ACL broker)."""
    factory = BrokerFactory(tmp)
    try:
        port, remoting = free_port(), free_port()
        conf = tmp / "namesrv.conf"
        conf.write_text(f"remotingListenPort={remoting}\n")
        args = [sys.executable, "-m", "namesrv.cli", "-p", str(port), "--host", "127.0.0.1", "-c", str(conf)]
        proc = ServerProcess(args, tmp / "namesrv.log").start()
        try:
            proc.wait_port(port)
            proc.wait_port(remoting)
            ns = NamesrvHandle(port, proc)
            broker = factory.broker(ns, name=name, options={"remotingListenPort": str(free_port()), **options})
            ak, sk = credentials or (None, None)
            with (
                oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/", access_key=ak, secret_key=sk) as ap,
                ap.resource_manager() as rm,
            ):
                wait_until(lambda: len(rm.cluster_list()) == 1, 20, what="the broker registered")
            yield Stack(ns, f"127.0.0.1:{remoting}", broker)
        finally:
            proc.stop()
    finally:
        factory.stop_all()


class DriverProcess:
    """The ali-ons driver running in the background: its JSON lines as they come (a reader thread), stopped by PID."""

    def __init__(self, node: str, *args: str) -> None:
        self.proc = subprocess.Popen(
            [node, str(DRIVER), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={"NODE_PATH": str(NODE_CLIENTS / "node_modules"), "PATH": "/usr/bin:/bin:/usr/local/bin"},
        )
        self.rows: list[dict[str, object]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.rows.append(json.loads(line))

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self._reader.join(timeout)
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stderr(self) -> str:
        return self.proc.stderr.read() if self.proc.stderr is not None and self.proc.poll() is not None else ""


def drive(
    node: str, *args: str, timeout: float = 90, verbose: bool = False, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the ali-ons driver; ``env`` adds ALI_ONS_AK / ALI_ONS_SK (the credentials it signs with)."""
    done = subprocess.run(
        [node, str(DRIVER), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={
            "NODE_PATH": str(NODE_CLIENTS / "node_modules"),
            "PATH": "/usr/bin:/bin:/usr/local/bin",
            **({"ALI_ONS_VERBOSE": "1"} if verbose else {}),
            **(env or {}),
        },
    )
    if verbose:
        print(done.stderr[-6000:], file=sys.stderr)
    return done


def run_driver(
    node: str, *args: str, timeout: float = 90, verbose: bool = False, env: dict[str, str] | None = None
) -> list[dict[str, object]]:
    """The driver's JSON lines; it must succeed."""
    done = drive(node, *args, timeout=timeout, verbose=verbose, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
