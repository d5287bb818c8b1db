"""The frame transport against real broker processes: oms's unary calls ride RemotingCommand frames once the broker
says where, with the same answers, errors, deadlines and ACL as over gRPC; a restarted broker is found again."""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

import oms
from oms.client.frames import FrameChannel, FrameRpcError
from oms.client.rpc import ChannelPool
from oms.errors import OMSSecurityException
from orbitmq.message_batch import BatchEntry, encode_message_batch
from orbitmq.proto import (
    consume_pb2,
    consume_pb2_grpc,
    pop_pb2,
    pop_pb2_grpc,
    produce_pb2,
    produce_pb2_grpc,
    transport_pb2,
    transport_pb2_grpc,
)
from orbitmq.remoting.codec import RemotingCommand, decode, encode
from orbitmq.remoting.codes import ResponseCode, SerializeType
from orbitmq.remoting.grpc_frames import (
    MAX_FRAME_BODY_BYTES,
    METHOD_FIELD,
    STATUS_FIELD,
    GrpcFrameDispatcher,
    OrbitRequestCode,
    request_frame,
)
from orbitmq.v2.signature import signing_metadata
from tests.broker.v2client import METADATA
from tests.conftest import BrokerHandle
from tests.oms.helpers import bodies
from tests.remoting.client import remoting_call
from tests.waiting import wait_until

SEND_BATCH = "/orbitmq.produce.Produce/SendBatch"
OK = definition_pb2.Code.OK


def frames_addr(addr: str) -> tuple[str, int]:
    with grpc.insecure_channel(addr) as ch:
        answer = transport_pb2_grpc.TransportsStub(ch).Describe(transport_pb2.DescribeTransportsRequest(), timeout=10)
    host, _, port = answer.frames_addr.rpartition(":")
    assert host and port.isdigit(), f"the broker offers no frame listener: {answer}"
    assert answer.max_frame_bytes == MAX_FRAME_BODY_BYTES
    return host, int(port)


def frame_channels(ap: oms.MessagingAccessPoint) -> list[FrameChannel]:
    return [ch for ch in ap._runtime.pool._frames.values() if ch is not None]


def direct_connections(ap: oms.MessagingAccessPoint) -> dict[tuple[str, int], int]:
    """Per frame address, the pooled blocking connections synchronous sends made on the caller's thread."""
    return {address: len(conns) for address, conns in ap._runtime.pool.direct._idle.items() if conns}


def batch_request(topic: str, n: int, prefix: str) -> produce_pb2.SendBatchRequest:
    entries = [BatchEntry(0, f"{prefix}-{i}".encode(), {"UNIQ_KEY": f"{prefix.upper()}{i:030X}"}) for i in range(n)]
    return produce_pb2.SendBatchRequest(topic=topic, queue_id=-1, count=n, messages=encode_message_batch(entries))


def test_oms_calls_ride_frames_once_the_broker_says_where(shared_broker: BrokerHandle) -> None:
    topic = "FramesT"
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{shared_broker.addr}/") as ap,
        ap.create_producer(operation_timeout=10_000) as producer,
    ):
        producer.send(oms.BytesMessage(b"first", topic))  # over gRPC: the broker is asked about frames meanwhile
        wait_until(lambda: frame_channels(ap), timeout=10)
        [channel] = frame_channels(ap)
        assert (channel.host, channel.port) == frames_addr(shared_broker.addr)
        before = channel.calls
        sent = [producer.send(oms.BytesMessage(f"one-{i}".encode(), topic)).message_id for i in range(5)]
        # synchronous sends go over frames on the caller's own connection (oms/client/direct.py)
        assert direct_connections(ap) == {(channel.host, channel.port): 1}
        assert channel.calls == before
        results = producer.send_batch([oms.BytesMessage(f"batch-{i}".encode(), topic) for i in range(50)])
        assert len(results) == 50 and len(set(sent)) == 5
        assert direct_connections(ap) == {(channel.host, channel.port): 1}  # SendBatch too, on the same connection
        aio_batch = [oms.BytesMessage(f"batch-aio-{i}".encode(), topic) for i in range(5)]
        assert len(asyncio.run(producer.aio().send_batch(aio_batch))) == 5
        assert channel.calls >= before + 1  # the asyncio face's SendBatch went over the loop's frame connection
        with ap.create_pull_consumer(consumer_id="FramesG") as consumer:
            consumer.attach_queue(topic)
            queues = consumer.queues(topic)
            calls = channel.calls
            pulled = [m for q in queues for m in consumer.pull(q, 0, 256, 0).messages]
            assert channel.calls >= calls + len(queues)  # PullBatch too
    expected = {
        b"first",
        *(f"one-{i}".encode() for i in range(5)),
        *(f"batch-{i}".encode() for i in range(50)),
        *(f"batch-aio-{i}".encode() for i in range(5)),
    }
    assert {m.body for m in pulled} == expected
    assert sorted(bodies(shared_broker.addr, topic)) == sorted(expected)  # the same store v2 clients read


def test_frames_answer_as_grpc_does(shared_broker: BrokerHandle) -> None:
    """Business errors come back in the response status on both transports; transport errors as gRPC codes."""
    host, port = frames_addr(shared_broker.addr)

    async def scenario() -> None:
        channel = FrameChannel(host, port)
        try:
            stub = produce_pb2_grpc.ProduceStub(channel)
            ok = await stub.SendBatch(batch_request("FramesAnswersT", 3, "fa"), metadata=METADATA, timeout=10)
            assert ok.status.code == OK and len(ok.commitlog_offsets) == 3
            bad = produce_pb2.SendBatchRequest(topic="bad topic!", queue_id=-1, count=1, messages=b"")
            framed = await stub.SendBatch(bad, metadata=METADATA, timeout=10)
            async with grpc.aio.insecure_channel(shared_broker.addr) as ch:
                direct = await produce_pb2_grpc.ProduceStub(ch).SendBatch(bad, metadata=METADATA, timeout=10)
            assert framed.status.code != OK and framed.status == direct.status

            # a long poll longer than the caller's deadline ends within it, empty, as over gRPC (deadline sent along)
            one = batch_request("FramesPollT", 1, "fp")
            one.queue_id = 0
            assert (await stub.SendBatch(one, metadata=METADATA, timeout=10)).status.code == OK
            pull = consume_pb2.PullBatchRequest(
                group="FramesG", topic="FramesPollT", queue_id=0, offset=1, long_polling_ms=5000
            )
            started = time.monotonic()
            empty = await consume_pb2_grpc.ConsumeStub(channel).PullBatch(pull, metadata=METADATA, timeout=1.0)
            assert empty.status.code == definition_pb2.Code.MESSAGE_NOT_FOUND and not empty.records
            assert time.monotonic() - started < 1.0

            # streams stay on gRPC
            with pytest.raises(FrameRpcError) as stream:
                service_pb2_grpc.MessagingServiceStub(channel).ReceiveMessage(service_pb2.ReceiveMessageRequest())
            assert stream.value.code() == grpc.StatusCode.UNIMPLEMENTED

            # a request over the frame limit is refused before anything is sent
            huge = produce_pb2.SendBatchRequest(topic="FramesAnswersT", messages=b"x" * (MAX_FRAME_BODY_BYTES + 1))
            with pytest.raises(FrameRpcError) as too_big:
                await stub.SendBatch(huge, metadata=METADATA, timeout=10)
            assert too_big.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "frame limit" in too_big.value.details()

            # the channel is still good after all that
            again = await stub.SendBatch(batch_request("FramesAnswersT", 1, "fb"), metadata=METADATA, timeout=10)
            assert again.status.code == OK
        finally:
            await channel.close()

    asyncio.run(scenario())


def test_a_call_given_up_stops_its_handler_on_the_broker(shared_broker: BrokerHandle) -> None:
    """As gRPC cancels the server's handler: a cancelled long-polling receive must not pop a later message for
    nobody (it would stay invisible for the whole invisible time)."""
    host, port = frames_addr(shared_broker.addr)
    topic, group = "FramesCancelT", "FramesCancelG"

    async def scenario() -> None:
        channel = FrameChannel(host, port)
        try:
            produce = produce_pb2_grpc.ProduceStub(channel)
            pop = pop_pb2_grpc.PopStub(channel)
            first = batch_request(topic, 1, "c0")
            first.queue_id = 0
            assert (await produce.SendBatch(first, metadata=METADATA, timeout=10)).status.code == OK

            def receive(long_polling_ms: int) -> pop_pb2.ReceiveBatchRequest:
                return pop_pb2.ReceiveBatchRequest(
                    group=group, topic=topic, queue_id=0, batch_size=8, invisible_ms=60_000,
                    long_polling_ms=long_polling_ms,
                )  # fmt: skip

            drained = await pop.ReceiveBatch(receive(0), metadata=METADATA, timeout=10)
            assert drained.status.code == OK and len(drained.receipt_handles) == 1
            parked = asyncio.ensure_future(pop.ReceiveBatch(receive(8_000), metadata=METADATA, timeout=20))
            await asyncio.sleep(0.5)
            parked.cancel()
            await asyncio.sleep(0.3)
            later = batch_request(topic, 1, "c1")
            later.queue_id = 0
            assert (await produce.SendBatch(later, metadata=METADATA, timeout=10)).status.code == OK
            got = await pop.ReceiveBatch(receive(3_000), metadata=METADATA, timeout=10)
            assert got.status.code == OK and len(got.receipt_handles) == 1  # not taken by the cancelled poll
        finally:
            await channel.close()

    asyncio.run(scenario())


def test_a_silent_or_absent_server_fails_the_call_in_time() -> None:
    """No answer within the deadline: DEADLINE_EXCEEDED; nobody listening: UNAVAILABLE (the caller may retry)."""

    async def scenario() -> None:
        async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.read()  # reads requests, never answers
            writer.close()

        server = await asyncio.start_server(mute, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        channel = FrameChannel("127.0.0.1", port)
        stub = produce_pb2_grpc.ProduceStub(channel)
        started = time.monotonic()
        with pytest.raises(FrameRpcError) as late:
            await stub.SendBatch(batch_request("T", 1, "m"), metadata=METADATA, timeout=0.3)
        assert late.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED and time.monotonic() - started < 2
        await channel.close()
        server.close()
        await server.wait_closed()
        gone = FrameChannel("127.0.0.1", port)
        with pytest.raises(FrameRpcError) as refused:
            await produce_pb2_grpc.ProduceStub(gone).SendBatch(batch_request("T", 1, "m"), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE

    asyncio.run(scenario())


def test_a_server_that_stops_reading_fails_the_calls_in_time() -> None:
    """A broker that stops reading (stalled, not gone): the requests fill the socket, calls wait for it to drain,
    and that wait ends at the call's deadline (DEADLINE_EXCEEDED), not when the connection is finally lost; one
    caller cancelling meanwhile leaves the others' waits alone."""
    stalled_s = 20.0  # the server holds the connection open this long without reading a byte

    async def scenario() -> None:
        async def stalled(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await asyncio.sleep(stalled_s)
            writer.close()

        server = await asyncio.start_server(stalled, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        channel = FrameChannel("127.0.0.1", port)
        stub = produce_pb2_grpc.ProduceStub(channel)
        big = produce_pb2.SendBatchRequest(topic="T", queue_id=-1, count=1, messages=b"x" * (12 << 20))
        started = time.monotonic()
        # more than the two sockets' buffers hold (tcp_rmem/wmem autotune to tens of MiB): the later calls wait
        calls = [asyncio.ensure_future(stub.SendBatch(big, metadata=METADATA, timeout=1.0)) for _ in range(8)]
        await asyncio.sleep(0.3)
        calls[-1].cancel()  # a caller giving up while calls wait for the socket must not end the others' waits
        outcomes = await asyncio.gather(*calls[:-1], return_exceptions=True)
        elapsed = time.monotonic() - started
        await channel.close()
        server.close()
        assert all(isinstance(o, FrameRpcError) for o in outcomes), outcomes
        assert {o.code() for o in outcomes if isinstance(o, FrameRpcError)} == {grpc.StatusCode.DEADLINE_EXCEEDED}
        assert elapsed < stalled_s / 2, f"the calls ended after {elapsed:.1f} s, with the connection"

    asyncio.run(scenario())


def test_answers_are_matched_however_the_bytes_arrive() -> None:
    """The client cuts answers from the socket's bytes itself: answers coalesced into one write, one split at every
    byte, and a split length field all reach their own callers; a malformed frame fails the calls in flight with
    UNAVAILABLE naming it and the channel connects again for the next call."""

    async def scenario() -> None:
        malformed = asyncio.Event()

        async def scripted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            requests: list[RemotingCommand] = []
            while True:
                try:
                    (total,) = struct.unpack(">i", await reader.readexactly(4))
                    requests.append(decode(await reader.readexactly(total)))
                except asyncio.IncompleteReadError:
                    writer.close()
                    return
                if malformed.is_set():
                    writer.write(struct.pack(">i", 12) + b"\x07" * 12)  # a header length beyond the frame
                    await writer.drain()
                    continue
                if len(requests) < 3:
                    continue  # answer three at once
                answers = []
                for cmd in reversed(requests):  # out of order: matched by opaque, not position
                    answer = cmd.response(ResponseCode.SUCCESS)
                    answer.body = cmd.body * 3
                    answers.append(encode(answer))
                requests.clear()
                first, rest = answers[0], b"".join(answers[1:])
                for i in range(len(first)):  # one byte at a time, the length field too
                    writer.write(first[i : i + 1])
                    await writer.drain()
                    await asyncio.sleep(0)
                writer.write(rest)  # two frames in one write
                await writer.drain()

        server = await asyncio.start_server(scripted, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        channel = FrameChannel("127.0.0.1", port)
        call = channel.unary_unary("/t.T/Echo")
        try:
            bodies = [b"a" * 70_000, b"b", b"c" * 3]
            answers = await asyncio.wait_for(asyncio.gather(*(call(b, timeout=10) for b in bodies)), 30)
            assert answers == [b * 3 for b in bodies]
            again = await asyncio.wait_for(asyncio.gather(*(call(b, timeout=10) for b in bodies)), 30)
            assert again == answers
            malformed.set()
            with pytest.raises(FrameRpcError) as bad:
                await call(b"x", timeout=10)
            assert bad.value.code() == grpc.StatusCode.UNAVAILABLE and "malformed" in bad.value.details()
            malformed.clear()
            after = await asyncio.wait_for(asyncio.gather(*(call(b, timeout=10) for b in bodies)), 30)
            assert after == answers  # a new connection
        finally:
            await channel.close()
            server.close()
            await server.wait_closed()

    asyncio.run(scenario())


def test_the_server_ends_a_handler_at_the_callers_deadline() -> None:
    """The dispatcher runs a handler in the frame's own task under the caller's deadline: past it the answer is
    DEADLINE_EXCEEDED and the handler is stopped; with no time left the handler never starts; within it the
    handler's answer comes back."""
    started: list[bytes] = []
    finished: list[bytes] = []

    async def slow(request: bytes, context: object) -> bytes:
        started.append(request)
        await asyncio.sleep(float(request.decode()))
        finished.append(request)
        return request

    generic = grpc.method_handlers_generic_handler("t.T", {"Slow": grpc.unary_unary_rpc_method_handler(slow)})
    dispatcher = GrpcFrameDispatcher([generic])

    def frame(body: bytes, timeout_ms: int) -> RemotingCommand:
        return decode(encode(request_frame("/t.T/Slow", body, METADATA, timeout_ms, 1))[4:])

    async def scenario() -> None:
        late = await asyncio.wait_for(dispatcher(frame(b"5", 200), "127.0.0.1:1"), 10)
        assert late.code == ResponseCode.SYSTEM_ERROR
        assert late.ext_fields[STATUS_FIELD] == str(grpc.StatusCode.DEADLINE_EXCEEDED.value[0])
        assert "deadline of 200 ms" in (late.remark or "")
        assert started == [b"5"] and finished == []
        none_left = await asyncio.wait_for(dispatcher(frame(b"0", 0), "127.0.0.1:1"), 10)
        assert none_left.ext_fields[STATUS_FIELD] == str(grpc.StatusCode.DEADLINE_EXCEEDED.value[0])
        assert started == [b"5"]  # not started
        ok = await asyncio.wait_for(dispatcher(frame(b"0.01", 5000), "127.0.0.1:1"), 10)
        assert ok.code == ResponseCode.SUCCESS and ok.body == b"0.01" and finished == [b"0.01"]

    asyncio.run(scenario())


def test_bad_frames_get_clear_answers(shared_broker: BrokerHandle) -> None:
    host, port = frames_addr(shared_broker.addr)

    def call(method: str, body: bytes) -> RemotingCommand:
        cmd = RemotingCommand(
            int(OrbitRequestCode.GRPC_UNARY),
            7,
            ext_fields={METHOD_FIELD: method, **dict(METADATA)},
            body=body,
            serialize_type=SerializeType.ROCKETMQ,
        )
        return remoting_call(port, cmd)

    garbage = call(SEND_BATCH, b"\xff\xff\xff\xff")
    assert garbage.code == ResponseCode.SYSTEM_ERROR and garbage.opaque == 7
    assert "SendBatch" in (garbage.remark or "") and "SendBatchRequest" in (garbage.remark or "")
    unknown = call("/orbitmq.produce.Produce/Nothing", b"")
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "Nothing" in (unknown.remark or "")
    stream = call("/apache.rocketmq.v2.MessagingService/ReceiveMessage", b"")
    assert stream.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    # garbage bytes close that connection only: framed calls on another go on
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", 12) + b"\x07" * 12)
        sock.settimeout(10)
        assert sock.recv(64) == b""
    ok = call(SEND_BATCH, batch_request("FramesBadT", 1, "fc").SerializeToString())
    assert ok.code == ResponseCode.SUCCESS
    assert produce_pb2.SendBatchResponse.FromString(ok.body).status.code == OK


ACL = """
accounts:
  - accessKey: frameAK
    secretKey: frameSecret1
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: DENY
    topicPerms:
      - FramesAclT=PUB|SUB
"""


@pytest.fixture
def acl_broker(broker_factory, tmp_path: Path) -> BrokerHandle:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    return broker_factory.broker(options={"aclEnable": "true", "aclFile": str(acl_file)})


def test_acl_holds_over_frames(acl_broker: BrokerHandle) -> None:
    host, port = frames_addr(acl_broker.addr)

    async def send(topic: str, metadata: tuple[tuple[str, str], ...]) -> int:
        channel = FrameChannel(host, port)
        try:
            stub = produce_pb2_grpc.ProduceStub(channel)
            answer = await stub.SendBatch(batch_request(topic, 1, "acl"), metadata=metadata, timeout=10)
            return int(answer.status.code)
        finally:
            await channel.close()

    signed = (*METADATA, *signing_metadata("frameAK", "frameSecret1"))
    assert asyncio.run(send("FramesAclT", signed)) == OK
    assert asyncio.run(send("FramesAclOther", signed)) == definition_pb2.Code.FORBIDDEN
    assert asyncio.run(send("FramesAclT", METADATA)) == definition_pb2.Code.UNAUTHORIZED
    badly_signed = (*METADATA, *signing_metadata("frameAK", "wrongSecret1"))
    assert asyncio.run(send("FramesAclT", badly_signed)) == definition_pb2.Code.UNAUTHORIZED

    url = f"oms:rocketmq://{acl_broker.addr}/"
    with (
        oms.get_messaging_access_point(url, access_key="frameAK", secret_key="wrongSecret1") as ap,
        ap.create_producer(operation_timeout=5_000) as producer,
    ):
        with pytest.raises(OMSSecurityException):
            producer.send(oms.BytesMessage(b"x", "FramesAclT"))
        wait_until(lambda: frame_channels(ap), timeout=10)
        with pytest.raises(OMSSecurityException):
            producer.send(oms.BytesMessage(b"x", "FramesAclT"))  # now over frames: refused the same way
        assert frame_channels(ap)[0].calls >= 1


@pytest.mark.timeout(120)
def test_a_restarted_broker_is_found_again(broker_factory) -> None:
    broker = broker_factory.broker()
    topic = "FramesRestartT"
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer(operation_timeout=10_000) as producer,
    ):
        producer.send(oms.BytesMessage(b"before-0", topic))
        wait_until(lambda: frame_channels(ap), timeout=10)
        old_port = frame_channels(ap)[0].port
        producer.send(oms.BytesMessage(b"before-1", topic))
        broker.restart()  # a free remoting port again: most likely another one
        sent = []
        deadline = time.monotonic() + 60
        while len(sent) < 20 and time.monotonic() < deadline:
            try:
                producer.send(oms.BytesMessage(f"after-{len(sent)}".encode(), topic))
                sent.append(len(sent))
            except oms.OMSRuntimeException:
                time.sleep(0.2)  # the lost connection fails the call in flight; the next goes over gRPC
        assert len(sent) == 20
        wait_until(lambda: frame_channels(ap) and frame_channels(ap)[0].port == frames_addr(broker.addr)[1], timeout=15)
        new_address = (frame_channels(ap)[0].host, frame_channels(ap)[0].port)
        producer.send(oms.BytesMessage(b"after-last", topic))
        assert direct_connections(ap).get(new_address) == 1  # a synchronous send, over frames again
        assert (new_address[0], old_port) not in direct_connections(ap) or new_address[1] == old_port
    stored = set(bodies(broker.addr, topic))
    assert {b"before-0", b"before-1", b"after-last", *(f"after-{i}".encode() for i in range(20))} <= stored


def test_frames_stay_off_with_tls_or_when_disabled(shared_broker: BrokerHandle) -> None:
    assert not ChannelPool(grpc.ssl_channel_credentials()).frames_enabled
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{shared_broker.addr}/", frames_enable=False) as ap,
        ap.create_producer(operation_timeout=10_000) as producer,
    ):
        for i in range(3):
            producer.send(oms.BytesMessage(f"grpc-{i}".encode(), "FramesOffT"))
            time.sleep(0.1)
        assert not ap._runtime.pool._frames and not ap._runtime.pool._describing
