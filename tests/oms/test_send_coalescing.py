"""``send_async``'s natural batching (``oms/producer/coalesce.py``): many sends in flight leave as few requests,
each message still gets its own result, and failures reach every future."""

from __future__ import annotations

import concurrent.futures

import pytest

import oms
from tests.oms.helpers import create_topic
from tests.oms.test_frames import frame_channels
from tests.oms.test_producer_fastbatch import SendBatchCalls
from tests.waiting import wait_until


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

        consumer.attach_queue(topic)
        got: dict[str | None, bytes] = {}
        while len(got) < n + 1:
            message = consumer.receive(5)
            assert message is not None, f"only {len(got)} of {n + 1} messages read back"
            got[message.message_id] = message.body
            if message.body != b"warm-up":
                assert message.keys == [f"k{message.body.decode()[1:]}"]
            consumer.ack(message)
        assert {r.message_id: f"a{i}".encode() for i, r in enumerate(results)}.items() <= got.items()


@pytest.mark.timeout(120)
def test_a_lone_async_send_still_goes_alone(broker):
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
        _, pending = concurrent.futures.wait(futures, timeout=30)
        assert not pending, f"{len(pending)} sends never completed"
        for future in futures:
            with pytest.raises(oms.OMSRuntimeException):
                future.result()
