"""One-way send: no answer is waited for, as for logs (OnewayProducer); the topic's offsets show what arrived.

Usage: ``python examples/oneway_producer.py [--addr host:port]`` (default ``$NAMESRV_ADDR`` or 127.0.0.1:8081).
"""

from __future__ import annotations

import argparse

import _common

import oms

TOPIC = "ExampleOnewayTopic"
COUNT = 10


def main(args: argparse.Namespace) -> None:
    with _common.access_point(args.addr) as ap, ap.create_producer() as producer:
        _common.ensure_topic(ap, TOPIC)
        rm = ap.resource_manager()
        before = rm.topic_status(TOPIC).total_messages
        for i in range(COUNT):
            producer.send_oneway(oms.BytesMessage(f"Hello RocketMQ {i}", TOPIC, tags="TagA"))
        _common.say(f"sent {COUNT} messages one-way (no results)")
        # one-way sends report nothing: check on the broker that they were stored
        _common.wait_for(
            lambda: rm.topic_status(TOPIC).total_messages - before >= COUNT,
            args.timeout,
            f"{COUNT} one-way messages to be stored",
        )
        _common.say(f"broker stored {rm.topic_status(TOPIC).total_messages - before} messages")


if __name__ == "__main__":
    _common.run(main, __doc__.splitlines()[0])
