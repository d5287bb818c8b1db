"""OpenMessaging SimplePullConsumer: send one message, then ``receive`` until it comes back, and ack it.

Usage: ``python examples/oms_pull_consumer.py [--addr host:port]`` (default ``$NAMESRV_ADDR`` or 127.0.0.1:8081).
"""

from __future__ import annotations

import argparse
import time

import _common

import oms

TOPIC = "OMS_PULL_TOPIC"
GROUP = "OMS_PULL_CONSUMER"


def main(args: argparse.Namespace) -> None:
    with _common.access_point(args.addr) as ap:
        _common.ensure_topic(ap, TOPIC)
        with ap.create_pull_consumer(consumer_id=GROUP, consume_from_where="first") as consumer:
            consumer.attach_queue(TOPIC)
            with ap.create_producer() as producer:
                result = producer.send(oms.BytesMessage(f"OMS_PULL_BODY {_common.run_id()}", TOPIC))
            _common.say(f"send message OK, msgId: {result.message_id}")
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline:
                message = consumer.receive(timeout=min(5.0, max(0.1, deadline - time.monotonic())))
                if message is None:
                    continue
                consumer.ack(message)
                _common.say(f"received message {message.message_id}: {message.get_body(str)!r}, acked")
                if message.message_id == result.message_id:
                    _common.say(f"pulled the message sent, msgId: {message.message_id}")
                    return
            raise _common.ExampleError(f"message {result.message_id} was not received in {args.timeout:.0f}s")


if __name__ == "__main__":
    _common.run(main, __doc__.splitlines()[0])
