"""Synchronous send: each ``send`` returns once the broker stored the message (RocketMQ's SyncProducer).

Usage: ``python examples/sync_producer.py [--addr host:port]`` (default ``$NAMESRV_ADDR`` or 127.0.0.1:8081).
"""

from __future__ import annotations

import argparse

import _common

import oms

TOPIC = "ExampleSyncTopic"
COUNT = 10


def main(args: argparse.Namespace) -> None:
    with (
        _common.access_point(args.addr) as ap,
        ap.create_producer(operation_timeout=int(args.timeout * 1000)) as producer,
    ):
        _common.ensure_topic(ap, TOPIC)
        for i in range(COUNT):
            msg = oms.BytesMessage(f"Hello RocketMQ {i}", TOPIC, tags="TagA")
            result = producer.send(msg)
            _common.say(f"sent {i} status={result.status} msg_id={result.message_id} topic={result.topic}")
            if result.status != oms.SendStatus.SEND_OK:
                raise _common.ExampleError(f"message {i}: status {result.status}")
        _common.say(f"sent {COUNT} messages synchronously")


if __name__ == "__main__":
    _common.run(main, __doc__.splitlines()[0])
