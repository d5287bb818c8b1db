"""``python -m benchmarks.bench_grpc_server``: brokers on grpcServer=h2 and grpcio in alternated rounds: v2 receive +
ack over the stream ceiling and the floor (issue 22), v2 SendMessage x1,024, sequential unary latency, the load."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from benchmarks.bench_e2e import (
    OPTIONS,
    Broker,
    _msg,
    bench_batched_produce,
    bench_receive_ack,
    bench_receive_floor,
    bench_send_batch,
    bench_stream_ceiling,
)
from benchmarks.common import pct, proc_cpu_s, write_result

KINDS = ("h2", "grpcio")
RECEIVE_TOPIC = "BenchServerReceiveT"


async def unary_latency(addr: str, n: int) -> dict[str, Any]:
    """``n`` sequential one-message SendMessage calls from one grpc.aio client: per-call latency."""
    topic = "BenchServerLatT"
    async with grpc.aio.insecure_channel(addr, options=OPTIONS) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        request = service_pb2.SendMessageRequest(messages=[_msg(topic, 1)])
        for _ in range(50):  # warm-up: route, topic creation, the channel's connection
            await stub.SendMessage(request, timeout=10)
        lat = []
        for _ in range(n):
            started = time.perf_counter()
            response = await stub.SendMessage(request, timeout=10)
            lat.append((time.perf_counter() - started) * 1000)
            if response.status.code != definition_pb2.Code.OK:
                raise RuntimeError(response.status.message)
    return {"calls": n, "ms_p50": round(pct(lat, 50), 3), "ms_p99": round(pct(lat, 99), 3)}


def run(n: int, rounds: int, sends: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-grpc-server-") as tmp:
        brokers: dict[str, Broker] = {}
        try:
            for kind in KINDS:
                (Path(tmp) / kind).mkdir()
                brokers[kind] = Broker(Path(tmp) / kind / "store", {"grpcServer": kind})
                asyncio.run(bench_send_batch(brokers[kind].addr, RECEIVE_TOPIC, n, 1024, 4))
            runs: list[dict[str, Any]] = []
            for r in range(rounds):
                order = KINDS if r % 2 == 0 else KINDS[::-1]
                entry: dict[str, Any] = {"round": r, "order": list(order), "loadavg_1m_before": os.getloadavg()[0]}
                for kind in order:
                    broker = brokers[kind]
                    cpu0 = proc_cpu_s(broker.proc.pid)
                    drained = asyncio.run(bench_receive_ack(broker.addr, RECEIVE_TOPIC, 32, 4, f"bench-server-{r}"))
                    cpu = (proc_cpu_s(broker.proc.pid) - cpu0) / drained["messages"] * 1e6
                    entry[f"{kind}_receive_msgs_per_s"] = drained["msgs_per_s"]
                    entry[f"{kind}_receive_cpu_us_per_msg"] = round(cpu, 1)
                floor = bench_receive_floor(n)
                ceiling = bench_stream_ceiling(n)
                entry["floor_msgs_per_s"] = floor["msgs_per_s"]
                entry["ceiling_msgs_per_s"] = ceiling["msgs_per_s"]
                for kind in KINDS:
                    rate = entry[f"{kind}_receive_msgs_per_s"]
                    entry[f"{kind}_over_ceiling"] = round(rate / ceiling["msgs_per_s"], 3)
                    entry[f"{kind}_over_floor"] = round(rate / floor["msgs_per_s"], 3)
                entry["h2_over_grpcio_receive"] = round(
                    entry["h2_receive_msgs_per_s"] / entry["grpcio_receive_msgs_per_s"], 3
                )
                for kind in order:
                    addr = brokers[kind].addr
                    sent = asyncio.run(bench_batched_produce(addr, f"BenchServerSendT{r}", sends, 1024, 4))
                    entry[f"{kind}_send_1024_msgs_per_s"] = sent["msgs_per_s"]
                entry["h2_over_grpcio_send"] = round(
                    entry["h2_send_1024_msgs_per_s"] / entry["grpcio_send_1024_msgs_per_s"], 3
                )
                for kind in order:
                    latency = asyncio.run(unary_latency(brokers[kind].addr, 1000))
                    entry[f"{kind}_unary_ms_p50"] = latency["ms_p50"]
                    entry[f"{kind}_unary_ms_p99"] = latency["ms_p99"]
                entry["loadavg_1m_after"] = os.getloadavg()[0]
                runs.append(entry)
                print(json.dumps(entry), flush=True)
        finally:
            for broker in brokers.values():
                broker.stop()
    numeric = [k for k, v in runs[0].items() if isinstance(v, int | float) and k != "round"]
    summary = {key: statistics.median(run[key] for run in runs) for key in numeric}
    return {"summary": summary, "runs": runs, "messages_per_round": n, "send_messages_per_round": sends}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=4)
    p.add_argument("--messages", type=int, default=30_000)
    p.add_argument("--sends", type=int, default=102_400)
    args = p.parse_args(argv)
    result = run(args.messages, args.rounds, args.sends)
    path = write_result("grpc-server", result)
    print(json.dumps(result["summary"], indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
