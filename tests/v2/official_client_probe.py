"""Run by tests: start the official client's PushConsumer and Producer against ENDPOINT, print what happened.

A PushConsumer's startup fails unless an OK Telemetry settings reply arrives within 10 s (protocol P2).
"""

from __future__ import annotations

import sys
import time

from rocketmq import ClientConfiguration, ConsumeResult, Credentials, FilterExpression, Producer, PushConsumer
from rocketmq.v5.model.message import Message


def main(endpoint: str, topic: str) -> None:
    config = ClientConfiguration(endpoint, Credentials())

    def listener(message: Message) -> ConsumeResult:
        return ConsumeResult.SUCCESS

    consumer = PushConsumer(config, "probe-group", listener, {topic: FilterExpression("*")})
    started = time.monotonic()
    consumer.startup()
    print(f"push-consumer-started {time.monotonic() - started:.2f}", flush=True)
    producer = Producer(config, (topic,))
    producer.startup()
    print("producer-started", flush=True)
    time.sleep(1.5)  # heartbeat + settings re-sync tick
    producer.shutdown()
    consumer.shutdown()
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
