"""Natural batching of ``send_async`` and of the asyncio face's ``send`` (``oms/producer/coalesce.py``): many sends
in flight leave as few requests, each message still gets its own result, and failures reach every future."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time

import pytest

import oms
from oms.producer.base import SHUTDOWN_GRACE_S
from tests.oms.helpers import create_topic
from tests.oms.test_frames import frame_channels
from tests.oms.test_producer_fastbatch import SendBatchCalls
from tests.waiting import wait_until


def _read_back(consumer: oms.PullConsumer, topic: str, count: int) -> dict[str | None, oms.BytesMessage]:
    """``count`` messages of ``topic`` received and acked, by id; fails if fewer arrive."""
    consumer.attach_queue(topic)
    got: dict[str | None, oms.BytesMessage] = {}
    while len(got) < count:
        message = consumer.receive(5)
        assert message is not None, f"only {len(got)} of {count} messages read back"
        got[message.message_id] = message
        consumer.ack(message)
    return got


def _bodies(messages: dict[str | None, oms.BytesMessage]) -> dict[str | None, bytes]:
    return {message_id: m.body for message_id, m in messages.items()}


@pytest.mark.timeout(120)
def test_many_async_sends_leave_in_few_requests_with_a_result_each(broker):
    topic = "OmsCoalesceT"
    create_topic(broker.addr, topic)
    n = 3000
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer() as producer,
        ap.create_pull_consumer(consumer_id="GCoalesce", consume_from_where="first") as consumer,
    ):
        producer.send(oms.BytesMessage(b"warm-up", topic))
        wait_until(lambda: frame_channels(ap), timeout=10, what="the broker's frame listener")
        [channel] = frame_channels(ap)
        before = channel.calls
        batches = SendBatchCalls(producer)
        futures = [producer.send_async(oms.BytesMessage(f"a{i}".encode(), topic, keys=f"k{i}")) for i in range(n)]
        results = [f.result(timeout=30) for f in futures]
        calls = channel.calls - before
        assert calls < n / 10, f"{calls} requests for {n} sends: not batched"
        assert batches.answers, "no SendBatch went out"
        assert all(r.ok and r.topic == topic for r in results)
        assert len({r.message_id for r in results}) == n

        got = _read_back(consumer, topic, n + 1)
        assert {r.message_id: f"a{i}".encode() for i, r in enumerate(results)}.items() <= _bodies(got).items()
        assert all(m.keys == [f"k{m.body.decode()[1:]}"] for m in got.values() if m.body != b"warm-up")


def _aio_run(coro, timeout: float = 60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.mark.timeout(120)
def test_many_aio_sends_leave_in_few_requests_hooks_on_the_callers_loop(broker):
    topic = "OmsCoalesceAioT"
    create_topic(broker.addr, topic)
    n = 2000
    hook_threads: set[int] = set()

    class Recorder:
        def oms_after_send(self, message, result, error):
            hook_threads.add(threading.get_ident())

    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer().add_interceptor(Recorder()) as producer,
        ap.create_pull_consumer(consumer_id="GCoalesceAio", consume_from_where="first") as consumer,
    ):
        producer.send(oms.BytesMessage(b"warm-up", topic))
        wait_until(lambda: frame_channels(ap), timeout=10, what="the broker's frame listener")
        [channel] = frame_channels(ap)
        before = channel.calls
        batches = SendBatchCalls(producer)
        hook_threads.clear()

        async def main() -> list[oms.SendResult]:
            aio = producer.aio()
            return await asyncio.gather(*(aio.send(oms.BytesMessage(f"a{i}".encode(), topic)) for i in range(n)))

        loop_thread = threading.get_ident()  # asyncio.run runs the loop on this thread
        results = _aio_run(main())
        calls = channel.calls - before
        assert calls < n / 10, f"{calls} requests for {n} aio sends: not batched"
        assert batches.answers, "no SendBatch went out"
        assert all(r.ok and r.topic == topic for r in results)
        assert len({r.message_id for r in results}) == n
        assert hook_threads == {loop_thread}, "oms_after_send ran off the caller's loop"

        async def on_the_clients_loop() -> set[str]:  # the caller's loop is the access point's own
            aio = producer.aio()
            sent = await asyncio.gather(*(aio.send(oms.BytesMessage(b"own", topic)) for _ in range(200)))
            return {r.message_id for r in sent if r.ok}

        assert len(producer.loop_thread().run(on_the_clients_loop(), timeout=30)) == 200

        got = _bodies(_read_back(consumer, topic, n + 200 + 1))
        assert {r.message_id: f"a{i}".encode() for i, r in enumerate(results)}.items() <= got.items()


@pytest.mark.timeout(120)
def test_a_lone_send_goes_alone_and_a_cancelled_one_spares_the_rest(broker):
    topic = "OmsCoalesceLoneT"
    create_topic(broker.addr, topic)
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer() as producer,
    ):
        producer.send(oms.BytesMessage(b"warm-up", topic))
        batches = SendBatchCalls(producer)
        for i in range(5):  # one at a time: nothing queues, each is its own v2 SendMessage
            result = producer.send_async(oms.BytesMessage(f"l{i}".encode(), topic, tags="t")).result(timeout=10)
            assert result.ok and result.queue.queue_id == -1
        assert batches.answers == [], "a lone send waited to leave in a batch"

        async def lone() -> None:
            aio = producer.aio()
            for i in range(5):  # one at a time: nothing queues, each is its own v2 SendMessage
                result = await aio.send(oms.BytesMessage(f"l{i}".encode(), topic, tags="t"))
                assert result.ok and result.queue.queue_id == -1

        _aio_run(lone())
        assert batches.answers == [], "a lone aio send waited to leave in a batch"

        async def with_cancels() -> list[oms.SendResult | BaseException]:
            aio = producer.aio()
            tasks = [asyncio.create_task(aio.send(oms.BytesMessage(f"c{i}".encode(), topic))) for i in range(300)]
            await asyncio.sleep(0)  # every task handed its message to the producer
            for task in tasks[::3]:
                task.cancel()
            return await asyncio.gather(*tasks, return_exceptions=True)

        outcomes = _aio_run(with_cancels())
        assert all(isinstance(o, asyncio.CancelledError) for o in outcomes[::3])
        kept = [o for i, o in enumerate(outcomes) if i % 3]
        assert all(isinstance(o, oms.SendResult) and o.ok for o in kept), kept[:3]
        # the producer is not left waiting for the cancelled ones: it shuts down at once (asserted on exit)
        t0 = time.monotonic()
    assert time.monotonic() - t0 < SHUTDOWN_GRACE_S, "shutdown waited for sends nobody completed"


@pytest.mark.timeout(120)
def test_every_queued_send_fails_when_the_broker_is_gone(broker_factory):
    broker = broker_factory.broker()
    topic = "OmsCoalesceDownT"
    create_topic(broker.addr, topic)
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer(operation_timeout=3000) as producer,
    ):
        producer.send(oms.BytesMessage(b"warm-up", topic))
        broker.stop()
        futures = [producer.send_async(oms.BytesMessage(f"d{i}".encode(), topic)) for i in range(200)]

        async def aio_sends() -> list[oms.SendResult | BaseException]:
            aio = producer.aio()
            sends = (aio.send(oms.BytesMessage(f"e{i}".encode(), topic)) for i in range(200))
            return await asyncio.gather(*sends, return_exceptions=True)

        outcomes = _aio_run(aio_sends(), timeout=30)
        assert all(isinstance(o, oms.OMSRuntimeException) for o in outcomes), {type(o) for o in outcomes}
        _, pending = concurrent.futures.wait(futures, timeout=30)
        assert not pending, f"{len(pending)} sends never completed"
        for future in futures:
            with pytest.raises(oms.OMSRuntimeException):
                future.result()


@pytest.mark.timeout(120)
def test_aio_sends_whose_loop_closed_do_not_hold_up_shutdown(broker):
    topic = "OmsCoalesceClosedLoopT"
    create_topic(broker.addr, topic)
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer() as producer,
    ):
        producer.send(oms.BytesMessage(b"warm-up", topic))

        async def abandon() -> None:
            aio = producer.aio()
            sends = [asyncio.ensure_future(aio.send(oms.BytesMessage(f"x{i}".encode(), topic))) for i in range(300)]
            await asyncio.sleep(0)  # every send handed to the producer; asyncio.run then cancels them, closes the loop
            assert not any(send.done() for send in sends)

        asyncio.run(abandon())
        # the answers arrive for a loop that is gone: the producer still knows its sends are over
        wait_until(lambda: producer._coalesced_pending == 0, timeout=30, what="the abandoned sends to be answered")
        t0 = time.monotonic()
    assert time.monotonic() - t0 < SHUTDOWN_GRACE_S, "shutdown waited for sends whose loop closed"
