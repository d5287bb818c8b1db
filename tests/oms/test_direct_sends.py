"""Synchronous sends made on the caller's thread over pooled blocking frame connections (``oms/client/direct.py``):
against a real broker (stored, read back, a restart survived), and the pool's failure handling against real sockets
that misbehave (no answer, a stray answer, a closed connection, an error status)."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator

import grpc
import pytest

import oms
from oms.client.direct import DirectPool
from oms.client.frame_codec import FrameRpcError
from orbitmq.errors import Code
from orbitmq.remoting.codec import RemotingCommand, encode, iter_frames
from orbitmq.remoting.codes import ResponseCode
from orbitmq.remoting.grpc_frames import STATUS_FIELD
from tests.oms.helpers import create_topic
from tests.waiting import wait_until

METHOD = "/apache.rocketmq.v2.MessagingService/SendMessage"


def _direct_pool(producer: oms.Producer) -> DirectPool:
    core = producer._core
    assert core is not None
    return core.runtime.pool.direct


def _idle(pool: DirectPool) -> int:
    return sum(len(conns) for conns in pool._idle.values())


def _frames_known(producer: oms.Producer, topic: str) -> bool:
    core = producer._core
    assert core is not None
    route = core.routes.cached(topic)
    return route is not None and all(core.runtime.pool.frame_address(q.endpoint) for q in route.queues)


@pytest.mark.timeout(120)
def test_sync_sends_are_made_on_the_callers_thread_and_stored(broker):
    topic = "OmsDirectT"
    create_topic(broker.addr, topic)
    n = 50
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer() as producer,
        ap.create_pull_consumer(consumer_id="GDirectReader", consume_from_where="first") as consumer,
    ):
        producer.send(oms.BytesMessage(b"first", topic))  # on the loop: the route and the frame listener are learnt
        wait_until(lambda: _frames_known(producer, topic), timeout=10, what="the broker's frame listener")
        pool = _direct_pool(producer)
        assert _idle(pool) == 0
        results = [producer.send(oms.BytesMessage(f"m{i}".encode(), topic, keys=f"k{i}")) for i in range(n)]
        assert _idle(pool) == 1, "the sends did not go over a pooled direct connection"
        batched = producer.send_batch([oms.BytesMessage(f"b{i}".encode(), topic) for i in range(n)])
        columns = producer.send_columns(topic, [f"c{i}".encode() for i in range(n)])
        assert _idle(pool) == 1, "the batches did not reuse the pooled direct connection"
        results += [*batched, *columns]
        assert len({r.message_id for r in results}) == 3 * n
        assert all(r.ok and r.topic == topic for r in results)
        assert [r.queue_offset for r in batched] == list(range(batched[0].queue_offset, batched[0].queue_offset + n))

        consumer.attach_queue(topic)
        got: dict[str | None, bytes] = {}
        deadline = time.monotonic() + 30
        while len(got) < 3 * n + 1 and time.monotonic() < deadline:
            message = consumer.receive(1)
            if message is not None:
                got[message.message_id] = message.body
                if message.body.startswith(b"m"):
                    assert message.keys == [f"k{message.body.decode()[1:]}"]
                consumer.ack(message)
        sent = [f"{kind}{i}".encode() for kind in "mbc" for i in range(n)]
        assert {r.message_id: body for r, body in zip(results, sent, strict=True)}.items() <= got.items()


@pytest.mark.timeout(120)
def test_partition_ordered_batches_go_direct_into_the_chosen_queue(broker):
    topic = "OmsDirectPartitionT"
    create_topic(broker.addr, topic)

    def last_queue(queues: list[oms.MessageQueue], message: oms.BytesMessage, arg: object) -> oms.MessageQueue:
        return queues[-1]

    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer() as producer,
    ):
        producer.send(oms.BytesMessage(b"warm-up", topic))
        wait_until(lambda: _frames_known(producer, topic), timeout=10, what="the broker's frame listener")
        first = producer.send_batch([oms.BytesMessage(f"p{i}".encode(), topic) for i in range(20)], selector=last_queue)
        second = producer.send_batch([oms.BytesMessage(f"q{i}".encode(), topic) for i in range(9)], selector=last_queue)
        assert _idle(_direct_pool(producer)) == 1, "the selector batches did not go direct"
        assert {r.queue.queue_id for r in [*first, *second]} == {3}
        offsets = [r.queue_offset for r in [*first, *second]]
        assert offsets == list(range(offsets[0], offsets[0] + 29))  # one queue, in the order sent


@pytest.mark.timeout(180)
def test_a_restarted_broker_is_reached_again_after_its_pooled_connection_died(broker):
    topic = "OmsDirectRestartT"
    create_topic(broker.addr, topic)
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer(operation_timeout=5000) as producer,
    ):
        producer.send(oms.BytesMessage(b"warm-up", topic))
        wait_until(lambda: _frames_known(producer, topic), timeout=10, what="the broker's frame listener")
        producer.send(oms.BytesMessage(b"before", topic))
        assert _idle(_direct_pool(producer)) == 1
        broker.restart()

        def sent_after() -> bool:
            try:
                return producer.send(oms.BytesMessage(b"after", topic)).ok
            except (oms.OMSConnectionException, oms.OMSTimeOutException, oms.OMSRuntimeException):
                return False

        wait_until(sent_after, timeout=60, what="a send after the restart")
        wait_until(lambda: _frames_known(producer, topic), timeout=20, what="the frame listener again")
        for _ in range(5):
            assert producer.send(oms.BytesMessage(b"again", topic)).ok


@pytest.mark.timeout(120)
def test_a_send_the_broker_refuses_raises_its_error_from_the_callers_thread(broker_factory):
    broker = broker_factory.broker(options={"maxMessageSize": "1024"})
    topic = "OmsDirectRefusedT"
    create_topic(broker.addr, topic)
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer(compress_msg_body_over_howmuch=0) as producer,
    ):
        producer.send(oms.BytesMessage(b"warm-up", topic))
        wait_until(lambda: _frames_known(producer, topic), timeout=10, what="the broker's frame listener")
        with pytest.raises(oms.OMSException) as err:
            producer.send(oms.BytesMessage(b"y" * 2000, topic))
        assert err.value.code == Code.MESSAGE_BODY_TOO_LARGE and "1024" in str(err.value)
        assert _idle(_direct_pool(producer)) == 1  # answered on the direct connection, which stays in use
        assert producer.send(oms.BytesMessage(b"small", topic)).ok


@pytest.mark.timeout(120)
def test_a_failed_direct_attempt_is_retried_on_the_loop(broker, caplog):
    topic = "OmsDirectRetryT"
    create_topic(broker.addr, topic)
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer(operation_timeout=5000, retry_times_when_send_failed=2) as producer,
    ):
        producer.send(oms.BytesMessage(b"warm-up", topic))
        wait_until(lambda: _frames_known(producer, topic), timeout=10, what="the broker's frame listener")
        # the frame address stays known, but the direct connections refuse (as a broker gone between the
        # route and the call would): the attempt fails on the caller's thread and the loop sends it
        _direct_pool(producer).close()
        with caplog.at_level(logging.INFO, logger="oms.producer"):
            result = producer.send(oms.BytesMessage(b"retried", topic))
        assert result.ok
        direct_failures = [r for r in caplog.records if r.filename == "producer.py" and "(attempt 1/3)" in r.message]
        assert len(direct_failures) == 1, caplog.text
        assert "connections are closed" in direct_failures[0].message


# -- the pool against real sockets that misbehave ----------------------------------------------------------------


class FakeListener:
    """A frame listener on 127.0.0.1 whose answer to each request is ``reply(request)`` (None: no answer)."""

    def __init__(self, reply: Callable[[RemotingCommand], bytes | None]) -> None:
        self.reply = reply
        self.server = socket.create_server(("127.0.0.1", 0))
        self.address = ("127.0.0.1", self.server.getsockname()[1])
        self.accepted = 0
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            self._conns.append(conn)
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        pending = bytearray()
        while True:
            try:
                data = conn.recv(65536)
            except OSError:
                return
            if not data:
                return
            for request in list(iter_frames(pending, data)):
                out = self.reply(request)
                if out is not None:
                    try:
                        conn.sendall(out)
                    except OSError:
                        return

    def close(self) -> None:
        self.server.close()
        for conn in self._conns:
            conn.close()


@pytest.fixture
def listener_factory() -> Iterator[Callable[[Callable[[RemotingCommand], bytes | None]], FakeListener]]:
    made: list[FakeListener] = []

    def make(reply: Callable[[RemotingCommand], bytes | None]) -> FakeListener:
        made.append(FakeListener(reply))
        return made[-1]

    yield make
    for listener in made:
        listener.close()


def _ok(request: RemotingCommand) -> bytes:
    answer = request.response(ResponseCode.SUCCESS)
    answer.body = b"answer:" + request.body
    return encode(answer)


@pytest.mark.timeout(30)
def test_answers_come_back_and_the_connection_is_reused(listener_factory):
    listener = listener_factory(_ok)
    pool = DirectPool()
    try:
        for i in range(3):
            assert pool.call(listener.address, METHOD, f"r{i}".encode(), (), 5.0) == f"answer:r{i}".encode()
        assert listener.accepted == 1
    finally:
        pool.close()


@pytest.mark.timeout(30)
def test_an_idle_connection_the_broker_closed_is_not_lent_again(listener_factory):
    listener = listener_factory(_ok)
    pool = DirectPool()
    try:
        assert pool.call(listener.address, METHOD, b"a", (), 5.0) == b"answer:a"
        listener._conns[-1].shutdown(socket.SHUT_RDWR)  # a restarted broker's FIN (close alone waits for the reader)
        wait_until(lambda: pool._idle[listener.address][0].stale(), timeout=5, what="the close to arrive")
        assert pool.call(listener.address, METHOD, b"b", (), 5.0) == b"answer:b"  # a fresh connection, no error
        assert listener.accepted == 2
    finally:
        pool.close()


@pytest.mark.timeout(30)
def test_an_error_status_is_raised_and_the_connection_kept(listener_factory):
    def refuse(request: RemotingCommand) -> bytes:
        code = grpc.StatusCode.RESOURCE_EXHAUSTED.value[0]
        return encode(request.response(ResponseCode.SYSTEM_ERROR, "too big", **{STATUS_FIELD: code}))

    listener = listener_factory(refuse)
    pool = DirectPool()
    try:
        for _ in range(2):
            with pytest.raises(FrameRpcError) as err:
                pool.call(listener.address, METHOD, b"x", (), 5.0)
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "too big" in err.value.details()
        assert listener.accepted == 1  # an answered failure leaves the connection in step
    finally:
        pool.close()


@pytest.mark.timeout(30)
def test_no_answer_in_time_is_deadline_exceeded_and_the_connection_dropped(listener_factory):
    listener = listener_factory(lambda request: None)
    pool = DirectPool()
    try:
        started = time.monotonic()
        with pytest.raises(FrameRpcError) as err:
            pool.call(listener.address, METHOD, b"x", (), 0.3)
        assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert 0.25 <= time.monotonic() - started < 5
        assert _idle(pool) == 0  # its answer could still arrive: never lent again
    finally:
        pool.close()


@pytest.mark.timeout(30)
def test_a_stray_answer_or_a_closed_connection_is_unavailable(listener_factory):
    def stray(request: RemotingCommand) -> bytes:
        answer = request.response(ResponseCode.SUCCESS)
        answer.opaque += 1000
        return encode(answer)

    pool = DirectPool()
    try:
        with pytest.raises(FrameRpcError) as err:
            pool.call(listener_factory(stray).address, METHOD, b"x", (), 5.0)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert _idle(pool) == 0

        closing = listener_factory(lambda request: b"")
        closing.reply = lambda request: (closing._conns[-1].close(), None)[1]
        with pytest.raises(FrameRpcError) as err:
            pool.call(closing.address, METHOD, b"x", (), 5.0)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert _idle(pool) == 0

        with socket.socket() as s:  # nothing listens here
            s.bind(("127.0.0.1", 0))
            dead = ("127.0.0.1", s.getsockname()[1])
        with pytest.raises(FrameRpcError) as err:
            pool.call(dead, METHOD, b"x", (), 5.0)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        pool.close()


@pytest.mark.timeout(30)
def test_a_closed_pool_refuses_calls(listener_factory):
    listener = listener_factory(_ok)
    pool = DirectPool()
    assert pool.call(listener.address, METHOD, b"x", (), 5.0) == b"answer:x"
    pool.close()
    with pytest.raises(FrameRpcError) as err:
        pool.call(listener.address, METHOD, b"x", (), 5.0)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
