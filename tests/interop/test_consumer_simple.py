"""The official SimpleConsumer 5.1.2 against a real broker: receive, ack, change invisible, redelivery, restarts."""

from __future__ import annotations

import signal

import pytest
from rocketmq.v5.exception import BadRequestException

from tests.pop.client_helpers import produce, receive_until, simple_consumer

T, G = "SimpleT", "SimpleG"


@pytest.mark.timeout(120)
def test_receive_ack_change_invisible_redelivery(broker):
    ids = produce(broker.addr, T, [b"a", b"b", b"c"])
    with simple_consumer(broker.addr, G, T) as consumer:
        got = receive_until(consumer, 3, invisible_s=20)
        assert sorted(m.message_id for m in got) == sorted(ids)
        assert all(m.delivery_attempt == 1 and m.receipt_handle for m in got)
        by_body = {m.body: m for m in got}
        consumer.ack(by_body[b"a"])
        consumer.ack(by_body[b"b"])
        old_handle = by_body[b"c"].receipt_handle
        consumer.change_invisible_duration(by_body[b"c"], 1)
        assert by_body[b"c"].receipt_handle != old_handle  # the client adopted the new handle (P10)
        again = receive_until(consumer, 1, invisible_s=20)
        assert [m.body for m in again] == [b"c"] and again[0].delivery_attempt == 2
        consumer.ack(again[0])
        assert consumer.receive(16, 20) == []  # nothing comes back once acked


@pytest.mark.timeout(120)
def test_garbage_receipt_handle_is_rejected_and_broker_keeps_serving(broker):
    produce(broker.addr, T, [b"x"])
    with simple_consumer(broker.addr, G, T) as consumer:
        [msg] = receive_until(consumer, 1, invisible_s=20)
        good = msg.receipt_handle
        msg.receipt_handle = "this is not a handle"
        with pytest.raises(BadRequestException) as err:
            consumer.ack(msg)
        assert "40013" in str(err.value) or "INVALID_RECEIPT_HANDLE" in str(err.value)
        msg.receipt_handle = good
        consumer.ack(msg)
        with pytest.raises(BadRequestException):
            consumer.ack(msg)  # already acked: stale handle
        produce(broker.addr, T, [b"y"])
        assert [m.body for m in receive_until(consumer, 1, invisible_s=20)] == [b"y"]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "kill"])
def test_unacked_message_comes_back_after_broker_restart_acked_do_not(broker, sig):
    produce(broker.addr, T, [b"keep", b"done"])
    with simple_consumer(broker.addr, G, T) as consumer:
        got = {m.body: m for m in receive_until(consumer, 2, invisible_s=20)}
        consumer.ack(got[b"done"])
        consumer.change_invisible_duration(got[b"keep"], 3)  # come back 3 s from now, across the restart
    broker.restart(sig)
    with simple_consumer(broker.addr, G, T) as consumer:
        again = receive_until(consumer, 1, invisible_s=20, timeout=30)
        assert [m.body for m in again] == [b"keep"] and again[0].delivery_attempt == 2
        consumer.ack(again[0])
        assert consumer.receive(16, 20) == []
