"""Delayed message: a message sent with delay level 3 reaches its consumer about 10 s later (ScheduledMessage).

Usage: ``python examples/delay.py [--addr host:port]``. The levels are RocketMQ's: 1 s 5 s 10 s 30 s 1 m ...
"""

from __future__ import annotations

import argparse
import threading
import time

import _common

import oms

TOPIC = "ExampleDelayTopic"
GROUP = "ExampleDelayGroup"
DELAY_LEVEL = 3  # 10 s
SENT_AT = "sent-at-ms"  # a user header: the producer's clock when it sent


def main(args: argparse.Namespace) -> None:
    run = _common.run_id()
    delays: list[float] = []
    arrived = threading.Event()

    def on_message(message: oms.BytesMessage, context: oms.ConsumeContext) -> oms.ConsumeConcurrentlyStatus:
        now_ms = time.time() * 1000
        if message.get_body(str) == run:
            sent_ms = float(message.user_headers()[SENT_AT])
            stored_ms = message.store_timestamp or 0
            delays.append((now_ms - sent_ms) / 1000)
            _common.say(
                f"received message {message.message_id} {delays[-1]:.2f}s after send"
                f" ({(now_ms - stored_ms) / 1000:.2f}s after it was stored)"
            )
            arrived.set()
        return oms.ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    with _common.access_point(args.addr) as ap:
        _common.ensure_topic(ap, TOPIC, "DELAY")
        with (
            ap.create_push_consumer(consumer_id=GROUP, consume_from_where="first") as consumer,
            ap.create_producer() as producer,
        ):
            consumer.attach_queue(TOPIC, on_message)
            msg = oms.BytesMessage(run, TOPIC, delay_level=DELAY_LEVEL)
            msg.put_user_headers(SENT_AT, str(int(time.time() * 1000)))
            result = producer.send(msg)
            _common.say(f"sent message {result.message_id} with delay level {DELAY_LEVEL}")
            _common.wait_for(lambda: bool(delays), args.timeout, "the delayed message", arrived)
    if delays[0] < 9:
        raise _common.ExampleError(f"the message came {delays[0]:.2f}s after send, too early for level 3 (10 s)")
    _common.say(f"delay observed: {delays[0]:.2f}s")


if __name__ == "__main__":
    _common.run(main, __doc__.splitlines()[0])
