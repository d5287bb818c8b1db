"""OpenMessaging SimplePushConsumer: ``attach_queue`` with a listener that acks through its context.

Usage: ``python examples/oms_push_consumer.py [--addr host:port]``. It sends the message it then waits for.
"""

from __future__ import annotations

import argparse
import threading

import _common

import oms

TOPIC = "OMS_PUSH_TOPIC"
GROUP = "OMS_PUSH_CONSUMER"


def main(args: argparse.Namespace) -> None:
    body = f"OMS_PUSH_BODY {_common.run_id()}"
    got = threading.Event()

    class Listener:
        """An OMS ``MessageListener``: ``on_received(message, context)``, answered with ``context.ack()``."""

        def on_received(self, message: oms.BytesMessage, context: oms.ConsumeContext) -> None:
            _common.say(f"received one message: {message.message_id} {message.get_body(str)!r}")
            context.ack()
            if message.get_body(str) == body:
                got.set()

    with _common.access_point(args.addr) as ap:
        _common.ensure_topic(ap, TOPIC)
        with ap.create_push_consumer(consumer_id=GROUP, consume_from_where="first") as consumer:
            consumer.attach_queue(TOPIC, Listener())
            _common.say(f"push consumer of {TOPIC} started")
            with ap.create_producer() as producer:
                result = producer.send(oms.BytesMessage(body, TOPIC))
            _common.say(f"send message OK, msgId: {result.message_id}")
            if not got.wait(args.timeout):
                raise _common.ExampleError(f"message {result.message_id} was not consumed in {args.timeout:.0f}s")
    _common.say("consumed the message sent")


if __name__ == "__main__":
    _common.run(main, __doc__.splitlines()[0])
