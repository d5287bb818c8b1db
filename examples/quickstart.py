"""Produce and consume one message with the official RocketMQ 5 Python client against ``make run``.

Usage: ``make run`` in one terminal, then ``.venv/bin/python examples/quickstart.py [--addr host:port]``
(default ``$NAMESRV_ADDR``, its first address, else 127.0.0.1:8081; the name server works as the access point).
"""

from __future__ import annotations

import argparse
import os
import sys

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer


def main(access_point: str = "127.0.0.1:8081", topic: str = "QuickstartTopic", group: str = "QuickstartGroup") -> int:
    config = ClientConfiguration(access_point, Credentials())
    producer = Producer(config, (topic,))
    producer.startup()
    msg = Message()
    msg.topic, msg.body, msg.tag = topic, b"hello OrbitMQ", "greeting"
    print("sent", producer.send(msg).message_id)
    producer.shutdown()

    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=5)
    consumer.startup()
    received = 0
    for _ in range(5):  # a few receives: round robin over queues until the message shows up
        for m in consumer.receive(16, 15):
            print("received", m.message_id, m.body.decode())
            consumer.ack(m)
            received += 1
        if received:
            break
    consumer.shutdown()
    return 0 if received else 1


def access_point_of(argv: list[str]) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = (os.environ.get("NAMESRV_ADDR") or "127.0.0.1:8081").split(";")[0].strip()
    parser.add_argument("--addr", default=default, help="broker or name server host:port (default: %(default)s)")
    parser.add_argument("access_point", nargs="?", help="the same as --addr (kept for earlier command lines)")
    args = parser.parse_args(argv)
    return str(args.access_point or args.addr)


if __name__ == "__main__":
    sys.exit(main(access_point_of(sys.argv[1:])))
