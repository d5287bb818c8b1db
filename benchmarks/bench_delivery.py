"""Delivery semantics under load: timer accuracy with 100,000 scheduled messages, and transactional send
throughput (half message + EndTransaction commit), against a real broker process, one client process.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import timestamp_pb2
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from benchmarks.bench_e2e import OPTIONS, QUEUES, Broker
from benchmarks.common import pct
from orbitmq.proto import consume_pb2, consume_pb2_grpc
from orbitmq.record import iter_records

META = (("x-mq-client-id", "bench-delivery"), ("x-mq-language", "PYTHON"))


def _msg(topic: str, kind: int, deliver_ms: int | None = None) -> definition_pb2.Message:
    sp = definition_pb2.SystemProperties(
        message_id=uuid.uuid4().hex.upper(), body_encoding=definition_pb2.IDENTITY, message_type=kind
    )
    sp.born_timestamp.GetCurrentTime()
    if deliver_ms is not None:
        sp.delivery_timestamp.CopyFrom(
            timestamp_pb2.Timestamp(seconds=deliver_ms // 1000, nanos=deliver_ms % 1000 * 10**6)
        )
    return definition_pb2.Message(topic=definition_pb2.Resource(name=topic), body=b"t" * 100, system_properties=sp)


async def bench_timer(addr: str, n: int, lead_s: float, spread_s: float) -> dict[str, Any]:
    """Schedule ``n`` messages at times spread over ``spread_s`` starting ``lead_s`` from now; measure lateness."""
    topic = "BenchTimerT"
    async with grpc.aio.insecure_channel(addr, options=OPTIONS) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        consume = consume_pb2_grpc.ConsumeStub(ch)
        t0_ms = int(time.time() * 1000) + int(lead_s * 1000)
        batch = 500
        send_t0 = time.perf_counter()
        for start in range(0, n, batch):
            msgs = [
                _msg(topic, definition_pb2.DELAY, t0_ms + int((i / n) * spread_s * 1000))
                for i in range(start, min(n, start + batch))
            ]
            resp = await stub.SendMessage(service_pb2.SendMessageRequest(messages=msgs), metadata=META)
            if resp.status.code != definition_pb2.Code.OK:
                raise RuntimeError(resp.status.message)
        send_s = time.perf_counter() - send_t0
        lateness: list[float] = []

        async def drain(qid: int) -> None:
            offset = 0
            deadline = time.monotonic() + lead_s + spread_s + 60
            while len(lateness) < n and time.monotonic() < deadline:
                req = consume_pb2.PullBatchRequest(
                    group="bench-timer",
                    topic=topic,
                    queue_id=qid,
                    offset=offset,
                    max_messages=1024,
                    long_polling_ms=500,
                )
                resp = await consume.PullBatch(req, timeout=10)
                now_ms = time.time() * 1000
                for record in iter_records(resp.records):
                    lateness.append(now_ms - int(record.properties["TIMER_DELIVER_MS"]))
                offset = resp.next_offset or offset

        await asyncio.gather(*(drain(q) for q in range(QUEUES)))
    return {
        "scheduled": n,
        "delivered": len(lateness),
        "schedule_send_s": round(send_s, 2),
        "lateness_ms_p50": round(pct(lateness, 50), 1),
        "lateness_ms_p99": round(pct(lateness, 99), 1),
        "lateness_ms_max": round(max(lateness, default=float("nan")), 1),
        "early": sum(1 for x in lateness if x < -1),  # delivered before its time (1 ms clock slack)
        "within_1s": round(sum(1 for x in lateness if x <= 1000) / max(1, len(lateness)), 4),
    }


async def bench_transactions(addr: str, n: int, concurrency: int) -> dict[str, Any]:
    """Half message then EndTransaction(COMMIT), one message per call, ``concurrency`` in flight."""
    topic = "BenchTxT"
    async with grpc.aio.insecure_channel(addr, options=OPTIONS) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        done = 0

        async def worker() -> None:
            nonlocal done
            while done < n:
                done += 1
                m = _msg(topic, definition_pb2.TRANSACTION)
                resp = await stub.SendMessage(service_pb2.SendMessageRequest(messages=[m]), metadata=META)
                entry = resp.entries[0]
                if resp.status.code != definition_pb2.Code.OK:
                    raise RuntimeError(resp.status.message)
                end = await stub.EndTransaction(
                    service_pb2.EndTransactionRequest(
                        topic=m.topic,
                        message_id=entry.message_id,
                        transaction_id=entry.transaction_id,
                        resolution=definition_pb2.COMMIT,
                        source=definition_pb2.SOURCE_CLIENT,
                    ),
                    metadata=META,
                )
                if end.status.code != definition_pb2.Code.OK:
                    raise RuntimeError(end.status.message)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - t0
    return {"transactions": n, "concurrency": concurrency, "committed_per_s": round(n / elapsed)}


def run(quick: bool = False) -> dict[str, Any]:
    n_timer = 10_000 if quick else 100_000
    n_tx = 1_000 if quick else 10_000
    with tempfile.TemporaryDirectory(prefix="bench-delivery-") as tmp:
        broker = Broker(Path(tmp) / "store")
        try:
            timer = asyncio.run(bench_timer(broker.addr, n_timer, lead_s=15.0 if not quick else 5.0, spread_s=10.0))
            tx = asyncio.run(bench_transactions(broker.addr, n_tx, 32))
        finally:
            broker.stop()
    return {
        "summary": {
            "timer_lateness_ms_p50": timer["lateness_ms_p50"],
            "timer_lateness_ms_p99": timer["lateness_ms_p99"],
            "timer_within_1s": timer["within_1s"],
            "timer_delivered": timer["delivered"],
            "transactions_committed_per_s": tx["committed_per_s"],
        },
        "timer": timer,
        "transactions": tx,
    }
