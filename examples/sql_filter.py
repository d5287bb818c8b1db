"""SQL92 filter: ten messages carry a property ``a`` = 0..9, a consumer selecting ``a between 0 and 3`` gets four.

Usage: ``python examples/sql_filter.py [--addr host:port]``. The broker filters (``enablePropertyFilter``).
"""

from __future__ import annotations

import argparse
import threading
import time

import _common

import oms

TOPIC = "ExampleSqlTopic"
GROUP = "ExampleSqlGroup"
SQL = "a between 0 and 3"
COUNT = 10
EXPECTED = {0, 1, 2, 3}
QUIET = 2.0  # seconds to keep listening after the expected messages, to catch any that should not come


def main(args: argparse.Namespace) -> None:
    run = _common.run_id()
    lock = threading.Lock()
    received: list[int] = []
    arrived = threading.Event()

    def on_message(message: oms.BytesMessage, context: oms.ConsumeContext) -> oms.ConsumeConcurrentlyStatus:
        a = message.user_headers().get("a")
        with lock:
            _common.say(f"received {message.get_body(str)!r} a={a}")
            if message.get_body(str).startswith(run) and a is not None:
                received.append(int(a))
        arrived.set()
        return oms.ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    with _common.access_point(args.addr) as ap:
        _common.ensure_topic(ap, TOPIC)
        with ap.create_producer() as producer:
            for i in range(COUNT):
                tag = ("TagA", "TagB", "TagC")[i % 3]
                msg = oms.BytesMessage(f"{run} Hello RocketMQ {i}", TOPIC, tags=tag).put_user_headers("a", str(i))
                producer.send(msg)
        _common.say(f"sent {COUNT} messages with a = 0..{COUNT - 1}")
        with ap.create_push_consumer(consumer_id=GROUP, consume_from_where="first") as consumer:
            consumer.attach_queue(TOPIC, on_message, oms.MessageSelector.by_sql(SQL))
            _common.say(f"subscribed with SQL92 {SQL!r}")
            _common.wait_for(lambda: len(received) >= len(EXPECTED), args.timeout, "the matching messages", arrived)
            time.sleep(QUIET)
    if sorted(received) != sorted(EXPECTED):
        raise _common.ExampleError(f"received a = {sorted(received)}, expected exactly {sorted(EXPECTED)}")
    _common.say(f"received only a in {sorted(received)}")


if __name__ == "__main__":
    _common.run(main, __doc__.splitlines()[0])
