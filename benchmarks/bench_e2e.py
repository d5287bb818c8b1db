"""End-to-end broker benchmark: produce (official client, raw batched gRPC), PullMessage consume, latency.

``python -m benchmarks.run_all e2e`` (or ``python -m benchmarks.bench_e2e [--quick]``); starts its own broker.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import select
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Sequence
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import duration_pb2
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from benchmarks import bench_peers
from benchmarks.common import (
    LATENCY_TICK_MS,
    busiest_thread,
    latency_ms,
    paced_sends,
    paced_total,
    pct,
    proc_cpu_s,
    stamped_body,
    threads_cpu_s,
    write_result,
)
from oms.client.frames import FrameChannel
from orbitmq.message_batch import BatchEntry, encode_message_batch
from orbitmq.message_const import PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX as UNIQ_KEY
from orbitmq.proto import (
    admin_pb2,
    admin_pb2_grpc,
    consume_pb2,
    consume_pb2_grpc,
    pop_pb2,
    pop_pb2_grpc,
    produce_pb2,
    produce_pb2_grpc,
    transport_pb2,
    transport_pb2_grpc,
)
from orbitmq.record import iter_records
from orbitmq.route import QUEUE_TYPE_ATTRIBUTE, CQType

ROOT = Path(__file__).resolve().parent.parent
BODY_SIZE = 100
QUEUES = 4
BROKER_OPTIONS = {
    "mappedFileSizeCommitLog": str(256 * 1024 * 1024),
    "statsIntervalMs": "600000",
    # warmMapedFileEnable stays at its default (on), as a user runs it: since the warm-up reads the segment with
    # os.preadv (GIL released) it no longer stalls sends; off, every first write to a page of the segment faults it
    # in on the event loop (4.5 ms of CPU per 2 MB append on average, against 0.34 warm; docs/storage.md).
}
OPTIONS = [("grpc.max_send_message_length", 64 << 20), ("grpc.max_receive_message_length", 64 << 20)]


@contextlib.asynccontextmanager
async def unary_channel(addr: str, transport: str = "grpc") -> AsyncIterator[Any]:
    """A channel for unary stubs: gRPC, or the broker's frame transport (``frames``, what oms uses by default)."""
    async with grpc.aio.insecure_channel(addr, options=OPTIONS) as ch:
        if transport == "grpc":
            yield ch
            return
        answer = await transport_pb2_grpc.TransportsStub(ch).Describe(transport_pb2.DescribeTransportsRequest())
        host, _, port = answer.frames_addr.rpartition(":")
        frames = FrameChannel(host, int(port))
        try:
            yield frames
        finally:
            await frames.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    """A broker subprocess with its own tmp store, stopped by PID."""

    def __init__(self, store: Path, options: dict[str, str] | None = None) -> None:
        self.port = _free_port()
        args = [
            sys.executable, "-m", "broker.cli", "--store", str(store), "--port", str(self.port),
            "--log-level", "WARNING",
        ]  # fmt: skip
        for key, value in {**BROKER_OPTIONS, **(options or {})}.items():
            args += ["-o", f"{key}={value}"]
        self.log = open(store.parent / "broker.log", "wb")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if self.proc.poll() is not None:
                raise RuntimeError("broker exited early")
            time.sleep(0.1)
        raise TimeoutError("broker did not open its port")

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(20)
        self.log.close()


def _msg(topic: str, i: int, body: bytes | None = None) -> definition_pb2.Message:
    sp = definition_pb2.SystemProperties(
        message_id=f"01BENCH{i:027X}", body_encoding=definition_pb2.IDENTITY, message_type=definition_pb2.NORMAL
    )
    return definition_pb2.Message(
        topic=definition_pb2.Resource(name=topic), body=body or b"x" * BODY_SIZE, system_properties=sp
    )


OFFICIAL_REQUEST_TIMEOUT_S = 30


def bench_official_producer(addr: str, n: int) -> dict[str, Any]:
    from rocketmq import ClientConfiguration, Credentials, Message, Producer

    topic = "BenchOfficialT"
    # all n async sends are queued at once: with the client's 3 s default, the last ones timed out (CANCELLED) on
    # a loaded 2-core VM and ended the whole run
    producer = Producer(ClientConfiguration(addr, Credentials(), request_timeout=OFFICIAL_REQUEST_TIMEOUT_S), (topic,))
    producer.startup()
    try:
        msg = Message()
        msg.topic, msg.body = topic, b"x" * BODY_SIZE
        producer.send(msg)  # warm-up
        lat = []
        t0 = time.perf_counter()
        for _ in range(n):
            s = time.perf_counter()
            producer.send(msg)
            lat.append((time.perf_counter() - s) * 1000)
        sync_elapsed = time.perf_counter() - t0
        t0 = time.perf_counter()
        futures = [producer.send_async(msg) for _ in range(n)]
        for f in futures:
            f.result(timeout=60)
        async_elapsed = time.perf_counter() - t0
    finally:
        producer.shutdown()
    return {
        "messages": n,
        "sync_msgs_per_s": round(n / sync_elapsed),
        "sync_latency_ms_p50": round(pct(lat, 50), 3),
        "sync_latency_ms_p99": round(pct(lat, 99), 3),
        "async_msgs_per_s": round(n / async_elapsed),
    }


async def bench_batched_produce(addr: str, topic: str, total: int, batch: int, concurrency: int) -> dict[str, Any]:
    async with grpc.aio.insecure_channel(addr, options=OPTIONS) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        requests = [
            service_pb2.SendMessageRequest(messages=[_msg(topic, k * batch + i) for i in range(batch)])
            for k in range(8)
        ]
        assert (await stub.SendMessage(requests[0])).status.code == definition_pb2.Code.OK
        rounds = total // batch
        done = 0

        async def worker(w: int) -> None:
            nonlocal done
            k = w
            while True:
                if done >= rounds:
                    return
                done += 1
                resp = await stub.SendMessage(requests[k % len(requests)])
                if resp.status.code != definition_pb2.Code.OK:
                    raise RuntimeError(resp.status.message)
                k += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        elapsed = time.perf_counter() - t0
    sent = rounds * batch
    return {
        "messages": sent,
        "batch": batch,
        "concurrency": concurrency,
        "msgs_per_s": round(sent / elapsed),
        "mb_per_s": round(sent * BODY_SIZE / elapsed / 1e6, 1),
    }


async def bench_send_batch(
    addr: str, topic: str, total: int, batch: int, concurrency: int, transport: str = "grpc"
) -> dict[str, Any]:
    """``Produce/SendBatch``: the same 100-byte messages (id, no tag) as one MessageBatch payload per request."""
    async with unary_channel(addr, transport) as ch:
        stub = produce_pb2_grpc.ProduceStub(ch)
        body = b"x" * BODY_SIZE
        requests = [
            produce_pb2.SendBatchRequest(
                topic=topic,
                queue_id=-1,
                count=batch,
                messages=encode_message_batch(
                    BatchEntry(0, body, {UNIQ_KEY: f"01BATCH{k * batch + i:027X}"}) for i in range(batch)
                ),
            )
            for k in range(8)
        ]
        first = await stub.SendBatch(requests[0])
        assert first.status.code == definition_pb2.Code.OK, first.status
        rounds = total // batch
        done = 0

        async def worker(w: int) -> None:
            nonlocal done
            k = w
            while done < rounds:
                done += 1
                resp = await stub.SendBatch(requests[k % len(requests)])
                if resp.status.code != definition_pb2.Code.OK:
                    raise RuntimeError(resp.status.message)
                k += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(concurrency)))
        elapsed = time.perf_counter() - t0
    sent = rounds * batch
    return {
        "rpc": "Produce/SendBatch",
        "transport": transport,
        "messages": sent,
        "batch": batch,
        "concurrency": concurrency,
        "msgs_per_s": round(sent / elapsed),
        "mb_per_s": round(sent * BODY_SIZE / elapsed / 1e6, 1),
    }


def create_batch_topic(addr: str, topic: str) -> None:
    """A topic with ``queue.type=BatchCQ``: each SendBatch becomes one inner-batch record (RocketMQ 5)."""
    config = admin_pb2.TopicConfig(
        topic_name=topic,
        read_queue_nums=QUEUES,
        write_queue_nums=QUEUES,
        perm=6,
        attributes={QUEUE_TYPE_ATTRIBUTE: CQType.BATCH.value},
    )
    with grpc.insecure_channel(addr) as ch:
        resp = admin_pb2_grpc.AdminStub(ch).CreateOrUpdateTopic(
            admin_pb2.CreateOrUpdateTopicRequest(config=config), timeout=30
        )
    if resp.status.code != definition_pb2.Code.OK:
        raise RuntimeError(resp.status.message)


async def bench_pull(addr: str, topic: str, batch: int) -> dict[str, Any]:
    async with grpc.aio.insecure_channel(addr, options=OPTIONS) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        counts = [0] * QUEUES

        async def drain(qid: int) -> None:
            offset = 0
            while True:
                req = service_pb2.PullMessageRequest(
                    group=definition_pb2.Resource(name="bench-pull"),
                    message_queue=definition_pb2.MessageQueue(topic=definition_pb2.Resource(name=topic), id=qid),
                    offset=offset,
                    batch_size=batch,
                )
                got, next_offset = 0, offset
                async for resp in stub.PullMessage(req):
                    kind = resp.WhichOneof("content")
                    if kind == "message":
                        got += 1
                    elif kind == "next_offset":
                        next_offset = resp.next_offset
                if got == 0:
                    return
                counts[qid] += got
                offset = next_offset

        t0 = time.perf_counter()
        await asyncio.gather(*(drain(q) for q in range(QUEUES)))
        elapsed = time.perf_counter() - t0
    total = sum(counts)
    return {"messages": total, "batch": batch, "msgs_per_s": round(total / elapsed)}


async def bench_pull_batch(addr: str, topic: str, batch: int, transport: str = "grpc") -> dict[str, Any]:
    """Drain every queue with ``Consume/PullBatch``; the client decodes each record (body, topic, properties)."""
    async with unary_channel(addr, transport) as ch:
        stub = consume_pb2_grpc.ConsumeStub(ch)
        counts = [0] * QUEUES
        body_bytes = [0]

        async def drain(qid: int) -> None:
            offset = 0
            while True:
                req = consume_pb2.PullBatchRequest(
                    group="bench-pull-batch", topic=topic, queue_id=qid, offset=offset, max_messages=batch
                )
                resp = await stub.PullBatch(req)
                if resp.status.code != definition_pb2.Code.OK or not resp.count:
                    return
                for record in iter_records(resp.records):
                    body_bytes[0] += len(record.body)
                counts[qid] += resp.count
                offset = resp.next_offset

        t0 = time.perf_counter()
        await asyncio.gather(*(drain(q) for q in range(QUEUES)))
        elapsed = time.perf_counter() - t0
    total = sum(counts)
    return {
        "messages": total,
        "batch": batch,
        "transport": transport,
        "msgs_per_s": round(total / elapsed),
        "decoded": True,
    }


async def bench_receive_ack(
    addr: str, topic: str, batch: int, receivers: int, group_name: str = "bench-receive-ack"
) -> dict[str, Any]:
    """Drain a topic with v2 ReceiveMessage (batch, invisible 60 s) + one AckMessage per received batch."""
    meta = (("x-mq-client-id", "bench-receive-ack"), ("x-mq-language", "PYTHON"))
    group = definition_pb2.Resource(name=group_name)
    async with grpc.aio.insecure_channel(addr, options=OPTIONS) as ch:
        stub = service_pb2_grpc.MessagingServiceStub(ch)
        counts = [0] * receivers

        async def worker(w: int) -> None:
            while True:
                req = service_pb2.ReceiveMessageRequest(
                    group=group,
                    message_queue=definition_pb2.MessageQueue(topic=definition_pb2.Resource(name=topic), id=-1),
                    batch_size=batch,
                    invisible_duration=duration_pb2.Duration(seconds=60),
                    long_polling_timeout=duration_pb2.Duration(seconds=0),
                )
                entries = []
                async for resp in stub.ReceiveMessage(req, metadata=meta, timeout=20):
                    if resp.WhichOneof("content") == "message":
                        m = resp.message
                        entries.append(
                            service_pb2.AckMessageEntry(
                                message_id=m.system_properties.message_id,
                                receipt_handle=m.system_properties.receipt_handle,
                            )
                        )
                if not entries:
                    return
                ack = await stub.AckMessage(
                    service_pb2.AckMessageRequest(group=group, topic=req.message_queue.topic, entries=entries),
                    metadata=meta,
                    timeout=20,
                )
                if ack.status.code != definition_pb2.Code.OK:
                    raise RuntimeError(ack.status.message)
                counts[w] += len(entries)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(receivers)))
        elapsed = time.perf_counter() - t0
    total = sum(counts)
    return {"messages": total, "batch": batch, "receivers": receivers, "msgs_per_s": round(total / elapsed)}


async def bench_receive_batch_ack(
    addr: str, topic: str, batch: int, receivers: int, transport: str = "grpc", group: str | None = None
) -> dict[str, Any]:
    """Drain a topic with Pop/ReceiveBatch + one Pop/AckBatch per batch, as the oms receive/ack consumers do; the
    records are decoded (a consumer reads its messages). ``transport`` carries the calls: gRPC, or the frame
    transport the oms consumers use by default; ``group`` defaults to one per batch size (each drains it all)."""
    meta = (("x-mq-client-id", f"bench-receive-batch-{batch}"), ("x-mq-language", "PYTHON"))
    group = group or f"bench-receive-batch-{batch}"
    async with unary_channel(addr, transport) as ch:
        pop = pop_pb2_grpc.PopStub(ch)
        counts = [0] * receivers

        async def worker(w: int) -> None:
            req = pop_pb2.ReceiveBatchRequest(
                group=group, topic=topic, queue_id=-1, batch_size=batch, invisible_ms=60_000, long_polling_ms=0
            )
            while True:
                resp = await pop.ReceiveBatch(req, metadata=meta, timeout=20)
                if resp.status.code == definition_pb2.Code.MESSAGE_NOT_FOUND:
                    return
                if resp.status.code != definition_pb2.Code.OK:
                    raise RuntimeError(resp.status.message)
                messages = list(iter_records(resp.records))
                ack = await pop.AckBatch(
                    pop_pb2.AckBatchRequest(group=group, topic=topic, receipt_handles=resp.receipt_handles),
                    metadata=meta,
                    timeout=20,
                )
                if ack.status.code != definition_pb2.Code.OK:
                    raise RuntimeError(ack.status.message)
                counts[w] += len(messages)

        t0 = time.perf_counter()
        await asyncio.gather(*(worker(w) for w in range(receivers)))
        elapsed = time.perf_counter() - t0
    total = sum(counts)
    return {
        "rpc": "Pop/ReceiveBatch + Pop/AckBatch",
        "transport": transport,
        "messages": total,
        "batch": batch,
        "receivers": receivers,
        "msgs_per_s": round(total / elapsed),
    }


async def bench_latency(
    addr: str,
    topic: str,
    rate: int,
    seconds: float,
    tick_ms: float = LATENCY_TICK_MS,
    consumer: str = "pull",
    sender: str = "send_message",
    transport: str = "grpc",
) -> dict[str, Any]:
    """Send ``rate`` msg/s (a small batch every tick) with v2 SendMessage (``send_message``) or Produce/SendBatch
    (``send_batch``), long-poll every queue with v2 PullMessage (``pull``) or Consume/PullBatch (``pull_batch``),
    measure send->receive. ``transport`` carries the unary calls (gRPC or frames); PullMessage streams are gRPC."""
    async with grpc.aio.insecure_channel(addr, options=OPTIONS) as ch, unary_channel(addr, transport) as uch:
        stub = service_pb2_grpc.MessagingServiceStub(uch)
        stream_stub = service_pb2_grpc.MessagingServiceStub(ch)
        await stub.SendMessage(service_pb2.SendMessageRequest(messages=[_msg(topic, 0)]))  # create the topic
        starts = {}
        for q in range(QUEUES):
            resp = await stub.QueryOffset(
                service_pb2.QueryOffsetRequest(
                    message_queue=definition_pb2.MessageQueue(topic=definition_pb2.Resource(name=topic), id=q),
                    query_offset_policy=definition_pb2.QueryOffsetPolicy.END,
                )
            )
            starts[q] = resp.offset
        latencies: list[float] = []
        expected = paced_total(rate, seconds, tick_ms)
        stop = asyncio.Event()

        batch_stub = consume_pb2_grpc.ConsumeStub(uch)
        produce_stub = produce_pb2_grpc.ProduceStub(uch)

        async def consume_batch(qid: int) -> None:
            offset = starts[qid]
            while not stop.is_set():
                req = consume_pb2.PullBatchRequest(
                    group="bench-lat", topic=topic, queue_id=qid, offset=offset, max_messages=256, long_polling_ms=1000
                )
                resp = await batch_stub.PullBatch(req, timeout=5)
                now = time.time_ns()
                for record in iter_records(resp.records):
                    latencies.append(latency_ms(record.body, now))
                offset = resp.next_offset or offset
                if len(latencies) >= expected:
                    stop.set()

        async def consume(qid: int) -> None:
            if consumer == "pull_batch":
                await consume_batch(qid)
                return
            offset = starts[qid]
            while not stop.is_set():
                req = service_pb2.PullMessageRequest(
                    group=definition_pb2.Resource(name="bench-lat"),
                    message_queue=definition_pb2.MessageQueue(topic=definition_pb2.Resource(name=topic), id=qid),
                    offset=offset,
                    batch_size=256,
                    long_polling_timeout=duration_pb2.Duration(seconds=1),
                )
                async for resp in stream_stub.PullMessage(req, timeout=5):
                    kind = resp.WhichOneof("content")
                    if kind == "message":
                        latencies.append(latency_ms(resp.message.body, time.time_ns()))
                    elif kind == "next_offset":
                        offset = resp.next_offset
                if len(latencies) >= expected:
                    stop.set()

        def send(k: int, n: int, stamp: int) -> Awaitable[Any]:
            body = stamped_body(stamp, BODY_SIZE)
            if sender == "send_batch":
                entries = [BatchEntry(0, body, {UNIQ_KEY: f"01LAT{k * n + i:029X}"}) for i in range(n)]
                req = produce_pb2.SendBatchRequest(
                    topic=topic, queue_id=-1, count=n, messages=encode_message_batch(entries)
                )
                return produce_stub.SendBatch(req)
            msgs = [_msg(topic, k * n + i, body) for i in range(n)]
            return stub.SendMessage(service_pb2.SendMessageRequest(messages=msgs))

        consumers = [asyncio.create_task(consume(q)) for q in range(QUEUES)]
        await asyncio.sleep(0.3)
        paced = await paced_sends(rate, seconds, tick_ms, send)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 10)
        stop.set()
        await asyncio.gather(*consumers, return_exceptions=True)
    return {
        "target_rate": rate,
        "messages": len(latencies),
        "sender": sender,
        "consumer": consumer,
        "transport": transport,
        "tick_ms": tick_ms,
        "latency_ms_p50": round(pct(latencies, 50), 3),
        "latency_ms_p99": round(pct(latencies, 99), 3),
        "latency_ms_max": round(max(latencies), 3) if latencies else None,
        **paced.as_dict(),
    }


def bench_transports(addr: str, n: int, seconds: float, rounds: int = 3) -> dict[str, Any]:
    """gRPC and the frame transport alternated round by round on one broker (back-to-back phases would favour the
    first: a later one finds fuller index files): SendBatch, PullBatch of what was sent, and the 10k msg/s
    SendBatch -> PullBatch latency; medians over the rounds, ratios frames / gRPC."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for r in range(rounds):
        order = ("grpc", "frames") if r % 2 == 0 else ("frames", "grpc")
        for t in order:
            topic = f"BenchAB{t.capitalize()}{r}T"
            runs.setdefault(f"send_batch_{t}", []).append(
                asyncio.run(bench_send_batch(addr, topic, n, 1024, 4, transport=t))
            )
            runs.setdefault(f"pull_batch_{t}", []).append(asyncio.run(bench_pull_batch(addr, topic, 1024, transport=t)))
            runs.setdefault(f"latency_{t}", []).append(
                asyncio.run(
                    bench_latency(
                        addr, f"BenchABLat{t.capitalize()}{r}T", 10_000, seconds,
                        consumer="pull_batch", sender="send_batch", transport=t,
                    )
                )
            )  # fmt: skip

    def median(name: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[name])

    summary: dict[str, Any] = {"rounds": rounds, "messages_per_round": n}
    for t in ("grpc", "frames"):
        summary[f"send_batch_{t}_msgs_per_s"] = round(median(f"send_batch_{t}", "msgs_per_s"))
        summary[f"pull_batch_{t}_msgs_per_s"] = round(median(f"pull_batch_{t}", "msgs_per_s"))
        summary[f"latency_{t}_ms_p50"] = round(median(f"latency_{t}", "latency_ms_p50"), 3)
        summary[f"latency_{t}_ms_p99"] = round(median(f"latency_{t}", "latency_ms_p99"), 3)
    summary["send_batch_frames_over_grpc"] = round(
        summary["send_batch_frames_msgs_per_s"] / summary["send_batch_grpc_msgs_per_s"], 2
    )
    summary["pull_batch_frames_over_grpc"] = round(
        summary["pull_batch_frames_msgs_per_s"] / summary["pull_batch_grpc_msgs_per_s"], 2
    )
    p99_grpc, p99_frames = summary["latency_grpc_ms_p99"], summary["latency_frames_ms_p99"]
    summary["latency_p99_grpc_over_frames"] = round(p99_grpc / p99_frames, 2) if p99_frames else None
    return {"summary": summary, "runs": runs}


class _EmptyStreamer(service_pb2_grpc.MessagingServiceServicer):
    """PullMessage that streams prebuilt messages: the gRPC streaming ceiling, no broker work at all."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.response = service_pb2.PullMessageResponse(message=definition_pb2.Message(body=b"x" * BODY_SIZE))

    def PullMessage(self, request: Any, context: Any) -> Any:
        for _ in range(self.n):
            yield self.response


def bench_stream_ceiling(n: int) -> dict[str, Any]:
    """How many one-message stream responses per second Python gRPC moves between two processes here."""
    from concurrent import futures

    server = grpc.server(futures.ThreadPoolExecutor(2))
    service_pb2_grpc.add_MessagingServiceServicer_to_server(_EmptyStreamer(n), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    client = (
        "import time, grpc\n"
        "from rocketmq.grpc_protocol import service_pb2, service_pb2_grpc\n"
        f"stub = service_pb2_grpc.MessagingServiceStub(grpc.insecure_channel('127.0.0.1:{port}'))\n"
        "t = time.perf_counter(); n = sum(1 for _ in stub.PullMessage(service_pb2.PullMessageRequest()))\n"
        "print(n / (time.perf_counter() - t))\n"
    )
    try:
        out = subprocess.run([sys.executable, "-c", client], capture_output=True, text=True, timeout=120, check=True)
    finally:
        server.stop(0)
    return {"messages": n, "msgs_per_s": round(float(out.stdout.strip()))}


FLOOR_START_TIMEOUT_S = 60


def bench_receive_floor(n: int, server_module: Sequence[str] = ("benchmarks.v2_receive_floor",)) -> dict[str, Any]:
    """The bench's v2 ReceiveMessage + AckMessage drain against a server with no broker work behind it
    (``benchmarks.v2_receive_floor``, or another floor server: ``python -m <server_module...> n`` that prints its
    port): what the protocol's one-message-per-response stream allows here. Server and client CPU per message."""
    server = subprocess.Popen(
        [sys.executable, "-m", *server_module, str(n)], stdout=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        assert server.stdout is not None
        # the server prints its port once listening; a server that never does must not hang the benchmark
        if not select.select([server.stdout], [], [], FLOOR_START_TIMEOUT_S)[0]:
            raise TimeoutError(f"the v2 receive floor server printed no port in {FLOOR_START_TIMEOUT_S} s")
        port = int(server.stdout.readline())
        cpu0, client0 = proc_cpu_s(server.pid), proc_cpu_s(os.getpid())
        server_threads0, client_threads0 = threads_cpu_s(server.pid), threads_cpu_s(os.getpid())
        result = asyncio.run(bench_receive_ack(f"127.0.0.1:{port}", "BenchFloorT", 32, 4))
        seconds = result["messages"] / result["msgs_per_s"]
        result["server_cpu_us_per_msg"] = round((proc_cpu_s(server.pid) - cpu0) / result["messages"] * 1e6, 1)
        result["client_cpu_us_per_msg"] = round((proc_cpu_s(os.getpid()) - client0) / result["messages"] * 1e6, 1)
        # which side bounds the drain: a thread busy nearly all the time (an event loop, grpc's poller)
        result["server_busiest_thread"] = busiest_thread(server_threads0, threads_cpu_s(server.pid), seconds)
        result["client_busiest_thread"] = busiest_thread(client_threads0, threads_cpu_s(os.getpid()), seconds)
    finally:
        server.kill()
        server.wait(20)
    return result


def bench_v2_receive_rounds(broker: Broker, n: int, rounds: int = 3) -> dict[str, Any]:
    """Issue 22's v2 receive ratios from alternated rounds: in each, a group drains ``n`` messages from the broker,
    then the same drain runs against the floor server and the stream ceiling is measured; medians of the
    per-round ratios (one drain moves a lot with the machine's load, a ratio within a round much less)."""
    topic = "BenchV2ReceiveT"
    asyncio.run(bench_send_batch(broker.addr, topic, n, 1024, 4))
    runs: list[dict[str, Any]] = []
    for r in range(rounds):
        cpu0 = proc_cpu_s(broker.proc.pid)
        drained = asyncio.run(bench_receive_ack(broker.addr, topic, 32, 4, group_name=f"bench-v2-receive-{r}"))
        broker_cpu = (proc_cpu_s(broker.proc.pid) - cpu0) / drained["messages"] * 1e6
        floor = bench_receive_floor(n)
        ceiling = bench_stream_ceiling(n)
        runs.append(
            {
                "broker_msgs_per_s": drained["msgs_per_s"],
                "floor_msgs_per_s": floor["msgs_per_s"],
                "ceiling_msgs_per_s": ceiling["msgs_per_s"],
                "broker_over_ceiling": round(drained["msgs_per_s"] / ceiling["msgs_per_s"], 3),
                "broker_over_floor": round(drained["msgs_per_s"] / floor["msgs_per_s"], 3),
                "floor_over_ceiling": round(floor["msgs_per_s"] / ceiling["msgs_per_s"], 3),
                "broker_cpu_us_per_msg": round(broker_cpu, 1),
                "floor_cpu_us_per_msg": floor["server_cpu_us_per_msg"],
            }
        )
    summary = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    return {"summary": summary, "runs": runs, "messages_per_round": n}


def bench_receive_batch_transports(addr: str, topic: str, rounds: int = 3) -> tuple[dict[str, Any], dict[str, Any]]:
    """ReceiveBatch 256 + AckBatch draining ``topic`` over gRPC and over frames (what the oms consumers use),
    alternated round by round, a group per drain (each receives and acks every message); the median round of each
    (one drain moves a lot with the machine's load)."""
    runs: dict[str, list[dict[str, Any]]] = {"grpc": [], "frames": []}
    for r in range(rounds):
        for t in ("grpc", "frames") if r % 2 == 0 else ("frames", "grpc"):
            group = f"bench-receive-batch-256-{t}-{r}"
            runs[t].append(asyncio.run(bench_receive_batch_ack(addr, topic, 256, 4, transport=t, group=group)))

    def median(t: str) -> dict[str, Any]:
        ordered = sorted(runs[t], key=lambda run: run["msgs_per_s"])
        return {**ordered[len(ordered) // 2], "rounds": [run["msgs_per_s"] for run in runs[t]]}

    return median("grpc"), median("frames")


def receive_ratios(peers: dict[str, Any], grpc_rate: float, frames_rate: float) -> dict[str, Any]:
    """Per peer: its consume-with-ack rate and ReceiveBatch + AckBatch's over gRPC and over frames divided by it
    (> 1: OrbitMQ faster); a peer that did not run is reported with why."""
    out: dict[str, Any] = {}
    for name, peer in peers["peers"].items():
        if peer["status"] != "ok":
            out[name] = f"{peer['status']}: {peer['reason']}"
            continue
        consume = peer["consume"]["msgs_per_s"]
        out[name] = {
            "consume_msgs_per_s": consume,
            "grpc": round(grpc_rate / consume, 2) if consume else None,
            "frames": round(frames_rate / consume, 2) if consume else None,
        }
    return out


def run(quick: bool = False) -> dict[str, Any]:
    n_official = 300 if quick else 2000
    n_batched = 20_000 if quick else 200_000
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as tmp:
        broker = Broker(Path(tmp) / "store")
        try:
            official = bench_official_producer(broker.addr, n_official)
            batched = asyncio.run(bench_batched_produce(broker.addr, "BenchBatchT", n_batched, 1024, 4))
            send_batch = asyncio.run(bench_send_batch(broker.addr, "BenchSendBatchT", n_batched, 1024, 4))
            # The same requests to a BatchCQ topic: one inner-batch record per request.
            create_batch_topic(broker.addr, "BenchBatchCQT")
            send_batch_cq = asyncio.run(bench_send_batch(broker.addr, "BenchBatchCQT", n_batched, 1024, 4))
            pull = asyncio.run(bench_pull(broker.addr, "BenchBatchT", 1024))
            pull_batch = asyncio.run(bench_pull_batch(broker.addr, "BenchBatchT", 1024))
            pull_batch_cq = asyncio.run(bench_pull_batch(broker.addr, "BenchBatchCQT", 1024))
            receive_ack = asyncio.run(bench_receive_ack(broker.addr, "BenchBatchT", 32, 4))
            # The same 200k messages drained twice by two groups: batches of 32 (v2's cap) and 256.
            receive_batch = asyncio.run(bench_receive_batch_ack(broker.addr, "BenchSendBatchT", 32, 4))
            receive_batch_256, receive_batch_256_frames = bench_receive_batch_transports(broker.addr, "BenchSendBatchT")
            receive_batch_256_cq = asyncio.run(bench_receive_batch_ack(broker.addr, "BenchBatchCQT", 256, 4))
            seconds = 2.0 if quick else 5.0
            latency_low = asyncio.run(bench_latency(broker.addr, "BenchLat1kT", 1_000, seconds))
            latency = asyncio.run(bench_latency(broker.addr, "BenchLatT", 10_000, seconds))
            latency_batch = asyncio.run(
                bench_latency(broker.addr, "BenchLatBatchT", 10_000, seconds, consumer="pull_batch")
            )
            latency_batched = asyncio.run(
                bench_latency(
                    broker.addr, "BenchLatSendBatchT", 10_000, seconds, consumer="pull_batch", sender="send_batch"
                )
            )
            # The frame transport (oms's default towards an OrbitMQ broker) against gRPC, same broker, same run.
            transports = bench_transports(broker.addr, n_batched // 2, seconds)
            v2_receive = bench_v2_receive_rounds(broker, 5_000 if quick else 30_000)
        finally:
            broker.stop()
    ceiling = bench_stream_ceiling(5_000 if quick else 30_000)
    summary = {
        "official_sync_send_msgs_per_s": official["sync_msgs_per_s"],
        "official_async_send_msgs_per_s": official["async_msgs_per_s"],
        "batched_produce_msgs_per_s": batched["msgs_per_s"],
        "send_batch_produce_msgs_per_s": send_batch["msgs_per_s"],
        "send_batch_batch_cq_produce_msgs_per_s": send_batch_cq["msgs_per_s"],
        "pull_consume_msgs_per_s": pull["msgs_per_s"],
        "pull_batch_consume_msgs_per_s": pull_batch["msgs_per_s"],
        "pull_batch_batch_cq_consume_msgs_per_s": pull_batch_cq["msgs_per_s"],
        "receive_ack_consume_msgs_per_s": receive_ack["msgs_per_s"],
        "receive_batch_ack_consume_msgs_per_s": receive_batch["msgs_per_s"],
        "receive_batch_256_ack_consume_msgs_per_s": receive_batch_256["msgs_per_s"],
        "receive_batch_256_ack_frames_consume_msgs_per_s": receive_batch_256_frames["msgs_per_s"],
        "receive_batch_256_ack_batch_cq_consume_msgs_per_s": receive_batch_256_cq["msgs_per_s"],
        "grpc_stream_ceiling_msgs_per_s": ceiling["msgs_per_s"],
        # Issue 22's v2 receive goal is against the ceiling; the floor is the same drain with no broker behind it.
        # Medians of alternated rounds (bench_v2_receive_rounds): broker, floor and ceiling measured side by side.
        "v2_receive": v2_receive["summary"],
        "e2e_latency_ms_p50_at_1k": latency_low["latency_ms_p50"],
        "e2e_latency_ms_p99_at_1k": latency_low["latency_ms_p99"],
        "e2e_latency_ms_p50_at_10k": latency["latency_ms_p50"],
        "e2e_latency_ms_p99_at_10k": latency["latency_ms_p99"],
        "e2e_latency_ms_p50_at_10k_pull_batch": latency_batch["latency_ms_p50"],
        "e2e_latency_ms_p99_at_10k_pull_batch": latency_batch["latency_ms_p99"],
        "e2e_latency_ms_p50_at_10k_send_batch_pull_batch": latency_batched["latency_ms_p50"],
        "e2e_latency_ms_p99_at_10k_send_batch_pull_batch": latency_batched["latency_ms_p99"],
        "frames": transports["summary"],
        "targets": {"batched_produce": 200_000, "pull_consume": 200_000, "receive_ack": 40_000, "e2e_p99_ms": 5.0},
    }
    # The peers (Redis Streams, RabbitMQ, NATS JetStream) in the same run, after our broker has stopped, so the
    # ratios compare figures taken under the same machine load; a peer not installed is reported as such.
    peers = bench_peers.run(quick)
    best_produce = max(batched["msgs_per_s"], send_batch["msgs_per_s"])
    summary["peers"] = bench_peers.compare(
        peers, best_produce, pull_batch["msgs_per_s"], latency_batched["latency_ms_p99"]
    )
    frames = transports["summary"]
    summary["peers_frames"] = bench_peers.compare(
        peers,
        frames["send_batch_frames_msgs_per_s"],
        frames["pull_batch_frames_msgs_per_s"],
        frames["latency_frames_ms_p99"],
    )
    # Issue 22: ReceiveBatch 256 + AckBatch against each peer's consume with acks, over gRPC and over frames.
    summary["receive_batch_256_ack_over_peer_consume"] = receive_ratios(
        peers, receive_batch_256["msgs_per_s"], receive_batch_256_frames["msgs_per_s"]
    )
    # BatchCQ keeps per-message offsets, consumption and acks, but not a per-message key index: compared apart.
    summary["peers_batch_cq"] = bench_peers.compare(peers, send_batch_cq["msgs_per_s"], pull_batch_cq["msgs_per_s"])
    return {
        "summary": summary,
        "peers": peers,
        "official_producer": official,
        "batched_produce": batched,
        "send_batch_produce": send_batch,
        "send_batch_batch_cq_produce": send_batch_cq,
        "pull_batch_batch_cq": pull_batch_cq,
        "receive_batch_256_ack_batch_cq": receive_batch_256_cq,
        "pull": pull,
        "pull_batch": pull_batch,
        "receive_ack": receive_ack,
        "receive_batch_ack": receive_batch,
        "receive_batch_256_ack": receive_batch_256,
        "receive_batch_256_ack_frames": receive_batch_256_frames,
        "grpc_stream_ceiling": ceiling,
        "v2_receive_rounds": v2_receive,
        "latency_1k": latency_low,
        "latency": latency,
        "latency_pull_batch": latency_batch,
        "latency_send_batch_pull_batch": latency_batched,
        "transports": transports,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true")
    # what serves the broker's gRPC port (broker key grpcServer; benchmarks/bench_grpc_server.py compares the two)
    p.add_argument("--grpc-server", choices=("h2", "grpcio"), default=None)
    args = p.parse_args(argv)
    if args.grpc_server is not None:
        BROKER_OPTIONS["grpcServer"] = args.grpc_server
    result = run(quick=args.quick)
    path = write_result("e2e", result)
    print(json.dumps(result["summary"], indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
