"""Ordered messages: every order's create/pay/push/finish steps go to one queue and are consumed in that order.

Usage: ``python examples/ordered.py [--addr host:port]``. The FIFO topic and the orderly group are created first.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Sequence

import _common

import oms

TOPIC = "ExampleOrderTopic"
GROUP = "ExampleOrderGroup"
TAGS = ("TagA", "TagC", "TagD")
# RocketMQ's sample orders, interleaved as in its buildOrders(): each order's steps in their business order
ORDERS: list[tuple[int, str]] = [
    (15103111039, "create"),
    (15103111065, "create"),
    (15103111039, "pay"),
    (15103117235, "create"),
    (15103111065, "pay"),
    (15103117235, "pay"),
    (15103111065, "finish"),
    (15103111039, "push"),
    (15103117235, "finish"),
    (15103111039, "finish"),
]


def by_order_id(queues: Sequence[oms.MessageQueue], message: oms.BytesMessage, arg: object) -> oms.MessageQueue:
    """RocketMQ's sample selector: the order id modulo the number of queues."""
    assert isinstance(arg, int)
    return queues[arg % len(queues)]


def main(args: argparse.Namespace) -> None:
    run = _common.run_id()
    expected: dict[int, list[str]] = {}
    for order_id, step in ORDERS:
        expected.setdefault(order_id, []).append(step)
    lock = threading.Lock()
    consumed: dict[int, list[str]] = {}
    arrived = threading.Event()

    def on_message(message: oms.BytesMessage, context: oms.ConsumeContext) -> oms.ConsumeOrderlyStatus:
        tag, order_id, step = message.get_body(str).split(" ")
        with lock:
            _common.say(f"consumed order {order_id} step {step} queue={context.message_queue}")
            if tag == run:
                consumed.setdefault(int(order_id), []).append(step)
        arrived.set()
        return oms.ConsumeOrderlyStatus.SUCCESS

    with _common.access_point(args.addr) as ap:
        _common.ensure_topic(ap, TOPIC, "FIFO")
        _common.ensure_group(ap, GROUP, orderly=True)
        with ap.create_producer() as producer:
            for i, (order_id, step) in enumerate(ORDERS):
                msg = oms.BytesMessage(f"{run} {order_id} {step}", TOPIC, tags=TAGS[i % len(TAGS)], keys=[f"KEY{i}"])
                result = producer.send(msg, selector=by_order_id, arg=order_id)
                _common.say(f"sent order {order_id} step {step}: {result.status} queue={result.queue}")
        with ap.create_push_consumer(consumer_id=GROUP, orderly=True, consume_from_where="first") as consumer:
            consumer.attach_queue(TOPIC, on_message, " || ".join(TAGS))
            _common.wait_for(
                lambda: sum(map(len, consumed.values())) >= len(ORDERS), args.timeout, "every order step", arrived
            )
    for order_id, steps in expected.items():
        got = consumed.get(order_id, [])
        if got != steps:
            raise _common.ExampleError(f"order {order_id} consumed as {got}, sent as {steps}")
        _common.say(f"order {order_id} in order: {' -> '.join(got)}")


if __name__ == "__main__":
    _common.run(main, __doc__.splitlines()[0])
