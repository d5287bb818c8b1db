"""The official Python client's SimpleConsumer against the h2 floor server (``benchmarks.v2_receive_floor_h2``):
route, receive and ack through rocketmq-python-client's own channels, as an application would.

``python -m benchmarks.h2_official_client PORT TOTAL`` receives and acks until ``TOTAL`` messages came, then prints
one JSON line. Its own process: the client starts threads and an event loop of its own that outlive a failed check.
"""

from __future__ import annotations

import json
import sys
import time

from rocketmq import ClientConfiguration, Credentials, FilterExpression, SimpleConsumer

from benchmarks.v2_receive_floor import delivered_message

TIMEOUT_S = 30


def receive_all(port: int, total: int) -> dict[str, object]:
    expected = delivered_message().message
    topic = expected.topic.name
    consumer = SimpleConsumer(
        ClientConfiguration(f"127.0.0.1:{port}", Credentials()),
        "floor-group",
        {topic: FilterExpression("*")},
        await_duration=1,
    )
    consumer.startup()
    received = acked = 0
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while received < total and time.monotonic() < deadline:
            for message in consumer.receive(32, 60):
                if message.body != expected.body or message.topic != topic or not message.receipt_handle:
                    raise AssertionError(f"the official client decoded a different message: {message}")
                received += 1
                consumer.ack(message)
                acked += 1
    finally:
        consumer.shutdown()
    return {"ok": received == total, "received": received, "acked": acked}


if __name__ == "__main__":
    print(json.dumps(receive_all(int(sys.argv[1]), int(sys.argv[2]))), flush=True)
