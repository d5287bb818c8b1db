"""orbitmq/h2grpc against a real grpcio client, the server on its own loop thread: every handler kind, flow control,
deadlines, cancellation, status and metadata, refusals, HTTP/1.1 and garbage, many streams, graceful stop."""

from __future__ import annotations

import asyncio
import gzip
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import StreamEnded, StreamReset
from hyperframe.frame import DataFrame

from orbitmq.grpc_guard import guarded_server
from orbitmq.h2grpc import H2Server
from orbitmq.h2grpc.wire import MessageReader, WireError, encode_message, parse_timeout

pytestmark = pytest.mark.timeout(60)
SERVICE = "test.Echo"
MAX_RECEIVE = 64 * 1024


class Recorder:
    """What the handlers saw, read by the test thread."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.started = threading.Event()
        self.calls = 0
        self.metadata: tuple[tuple[str, Any], ...] = ()
        self.peer = ""
        self.remaining: float | None = None


def _handlers(rec: Recorder) -> grpc.GenericRpcHandler:
    async def unary(request: bytes, context: Any) -> bytes:
        rec.calls += 1
        rec.metadata = tuple(context.invocation_metadata())
        rec.peer = context.peer()
        rec.remaining = context.time_remaining()
        if request.startswith(b"abort:"):
            await context.abort(grpc.StatusCode.NOT_FOUND, request[6:].decode())
        if request == b"raise":
            raise ValueError("handler bug")
        if request == b"trailing":
            context.set_trailing_metadata((("x-t", "tv"), ("x-t-bin", b"\x00\x01\xfe")))
        return b"echo:" + request

    async def sleepy(request: bytes, context: Any) -> bytes:
        rec.started.set()
        try:
            await asyncio.sleep(float(request))
        except asyncio.CancelledError:
            rec.cancelled.set()
            raise
        return b"slept"

    async def generate(request: bytes, context: Any) -> AsyncIterator[bytes]:
        count, size = (int(x) for x in request.split(b","))
        for i in range(count):
            yield i.to_bytes(4, "big") + b"g" * size

    async def writes(request: bytes, context: Any) -> None:
        count, size = (int(x) for x in request.split(b","))
        for i in range(count):
            await context.write(i.to_bytes(4, "big") + b"w" * size)

    async def one_then_wait(request: bytes, context: Any) -> None:
        await context.write(b"first")
        rec.started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            rec.cancelled.set()
            raise

    async def total(requests: AsyncIterator[bytes], context: Any) -> bytes:
        return str(sum([len(r) async for r in requests])).encode()

    async def chat(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async for request in requests:
            yield b"re:" + request

    async def abort_from_reader(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        # as TelemetryHub: another task reads the requests, and grpc_guard aborts from there on a bad one
        async def read() -> None:
            async for request in requests:
                if request == b"bad":
                    await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad request")

        reader = asyncio.create_task(read())
        try:
            await asyncio.sleep(30)
            yield b"never"
        except asyncio.CancelledError:
            rec.cancelled.set()
            raise
        finally:
            reader.cancel()

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Unary": grpc.unary_unary_rpc_method_handler(unary),
            "Sleepy": grpc.unary_unary_rpc_method_handler(sleepy),
            "Generate": grpc.unary_stream_rpc_method_handler(generate),
            "Writes": grpc.unary_stream_rpc_method_handler(writes),
            "OneThenWait": grpc.unary_stream_rpc_method_handler(one_then_wait),
            "Total": grpc.stream_unary_rpc_method_handler(total),
            "Chat": grpc.stream_stream_rpc_method_handler(chat),
            "AbortFromReader": grpc.stream_stream_rpc_method_handler(abort_from_reader),
        },
    )


class ServerThread:
    """An H2Server (behind grpc_guard, as the broker builds it) on an event loop of its own thread."""

    def __init__(self, options: tuple[tuple[str, int], ...] = ()) -> None:
        self.recorder = Recorder()
        self.loop = asyncio.new_event_loop()
        self.server = H2Server([("grpc.max_receive_message_length", MAX_RECEIVE), *options])
        guarded_server(self.server).add_generic_rpc_handlers((_handlers(self.recorder),))
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.run(self.server.start())

    def run(self, coro: Any, timeout: float = 20) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.run(self.server.stop(None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture
def served() -> Iterator[ServerThread]:
    server = ServerThread()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def channel(served: ServerThread) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{served.port}") as ch:
        yield ch


def _method(name: str) -> str:
    return f"/{SERVICE}/{name}"


def test_unary_round_trip_and_peer(served: ServerThread, channel: grpc.Channel) -> None:
    assert channel.unary_unary(_method("Unary"))(b"hi", timeout=5) == b"echo:hi"
    assert served.recorder.peer.startswith("ipv4:127.0.0.1:")
    assert 0 < (served.recorder.remaining or 0) <= 5


@pytest.mark.parametrize("kind", ["Generate", "Writes"])
def test_server_stream_past_the_flow_control_window(channel: grpc.Channel, kind: str) -> None:
    # 5,000 x 204 bytes is ~1 MB: sixteen times the client's initial 64 KiB stream window
    got = list(channel.unary_stream(_method(kind))(b"5000,200", timeout=20))
    assert len(got) == 5000
    assert [int.from_bytes(m[:4], "big") for m in got] == list(range(5000))
    assert all(len(m) == 204 for m in got)


def test_large_messages_cross_frames(channel: grpc.Channel) -> None:
    got = list(channel.unary_stream(_method("Writes"))(b"20,300000", timeout=20))
    assert [len(m) for m in got] == [300_004] * 20


def test_client_stream_and_bidi(channel: grpc.Channel) -> None:
    assert channel.stream_unary(_method("Total"))(iter([b"a" * 10, b"b" * 20, b""]), timeout=5) == b"30"
    # answers arrive while the request stream is still open: each is read before the next request is sent
    replies = channel.stream_stream(_method("Chat"))
    outbox: list[bytes] = []
    ready = threading.Condition()

    def requests() -> Iterator[bytes]:
        for i in range(50):
            with ready:
                ready.wait_for(lambda i=i: len(outbox) >= i, timeout=5)
            yield f"m{i}".encode()

    for reply in replies(requests(), timeout=20):
        with ready:
            outbox.append(reply)
            ready.notify_all()
    assert outbox == [f"re:m{i}".encode() for i in range(50)]


def test_deadline_cancels_the_handler(served: ServerThread, channel: grpc.Channel) -> None:
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary(_method("Sleepy"))(b"10", timeout=0.3)
    assert err.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert served.recorder.cancelled.wait(3), "the handler ran on past its deadline"
    assert time.monotonic() - started < 3


def test_client_cancel_cancels_the_handler(served: ServerThread, channel: grpc.Channel) -> None:
    call = channel.unary_stream(_method("OneThenWait"))(b"", timeout=20)
    assert next(call) == b"first"
    assert served.recorder.started.wait(5)
    call.cancel()
    assert served.recorder.cancelled.wait(5), "the handler was not cancelled with its call"


def test_abort_code_and_non_ascii_message(channel: grpc.Channel) -> None:
    details = "not here: 'Ünïcödé' 100% gone\nsecond line ✓"
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary(_method("Unary"))(b"abort:" + details.encode(), timeout=5)
    assert err.value.code() is grpc.StatusCode.NOT_FOUND
    assert err.value.details() == details


def test_abort_from_another_task_ends_the_call(served: ServerThread, channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as err:
        list(channel.stream_stream(_method("AbortFromReader"))(iter([b"ok", b"bad"]), timeout=10))
    assert err.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == "bad request"
    assert served.recorder.cancelled.wait(5), "the handler went on after its call was aborted"


def test_handler_exception_is_unknown_with_a_message(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary(_method("Unary"))(b"raise", timeout=5)
    assert err.value.code() is grpc.StatusCode.UNKNOWN
    assert "handler bug" in (err.value.details() or "")


def test_metadata_round_trip_with_binary_values(served: ServerThread, channel: grpc.Channel) -> None:
    sent = (("x-plain", "value 1"), ("x-blob-bin", b"\x00\xff\x10binary"))
    response, call = channel.unary_unary(_method("Unary")).with_call(b"trailing", metadata=sent, timeout=5)
    assert response == b"echo:trailing"
    seen = dict(served.recorder.metadata)
    assert seen["x-plain"] == "value 1"
    assert seen["x-blob-bin"] == b"\x00\xff\x10binary"
    assert "grpc-timeout" not in seen and "content-type" not in seen
    trailing = dict(call.trailing_metadata() or ())
    assert trailing["x-t"] == "tv"
    assert trailing["x-t-bin"] == b"\x00\x01\xfe"


def test_unknown_method_is_unimplemented(channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary(f"/{SERVICE}/Nope")(b"", timeout=5)
    assert err.value.code() is grpc.StatusCode.UNIMPLEMENTED


def test_oversize_request_is_refused_before_the_handler(served: ServerThread, channel: grpc.Channel) -> None:
    with pytest.raises(grpc.RpcError) as err:
        channel.unary_unary(_method("Unary"))(b"x" * (MAX_RECEIVE + 1), timeout=5)
    assert err.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert served.recorder.calls == 0
    # the connection is still good
    assert channel.unary_unary(_method("Unary"))(b"x" * MAX_RECEIVE, timeout=5) == b"echo:" + b"x" * MAX_RECEIVE


@pytest.mark.parametrize("compression", [grpc.Compression.Gzip, grpc.Compression.Deflate])
def test_compressed_requests_are_decoded(served: ServerThread, compression: grpc.Compression) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{served.port}", compression=compression) as ch:
        assert ch.unary_unary(_method("Unary"))(b"z" * 5000, timeout=5) == b"echo:" + b"z" * 5000
        assert list(ch.stream_stream(_method("Chat"))(iter([b"y" * 3000]), timeout=5)) == [b"re:" + b"y" * 3000]


def _raw_exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(payload)
        chunks = []
        while True:
            try:
                chunk = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def test_http1_and_garbage_do_not_disturb_other_connections(served: ServerThread, channel: grpc.Channel) -> None:
    assert channel.unary_unary(_method("Unary"))(b"before", timeout=5) == b"echo:before"
    answer = _raw_exchange(served.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert b"HTTP/1.1 505" in answer  # after the server's SETTINGS, which go out before the client says anything
    _raw_exchange(served.port, b"\x00\x01garbage" * 100)
    # an HTTP/2 preface followed by nonsense frames: a protocol error for that connection alone
    _raw_exchange(served.port, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\xff" * 64)
    assert channel.unary_unary(_method("Unary"))(b"after", timeout=5) == b"echo:after"
    with grpc.insecure_channel(f"127.0.0.1:{served.port}") as fresh:
        assert fresh.unary_unary(_method("Unary"))(b"fresh", timeout=5) == b"echo:fresh"


def test_a_connection_that_never_says_http2_is_closed() -> None:
    served = ServerThread((("grpc.server_handshake_timeout_ms", 300),))
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=5) as sock:
            sock.sendall(b"PRI * HTTP/2.0\r\n")  # half a preface, then silence
            started = time.monotonic()
            while sock.recv(65536):  # the server's SETTINGS, then the end of the stream
                pass
            assert time.monotonic() - started < 3
        with grpc.insecure_channel(f"127.0.0.1:{served.port}") as ch:  # a client that speaks is not cut off
            call = ch.unary_unary(_method("Sleepy"))
            assert call(b"0.5", timeout=5) == b"slept"
    finally:
        served.close()


def _raw_h2_request(port: int, headers: list[tuple[bytes, bytes]]) -> list[object]:
    """One request from a bare h2 client (grpcio refuses to send malformed metadata); the events it got back."""
    config = H2Configuration(client_side=True, header_encoding=None)
    config.validate_outbound_headers = config.normalize_outbound_headers = False  # send them as they are
    conn = H2Connection(config)
    conn.initiate_connection()
    events: list[object] = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        stream_id = conn.get_next_available_stream_id()
        conn.send_headers(stream_id, headers)
        conn.send_data(stream_id, b"\x00\x00\x00\x00\x02hi", end_stream=True)
        sock.sendall(conn.data_to_send())
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(isinstance(e, StreamReset | StreamEnded) for e in events):
            data = sock.recv(65536)
            if not data:
                break
            events.extend(conn.receive_data(data))
            sock.sendall(conn.data_to_send())
    return events


def test_malformed_headers_reset_the_stream_alone(served: ServerThread, channel: grpc.Channel) -> None:
    base = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", _method("Unary").encode())]
    base += [(b":authority", b"x"), (b"content-type", b"application/grpc"), (b"te", b"trailers")]
    for bad in ((b"x-evil", b"a\r\nb"), (b"X-Upper", b"v"), (b"x-nul", b"a\x00")):
        events = _raw_h2_request(served.port, [*base, bad])
        resets = [e for e in events if isinstance(e, StreamReset)]
        assert resets and resets[0].error_code == ErrorCodes.PROTOCOL_ERROR, (bad, events)
    assert served.recorder.calls == 0
    # the same request, well formed, is served
    events = _raw_h2_request(served.port, [*base, (b"x-fine", b"v")])
    assert any(isinstance(e, StreamEnded) for e in events) and served.recorder.calls == 1
    assert channel.unary_unary(_method("Unary"))(b"still", timeout=5) == b"echo:still"


def test_many_concurrent_streams(channel: grpc.Channel) -> None:
    sleepy = channel.unary_unary(_method("Sleepy"))
    futures = [sleepy.future(b"0.2", timeout=20) for _ in range(300)]
    started = time.monotonic()
    assert [f.result() for f in futures] == [b"slept"] * 300
    assert time.monotonic() - started < 10  # concurrent, not one after another (300 x 0.2 s = 60 s)
    generate = channel.unary_stream(_method("Generate"))
    with ThreadPoolExecutor(8) as pool:
        counts = list(pool.map(lambda _: sum(1 for _ in generate(b"500,100", timeout=20)), range(16)))
    assert counts == [500] * 16


def test_graceful_stop_finishes_the_call_in_flight(served: ServerThread, channel: grpc.Channel) -> None:
    future = channel.unary_unary(_method("Sleepy")).future(b"0.5", timeout=10)
    assert served.recorder.started.wait(5)
    served.run(served.server.stop(5))
    assert future.result() == b"slept"
    assert not served.recorder.cancelled.is_set()
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", served.port), timeout=1).close()


def test_stop_past_the_grace_cancels_the_call(served: ServerThread, channel: grpc.Channel) -> None:
    future = channel.unary_unary(_method("Sleepy")).future(b"20", timeout=10)
    assert served.recorder.started.wait(5)
    served.run(served.server.stop(0.3))
    assert served.recorder.cancelled.wait(3)
    with pytest.raises(grpc.RpcError) as err:
        future.result()
    assert err.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED)


def test_a_data_frame_repr_does_not_hex_encode_its_payload() -> None:
    # h2 computes repr(frame) for every frame it receives (orbitmq/h2grpc/protocol.py)
    frame = DataFrame(1, data=b"x" * 1_000_000)
    started = time.perf_counter()
    for _ in range(100):
        text = repr(frame)
    assert "1000000 bytes" in text
    assert time.perf_counter() - started < 0.05  # hex-encoding 1 MB a hundred times takes ~0.5 s


def test_wire_helpers() -> None:
    assert parse_timeout(b"2999m") == pytest.approx(2.999)
    assert parse_timeout(b"1S") == 1.0
    with pytest.raises(WireError):
        parse_timeout(b"123456789S")
    assert encode_message("a%b\n") == b"a%25b%0A"
    reader = MessageReader(100, "gzip")
    body = gzip.compress(b"q" * 50)
    framed = b"\x01" + len(body).to_bytes(4, "big") + body + b"\x00\x00\x00\x00\x02ok"
    assert reader.feed(framed[:3]) == []
    assert reader.feed(framed[3:]) == [b"q" * 50, b"ok"]
    bomb = gzip.compress(b"q" * 1000)
    with pytest.raises(WireError) as err:
        MessageReader(100, "gzip").feed(b"\x01" + len(bomb).to_bytes(4, "big") + bomb)
    assert err.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
