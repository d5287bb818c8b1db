"""The official PushConsumer 5.1.2 against a real broker: ack on success, nack/redelivery, DLQ after max attempts."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable

import pytest
from rocketmq import ConsumeResult, FilterExpression, MessageListener, PushConsumer

from tests.broker.v2client import raw_client
from tests.pop.client_helpers import config, produce, write_group_config, write_topic_config
from tests.waiting import wait_until


class Recorder(MessageListener):
    """Records (body, delivery_attempt) and answers with ``decide``."""

    def __init__(self, decide: Callable[[bytes, int], ConsumeResult]) -> None:
        self.decide = decide
        self.lock = threading.Lock()
        self.seen: dict[bytes, list[int]] = defaultdict(list)

    def consume(self, message) -> ConsumeResult:
        with self.lock:
            self.seen[message.body].append(message.delivery_attempt)
        return self.decide(message.body, message.delivery_attempt)

    def attempts(self, body: bytes) -> list[int]:
        with self.lock:
            return list(self.seen.get(body, []))


def start_push(addr: str, group: str, topic: str, listener: MessageListener, expr: str = "*") -> PushConsumer:
    consumer = PushConsumer(config(addr), group, listener, {topic: FilterExpression(expr)})
    consumer.startup()
    return consumer


@pytest.mark.timeout(120)
def test_push_success_and_failure_redelivery(broker):
    topic, group = "PushT", "PushG"

    def decide(body: bytes, attempt: int) -> ConsumeResult:
        return ConsumeResult.FAILURE if body == b"flaky" and attempt == 1 else ConsumeResult.SUCCESS

    listener = Recorder(decide)
    produce(broker.addr, topic, [b"ok-1", b"ok-2", b"flaky"])
    consumer = start_push(broker.addr, group, topic, listener)
    try:
        wait_until(
            lambda: listener.attempts(b"flaky") == [1, 2], 12, "flaky redelivered with attempt 2 after its 1 s backoff"
        )
        wait_until(lambda: listener.attempts(b"ok-1") == [1] and listener.attempts(b"ok-2") == [1], 10, "ok messages")
        produce(broker.addr, topic, [b"late"])
        wait_until(lambda: listener.attempts(b"late") == [1], 30, "a message sent while the consumer runs")
        # every message acked: the group's consumer offsets reach the end of each queue
        with raw_client(broker.addr) as c:

            def caught_up() -> bool:
                total = 0
                for qid in range(4):
                    resp = c.get_offset(group, topic, qid)
                    total += max(0, resp.offset)
                return total == 4

            wait_until(caught_up, 15, "consumer offsets at the end")
    finally:
        consumer.shutdown()
    assert listener.attempts(b"ok-1") == [1]  # acked messages never came back


@pytest.mark.timeout(120)
def test_push_failing_message_lands_in_dlq_after_max_attempts(broker_factory, tmp_path):
    topic, group = "PoisonT", "PoisonG"
    store = tmp_path / "store-dlq"
    write_group_config(store, group, retry_max_times=1)  # max attempts 2 (settings tell the client the same)
    broker = broker_factory.broker(store=store)
    listener = Recorder(lambda body, attempt: ConsumeResult.FAILURE)
    [msg_id] = produce(broker.addr, topic, [b"poison"], tag="Bad")
    consumer = start_push(broker.addr, group, topic, listener)
    try:
        with raw_client(broker.addr) as c:

            def in_dlq() -> bool:
                return bool(c.pull("check", f"%DLQ%{group}", 0, 0).messages)

            wait_until(in_dlq, 40, "the message in the DLQ")
            [dead] = c.pull("check", f"%DLQ%{group}", 0, 0).messages
        assert dead.body == b"poison" and dead.system_properties.message_id == msg_id
        assert dead.system_properties.tag == "Bad"
        assert listener.attempts(b"poison") == [1, 2]
    finally:
        consumer.shutdown()


@pytest.mark.timeout(120)
def test_fifo_push_consumer_keeps_group_order_and_forwards_to_dlq(broker_factory, tmp_path):
    topic, group = "FifoT", "FifoG"
    store = tmp_path / "store-fifo"
    write_topic_config(store, topic, message_type="FIFO")
    write_group_config(store, group, retry_max_times=1, orderly=True)  # settings: fifo=true, max attempts 2
    broker = broker_factory.broker(store=store)
    order: list[bytes] = []
    lock = threading.Lock()

    def decide(body: bytes, attempt: int) -> ConsumeResult:
        with lock:
            order.append(body)
        return ConsumeResult.FAILURE if body == b"a1" else ConsumeResult.SUCCESS

    listener = Recorder(decide)
    ids = produce(broker.addr, topic, [b"a1", b"a2", b"a3"], message_group="A")
    consumer = start_push(broker.addr, group, topic, listener)
    try:
        wait_until(lambda: listener.attempts(b"a3") == [1], 40, "a3 consumed")
        with lock:
            assert order == [b"a1", b"a1", b"a2", b"a3"]  # local retries of a1, then the rest in order
        with raw_client(broker.addr) as c:
            [dead] = c.pull("check", f"%DLQ%{group}", 0, 0).messages
        assert dead.body == b"a1" and dead.system_properties.message_id == ids[0]
    finally:
        consumer.shutdown()
