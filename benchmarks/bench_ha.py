"""Replication benchmark: batched produce on a single broker, an ASYNC_MASTER and a SYNC_MASTER (each with one slave)
in the same run, and the slave's lag under that load (sampled from the master's BrokerRuntimeInfo).

``python -m benchmarks.run_all ha`` (or ``python -m benchmarks.bench_ha [--quick]``); starts its own brokers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from benchmarks.bench_e2e import Broker, _free_port, bench_batched_produce
from benchmarks.common import median, pct, write_result
from orbitmq.proto import admin_pb2, admin_pb2_grpc

BATCH = 256
CONCURRENCY = 4


async def _sample_lag(addr: str, stop: asyncio.Event, samples: list[int]) -> None:
    async with grpc.aio.insecure_channel(addr) as ch:
        stub = admin_pb2_grpc.AdminStub(ch)
        while not stop.is_set():
            info = (await stub.BrokerRuntimeInfo(admin_pb2.BrokerRuntimeInfoRequest(), timeout=5)).info
            lag = int(info.get("haSlaveLagBytes", "-1"))
            if lag >= 0:
                samples.append(lag)
            await asyncio.sleep(0.1)


async def _produce_with_lag(addr: str, topic: str, total: int, replicated: bool) -> dict[str, Any]:
    stop = asyncio.Event()
    samples: list[int] = []
    sampler = asyncio.create_task(_sample_lag(addr, stop, samples)) if replicated else None
    try:
        result = await bench_batched_produce(addr, topic, total, BATCH, CONCURRENCY)
    finally:
        stop.set()
        if sampler is not None:
            await sampler
    if replicated:
        result["slave_lag_bytes_p50"] = median([float(s) for s in samples])
        result["slave_lag_bytes_max"] = max(samples, default=-1)
        result["slave_lag_bytes_p99"] = pct([float(s) for s in samples], 99)
    return result


def _run_case(tmp: Path, role: str | None, total: int) -> dict[str, Any]:
    """One broker group: ``role`` None = a single broker without slave; else a master of that role and a slave."""
    ha_port = _free_port()
    case = role or "SINGLE"
    for side in ("master", "slave"):
        (tmp / f"{case}-{side}").mkdir(parents=True)
    master_options = {"brokerRole": role or "ASYNC_MASTER", "haListenPort": str(ha_port)}
    master = Broker(tmp / f"{case}-master" / "store", master_options)
    slave = None
    try:
        if role is not None:
            slave = Broker(
                tmp / f"{case}-slave" / "store",
                {"brokerRole": "SLAVE", "brokerId": "1", "haMasterAddress": f"127.0.0.1:{ha_port}"},
            )
            time.sleep(1.0)  # the slave connects and reports its offset
        result = asyncio.run(_produce_with_lag(master.addr, f"BenchHa{case}", total, role is not None))
        result["role"] = case
        return result
    finally:
        if slave is not None:
            slave.stop()
        master.stop()


def run(quick: bool = False) -> dict[str, Any]:
    total = 20_000 if quick else 200_000
    rounds = 1 if quick else 2
    cases: dict[str, list[dict[str, Any]]] = {"SINGLE": [], "ASYNC_MASTER": [], "SYNC_MASTER": []}
    with tempfile.TemporaryDirectory(prefix="bench-ha-") as tmp:
        for r in range(rounds):  # alternate the cases so machine load drifts hit all of them alike
            for role in (None, "ASYNC_MASTER", "SYNC_MASTER"):
                result = _run_case(Path(tmp) / f"round{r}", role, total)
                cases[result["role"]].append(result)
    best = {case: max(results, key=lambda x: x["msgs_per_s"]) for case, results in cases.items()}
    single = best["SINGLE"]["msgs_per_s"]
    summary = {
        "single_msgs_per_s": single,
        "async_master_msgs_per_s": best["ASYNC_MASTER"]["msgs_per_s"],
        "sync_master_msgs_per_s": best["SYNC_MASTER"]["msgs_per_s"],
        "async_master_vs_single": round(best["ASYNC_MASTER"]["msgs_per_s"] / single, 2),
        "sync_master_vs_single": round(best["SYNC_MASTER"]["msgs_per_s"] / single, 2),
        "async_slave_lag_bytes_max": best["ASYNC_MASTER"]["slave_lag_bytes_max"],
        "sync_slave_lag_bytes_max": best["SYNC_MASTER"]["slave_lag_bytes_max"],
        "batch": BATCH,
        "concurrency": CONCURRENCY,
        "targets": {"sync_master_vs_single": 0.7},
    }
    return {"summary": summary, "cases": cases}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    out = run(parser.parse_args().quick)
    print(json.dumps(out["summary"], indent=2))
    print(f"wrote {write_result('ha', out)}")
