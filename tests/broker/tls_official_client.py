"""Run by tests/broker/test_tls.py in its own process: the official client with ``tls_enable=True`` produces one
message to ``sys.argv[2]`` through the access point ``sys.argv[1]`` and receives it back as group ``sys.argv[3]``.

A process of its own because the official client trusts only gRPC's default roots, which the test points at its CA
with ``GRPC_DEFAULT_SSL_ROOTS_FILE_PATH`` (read once per process)."""

from __future__ import annotations

import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer


def main(endpoint: str, topic: str, group: str) -> int:
    config = ClientConfiguration(endpoint, Credentials(), request_timeout=5)
    producer = Producer(config, (topic,), tls_enable=True)
    producer.startup()
    try:
        msg = Message()
        msg.topic, msg.body, msg.tag = topic, b"over-tls", "T"
        print("sent", producer.send(msg).message_id, flush=True)
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(config, group, {topic: FilterExpression("*")}, await_duration=2, tls_enable=True)
    consumer.startup()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for message in consumer.receive(16, 20):
                consumer.ack(message)
                if message.body == b"over-tls":
                    print("received over-tls", flush=True)
                    return 0
    finally:
        consumer.shutdown()
    return 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
