"""Large unary calls through grpcio, grpclib and the h2 prototype server: what a broker on either would pay on the
SendBatch/PullBatch-shaped paths (one big request or one big response per call), with no broker work behind them.

One raw-bytes method, ``/bench.Raw/Blob``: the request's first 8 bytes say how big the answer is, the rest is
padding; the server answers with prebuilt bytes of that size. No protobuf on either side, so only the transport's
cost shows. ``python -m benchmarks.h2_large_unary serve FLAVOUR`` prints its port and serves until killed;
``python -m benchmarks.h2_large_unary --rounds 3`` measures every flavour and shape, alternated, and writes
``benchmarks/results/v2recv-h2-large-unary-<time>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import socket
import statistics
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from benchmarks import h2_grpc

METHOD = "/bench.Raw/Blob"
SIZE = 8
MAX_MESSAGE = 64 << 20
# (name, request bytes, response bytes, calls): a SendBatch of 1,024 100-byte messages is ~160 KB, so is a PullBatch
SHAPES = [("send-160k", 160_000, 64, 2_000), ("pull-160k", 64, 160_000, 2_000), ("send-1m", 1_000_000, 64, 400)]
WORKERS = 4


@functools.cache
def answer(size: int) -> bytes:
    return b"a" * size


def blob(request: bytes | memoryview) -> bytes:
    return answer(int.from_bytes(request[:SIZE], "big"))


def request_of(size: int, answer_size: int) -> bytes:
    return answer_size.to_bytes(SIZE, "big") + b"r" * (size - SIZE)


class Raw:
    """Raw bytes as grpclib's protobuf codec expects a message type to behave."""

    def __init__(self, data: bytes = b"") -> None:
        self.data = data

    @classmethod
    def FromString(cls, data: bytes) -> Raw:  # protobuf's spelling, which grpclib calls
        return cls(data)

    def SerializeToString(self) -> bytes:
        return self.data


async def serve_grpcio(on_port: Callable[[int], None]) -> None:
    import grpc

    options = [("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.max_send_message_length", MAX_MESSAGE)]
    server = grpc.aio.server(options=options)

    async def handle(request: bytes, context: Any) -> bytes:
        return blob(request)

    handler = grpc.unary_unary_rpc_method_handler(handle)  # no (de)serializers: bytes in, bytes out
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler("bench.Raw", {"Blob": handler})])
    on_port(server.add_insecure_port("127.0.0.1:0"))
    await server.start()
    await server.wait_for_termination()


class _GrpclibRaw:
    async def handle(self, stream: Any) -> None:
        await stream.send_message(Raw(blob((await stream.recv_message()).data)))

    def __mapping__(self) -> dict[str, Any]:
        from grpclib.const import Cardinality, Handler

        return {METHOD: Handler(self.handle, Cardinality.UNARY_UNARY, Raw, Raw)}


async def serve_grpclib(on_port: Callable[[int], None], fast_repr: bool = False) -> None:
    from grpclib.server import Server

    if fast_repr:
        h2_grpc.patch_frame_repr()  # grpclib receives through h2 too

    # proto must say TCP, or asyncio and grpclib leave Nagle on (benchmarks/v2_receive_floor_h2.py)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    server = Server([_GrpclibRaw()])
    await server.start(sock=sock)
    on_port(sock.getsockname()[1])
    await server.wait_closed()


async def serve_h2(on_port: Callable[[int], None]) -> None:
    server = await h2_grpc.serve({METHOD: lambda request: [blob(request)]})
    on_port(server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


SERVERS: dict[str, Callable[[Callable[[int], None]], Coroutine[Any, Any, None]]] = {
    "grpcio": serve_grpcio,
    "grpclib": serve_grpclib,
    "grpclib-fast-repr": functools.partial(serve_grpclib, fast_repr=True),
    "h2": serve_h2,
}


async def drive(port: int, request: bytes, calls: int) -> float:
    """``calls`` calls, ``WORKERS`` at a time, from a grpc aio client; seconds taken."""
    import grpc

    options = [("grpc.max_receive_message_length", MAX_MESSAGE), ("grpc.max_send_message_length", MAX_MESSAGE)]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=options) as channel:
        call = channel.unary_unary(METHOD)
        want = int.from_bytes(request[:SIZE], "big")

        async def worker() -> None:
            for _ in range(calls // WORKERS):
                if len(await call(request, timeout=30)) != want:
                    raise AssertionError("short answer")

        await call(request, timeout=30)  # connected and warm before the clock starts
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(WORKERS)))
        return time.perf_counter() - started


def measure(flavour: str, shape: tuple[str, int, int, int]) -> dict[str, Any]:
    from benchmarks.common import proc_cpu_s
    from benchmarks.v2_receive_floor_h2 import server_process

    _, request_size, answer_size, calls = shape
    request = request_of(request_size, answer_size)
    with server_process(("benchmarks.h2_large_unary", "serve", flavour)) as server:
        cpu0, client0 = proc_cpu_s(server.pid), proc_cpu_s(os.getpid())
        seconds = asyncio.run(drive(server.port, request, calls))
        cpu, client = proc_cpu_s(server.pid) - cpu0, proc_cpu_s(os.getpid()) - client0
    done = calls // WORKERS * WORKERS
    return {
        "calls_per_s": round(done / seconds),
        "mb_per_s": round(done * (request_size + answer_size) / seconds / 1e6, 1),
        "server_cpu_us_per_call": round(cpu / done * 1e6, 1),
        "client_cpu_us_per_call": round(client / done * 1e6, 1),
    }


def run_rounds(rounds: int) -> dict[str, Any]:
    flavours = list(SERVERS)
    runs: list[dict[str, Any]] = []
    for r in range(rounds):
        order = flavours[r % len(flavours) :] + flavours[: r % len(flavours)]
        run: dict[str, Any] = {"order": order, "loadavg_1m": os.getloadavg()[0]}
        for shape in SHAPES:
            run[shape[0]] = {flavour: measure(flavour, shape) for flavour in order}
        runs.append(run)
        print(f"round {r}: {run}", file=sys.stderr, flush=True)
    summary: dict[str, Any] = {"loadavg_1m_median": statistics.median(run["loadavg_1m"] for run in runs)}
    for name, *_ in SHAPES:
        for flavour in flavours:
            for key in runs[0][name][flavour]:
                summary[f"{name}_{flavour}_{key}"] = statistics.median(run[name][flavour][key] for run in runs)
    return {"summary": summary, "runs": runs, "shapes": SHAPES, "workers": WORKERS}


def main(argv: list[str]) -> None:
    if argv and argv[0] == "serve":
        asyncio.run(SERVERS[argv[1]](lambda port: print(port, flush=True)))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    from benchmarks.common import write_result

    path = write_result("v2recv-h2-large-unary", run_rounds(args.rounds))
    print(path)
    print("\n".join(f"{k}: {v}" for k, v in json.loads(path.read_text())["summary"].items()))


if __name__ == "__main__":
    main(sys.argv[1:])
