"""The v2 receive floor (``benchmarks.v2_receive_floor``) served outside grpcio: by grpclib (pure-Python asyncio gRPC
on h2, one ``send_message`` per streamed message) and by ``benchmarks.h2_grpc`` (one transport write per call).
Same prebuilt message, same semantics: ReceiveMessage streams status, the batch and the delivery timestamp;
AckMessage is answered OK unchecked; ``total`` messages are handed out, then MESSAGE_NOT_FOUND.

``python -m benchmarks.v2_receive_floor_h2 serve {h2,grpclib} TOTAL`` prints its port and serves until killed.
``python -m benchmarks.v2_receive_floor_h2 --rounds 5`` measures, round by round, the stream ceiling and the three
floors drained by the bench's aio client, after checking grpcio's generated stub against the h2 server, and writes
``benchmarks/results/v2recv-h2-<time>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rocketmq.grpc_protocol import definition_pb2, service_pb2

from benchmarks import h2_grpc
from benchmarks.v2_receive_floor import FloorState, ack_response, delivered_message, delivery_stamp

SERVICE = "/apache.rocketmq.v2.MessagingService"
OK = definition_pb2.Status(code=definition_pb2.Code.OK)
RECEIVE = f"{SERVICE}/ReceiveMessage"
ACK = f"{SERVICE}/AckMessage"


class H2Floor(FloorState):
    """Handlers for ``benchmarks.h2_grpc``: every response of a call serialized, then framed and sent at once."""

    port = 0  # where it listens, for the route it answers

    def receive(self, request: memoryview) -> list[bytes]:
        n = self.take(service_pb2.ReceiveMessageRequest.FromString(request).batch_size)
        head = (self.ok if n else self.none).SerializeToString()
        # serialized per message, as a broker with distinct messages would (grpcio's floor serializes per write too)
        batch = [self.message.SerializeToString() for _ in range(n)]
        return [head, *batch, delivery_stamp().SerializeToString()]

    def ack(self, request: memoryview) -> list[bytes]:
        return [ack_response(service_pb2.AckMessageRequest.FromString(request)).SerializeToString()]

    def route(self, request: memoryview) -> list[bytes]:
        """One readable queue of the asked topic on this server: what the official SimpleConsumer needs to
        receive from it (the floor serves no other topic-aware call)."""
        topic = service_pb2.QueryRouteRequest.FromString(request).topic
        address = definition_pb2.Address(host="127.0.0.1", port=self.port)
        queue = definition_pb2.MessageQueue(
            topic=topic,
            id=0,
            permission=definition_pb2.Permission.READ_WRITE,
            broker=definition_pb2.Broker(
                name="floor", id=0, endpoints=definition_pb2.Endpoints(scheme=definition_pb2.IPv4, addresses=[address])
            ),
            accept_message_types=[definition_pb2.MessageType.NORMAL],
        )
        return [service_pb2.QueryRouteResponse(status=OK, message_queues=[queue]).SerializeToString()]

    def handlers(self) -> dict[str, h2_grpc.Handler]:
        def ok(response: type) -> h2_grpc.Handler:
            return lambda request: [response(status=OK).SerializeToString()]

        return {
            RECEIVE: self.receive,
            ACK: self.ack,
            f"{SERVICE}/QueryRoute": self.route,
            f"{SERVICE}/Heartbeat": ok(service_pb2.HeartbeatResponse),
            f"{SERVICE}/NotifyClientTermination": ok(service_pb2.NotifyClientTerminationResponse),
        }


class GrpclibFloor(FloorState):
    """grpclib handlers as its generated code would write them: one ``send_message`` per response."""

    async def receive(self, stream: Any) -> None:
        request = await stream.recv_message()
        n = self.take(request.batch_size)
        await stream.send_message(self.ok if n else self.none)
        for _ in range(n):
            await stream.send_message(self.message)
        await stream.send_message(delivery_stamp())

    async def ack(self, stream: Any) -> None:
        await stream.send_message(ack_response(await stream.recv_message()))

    def __mapping__(self) -> dict[str, Any]:
        from grpclib.const import Cardinality, Handler

        return {
            RECEIVE: Handler(
                self.receive,
                Cardinality.UNARY_STREAM,
                service_pb2.ReceiveMessageRequest,
                service_pb2.ReceiveMessageResponse,
            ),
            ACK: Handler(
                self.ack, Cardinality.UNARY_UNARY, service_pb2.AckMessageRequest, service_pb2.AckMessageResponse
            ),
        }


class GrpclibBatchFloor(GrpclibFloor):
    """grpclib with a call's responses framed and handed to its HTTP/2 stream in one ``send_data``: what a batch send
    in grpclib would give. Uses grpclib's private ``Stream._stream`` (it has no public way to send several messages
    at once); prototype only."""

    async def receive(self, stream: Any) -> None:
        request = await stream.recv_message()
        n = self.take(request.batch_size)
        batch = [self.message.SerializeToString() for _ in range(n)]
        head = (self.ok if n else self.none).SerializeToString()
        await stream.send_initial_metadata()
        payload = b"".join(h2_grpc.frame(m) for m in (head, *batch, delivery_stamp().SerializeToString()))
        await stream._stream.send_data(payload)


async def serve_h2(total: int, on_port: Callable[[int], None]) -> None:
    floor = H2Floor(total)
    server = await h2_grpc.serve(floor.handlers())
    floor.port = server.sockets[0].getsockname()[1]
    on_port(floor.port)
    async with server:
        await server.serve_forever()


async def serve_grpclib(total: int, on_port: Callable[[int], None], floor: type[GrpclibFloor] = GrpclibFloor) -> None:
    from grpclib.server import Server

    # proto must say TCP: asyncio and grpclib set TCP_NODELAY only on sockets that do (proto 0 gets Nagle, and
    # grpclib's separate writes for headers, data and trailers then wait ~40 ms for the client's delayed ACK)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = Server([floor(total)])
    await server.start(sock=sock)
    on_port(sock.getsockname()[1])
    await server.wait_closed()


async def serve_grpclib_batch(total: int, on_port: Callable[[int], None]) -> None:
    await serve_grpclib(total, on_port, GrpclibBatchFloor)


SERVERS = {"h2": serve_h2, "grpclib": serve_grpclib, "grpclib-batch": serve_grpclib_batch}


def check_stub(port: int, total: int) -> dict[str, Any]:
    """grpcio's generated stub against a floor server holding ``total`` (>= 2,032) messages: a batch of 32, one of
    2,000 (~1 MB, far past the 64 KB stream window with BDP probing off, so flow control is exercised), the empty
    answer once all is handed out, an ack, and UNIMPLEMENTED for a method it does not serve. Raises on any mismatch;
    wrong framing or trailers make grpcio fail the call."""
    import grpc
    from rocketmq.grpc_protocol import service_pb2_grpc

    expected = delivered_message().message
    options = [("grpc.http2.bdp_probe", 0), ("grpc.max_receive_message_length", 64 << 20)]
    with grpc.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)

        def receive(batch: int) -> list[service_pb2.ReceiveMessageResponse]:
            return list(stub.ReceiveMessage(service_pb2.ReceiveMessageRequest(batch_size=batch), timeout=10))

        def check_batch(responses: list[service_pb2.ReceiveMessageResponse], n: int, code: int) -> None:
            kinds = [r.WhichOneof("content") for r in responses]
            if kinds != ["status", *["message"] * n, "delivery_timestamp"] or responses[0].status.code != code:
                raise AssertionError(f"wrong stream for {n} messages: {kinds[:3]}... ({len(kinds)} responses)")
            for r in responses[1:-1]:
                if r.message.body != expected.body or r.message.topic != expected.topic:
                    raise AssertionError("a streamed message differs from the prebuilt one")

        check_batch(receive(32), 32, definition_pb2.Code.OK)
        check_batch(receive(2000), 2000, definition_pb2.Code.OK)
        rest = total - 2032
        check_batch(receive(rest + 1), rest, definition_pb2.Code.OK)
        check_batch(receive(32), 0, definition_pb2.Code.MESSAGE_NOT_FOUND)
        entries = [service_pb2.AckMessageEntry(message_id=f"m{i}", receipt_handle=f"h{i}") for i in range(3)]
        ack = stub.AckMessage(service_pb2.AckMessageRequest(entries=entries), timeout=10)
        if ack.status.code != definition_pb2.Code.OK or [e.message_id for e in ack.entries] != ["m0", "m1", "m2"]:
            raise AssertionError(f"wrong ack answer: {ack}")
        try:
            stub.QueryAssignment(service_pb2.QueryAssignmentRequest(), timeout=10)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
        else:
            raise AssertionError("QueryAssignment answered by a server that does not serve it")
    return {"ok": True, "checked": ["batch 32", "batch 2000 (flow control)", "MESSAGE_NOT_FOUND", "ack", "unknown"]}


def run_rounds(rounds: int, n: int) -> dict[str, Any]:
    """Per round the ceiling and the three floors, in an order rotated round by round (the machine is shared, so
    ratios within a round say more than any one drain)."""
    from benchmarks.bench_e2e import bench_receive_floor, bench_stream_ceiling
    from benchmarks.common import busiest_thread, proc_cpu_s, threads_cpu_s

    def ceiling() -> dict[str, Any]:
        # the ceiling's server runs in this process and its client in a child process (reaped before it returns, so
        # its CPU shows in os.times()' children fields)
        cpu0, threads0, children0 = proc_cpu_s(os.getpid()), threads_cpu_s(os.getpid()), os.times()
        result = bench_stream_ceiling(n)
        children1 = os.times()
        client = (children1.children_user + children1.children_system) - (
            children0.children_user + children0.children_system
        )
        result["server_cpu_us_per_msg"] = round((proc_cpu_s(os.getpid()) - cpu0) / n * 1e6, 1)
        result["client_cpu_us_per_msg"] = round(client / n * 1e6, 1)  # including the client's interpreter start
        result["server_busiest_thread"] = busiest_thread(threads0, threads_cpu_s(os.getpid()), n / result["msgs_per_s"])
        return result

    def floor(flavour: str) -> Callable[[], dict[str, Any]]:
        return lambda: bench_receive_floor(n, FLOOR_MODULES[flavour])

    flavours: dict[str, Callable[[], dict[str, Any]]] = {"ceiling": ceiling}
    flavours.update((flavour, floor(flavour)) for flavour in FLOOR_MODULES)
    names = list(flavours)
    runs: list[dict[str, Any]] = []
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        run: dict[str, Any] = {"order": order, "loadavg_1m": os.getloadavg()[0]}
        for name in order:
            run[name] = flavours[name]()
        for name in names[1:]:
            run[f"{name}_over_ceiling"] = round(run[name]["msgs_per_s"] / run["ceiling"]["msgs_per_s"], 3)
        # the per-call cost apart from streaming: what every unary RPC of a broker on that server would pay
        run["unary"] = {flavour: unary_calls(flavour, UNARY_CALLS) for flavour in UNARY_FLAVOURS}
        runs.append(run)
        print(f"round {r}: " + ", ".join(f"{k} {run[k]['msgs_per_s']}" for k in names), file=sys.stderr, flush=True)

    summary: dict[str, Any] = {"loadavg_1m_median": statistics.median(run["loadavg_1m"] for run in runs)}
    for name in names:
        for key in (
            "msgs_per_s",
            "server_cpu_us_per_msg",
            "client_cpu_us_per_msg",
            "server_busiest_thread",
            "client_busiest_thread",
        ):
            values = [run[name][key] for run in runs if key in run[name]]
            if values and isinstance(values[0], dict):
                for part in values[0]:
                    summary[f"{name}_{key}_{part}"] = statistics.median(v[part] for v in values)
            elif values:
                summary[f"{name}_{key}"] = statistics.median(values)
        if name != "ceiling":
            summary[f"{name}_over_ceiling"] = statistics.median(run[f"{name}_over_ceiling"] for run in runs)
    for flavour in UNARY_FLAVOURS:
        for key in ("calls_per_s", "server_cpu_us_per_call"):
            summary[f"unary_{flavour}_{key}"] = statistics.median(run["unary"][flavour][key] for run in runs)
    return {"summary": summary, "runs": runs, "messages_per_round": n}


UNARY_CALLS = 20_000
UNARY_FLAVOURS = ("grpcio", "grpclib", "h2")


def unary_calls(flavour: str, calls: int, workers: int = 4) -> dict[str, Any]:
    """``calls`` one-entry AckMessage calls from the bench's aio client (``workers`` at a time) to a floor server:
    calls per second and the server's CPU per call."""
    import grpc
    from rocketmq.grpc_protocol import service_pb2_grpc

    from benchmarks.common import proc_cpu_s

    request = service_pb2.AckMessageRequest(entries=[service_pb2.AckMessageEntry(message_id="m", receipt_handle="h")])

    async def drive(port: int) -> float:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = service_pb2_grpc.MessagingServiceStub(channel)

            async def worker() -> None:
                for _ in range(calls // workers):
                    await stub.AckMessage(request, timeout=20)

            await stub.AckMessage(request, timeout=20)  # connected before the clock starts
            started = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(workers)))
            return time.perf_counter() - started

    with floor_server(flavour, 0) as server:
        cpu0 = proc_cpu_s(server.pid)
        seconds = asyncio.run(drive(server.port))
        cpu = proc_cpu_s(server.pid) - cpu0
    done = calls // workers * workers
    return {"calls": done, "calls_per_s": round(done / seconds), "server_cpu_us_per_call": round(cpu / done * 1e6, 1)}


ROOT = Path(__file__).resolve().parent.parent
FLOOR_MODULES = {
    "grpcio": ("benchmarks.v2_receive_floor",),
    "grpclib": ("benchmarks.v2_receive_floor_h2", "serve", "grpclib"),
    "grpclib-batch": ("benchmarks.v2_receive_floor_h2", "serve", "grpclib-batch"),
    "h2": ("benchmarks.v2_receive_floor_h2", "serve", "h2"),
}
CHECK_TIMEOUT_S = 60


class Floor(NamedTuple):
    port: int
    pid: int


def floor_server(flavour: str, total: int) -> contextlib.AbstractContextManager[Floor]:
    """A floor server process of ``flavour`` holding ``total`` messages, killed on the way out."""
    return server_process((*FLOOR_MODULES[flavour], str(total)))


@contextlib.contextmanager
def server_process(module_args: Sequence[str]) -> Iterator[Floor]:
    """``python -m <module_args>``, a server that prints its port once listening; killed on the way out."""
    server = subprocess.Popen(
        [sys.executable, "-m", *module_args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert server.stdout is not None
        yield Floor(port=int(server.stdout.readline()), pid=server.pid)
    finally:
        server.kill()
        server.wait(20)


def check_official_client(port: int, total: int) -> dict[str, Any]:
    """The official SimpleConsumer receives and acks ``total`` messages (``benchmarks.h2_official_client``)."""
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.h2_official_client", str(port), str(total)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=CHECK_TIMEOUT_S,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if not result["ok"]:
        raise AssertionError(f"the official SimpleConsumer got {result} of {total}")
    return result


def check_h2_server() -> dict[str, Any]:
    """:func:`check_stub` and :func:`check_official_client`, each against a freshly started h2 floor server."""
    with floor_server("h2", 3000) as server:
        stub = check_stub(server.port, 3000)
    with floor_server("h2", 100) as server:
        official = check_official_client(server.port, 100)
    return {"ok": stub["ok"] and official["ok"], "grpcio_stub": stub, "official_simple_consumer": official}


def main(argv: Sequence[str]) -> None:
    if argv and argv[0] == "serve":
        flavour, total = argv[1], int(argv[2])
        asyncio.run(SERVERS[flavour](total, lambda port: print(port, flush=True)))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--messages", type=int, default=100_000, help="messages per drain")
    args = parser.parse_args(argv)
    from benchmarks.common import write_result

    stub_check = check_h2_server()
    started = time.time()
    result = run_rounds(args.rounds, args.messages)
    result["stub_check"] = stub_check
    result["seconds"] = round(time.time() - started, 1)
    path = write_result("v2recv-h2", result)
    print(path)
    for key, value in result["summary"].items():
        print(f"{key}: {value}")


if __name__ == "__main__":
    main(sys.argv[1:])
