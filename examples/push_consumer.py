"""Push consumer: send a few TagA messages, then a clustering push consumer gets each one (quickstart Consumer).

Usage: ``python examples/push_consumer.py [--addr host:port]`` (default ``$NAMESRV_ADDR`` or 127.0.0.1:8081).
"""

from __future__ import annotations

import argparse
import threading

import _common

import oms

TOPIC = "ExamplePushTopic"
GROUP = "ExamplePushGroup"
COUNT = 10


def main(args: argparse.Namespace) -> None:
    run = _common.run_id()
    lock = threading.Lock()
    received: set[int] = set()
    arrived = threading.Event()

    def on_message(message: oms.BytesMessage, context: oms.ConsumeContext) -> oms.ConsumeConcurrentlyStatus:
        body = message.get_body(str)
        tag, _, index = body.partition(":")
        with lock:
            _common.say(f"received {body!r} tag={message.tags} msg_id={message.message_id}")
            if tag == run:  # messages of earlier runs may still be waiting in the group
                received.add(int(index))
            arrived.set()
        return oms.ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    with _common.access_point(args.addr) as ap:
        _common.ensure_topic(ap, TOPIC)
        with ap.create_producer() as producer:
            for i in range(COUNT):
                producer.send(oms.BytesMessage(f"{run}:{i}", TOPIC, tags="TagA"))
        _common.say(f"sent {COUNT} messages (run {run})")
        with ap.create_push_consumer(consumer_id=GROUP, consume_from_where="first") as consumer:
            consumer.attach_queue(TOPIC, on_message, "TagA")
            _common.say("consumer started")
            _common.wait_for(lambda: len(received) >= COUNT, args.timeout, f"{COUNT} messages", arrived)
    _common.say(f"consumed all {COUNT} messages")


if __name__ == "__main__":
    _common.run(main, __doc__.splitlines()[0])
