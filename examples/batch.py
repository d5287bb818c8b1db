"""Batch send: a small list goes in one ``send_batch``; a list over 4 MiB is cut by a ListSplitter first.

Usage: ``python examples/batch.py [--addr host:port]``. The broker's topic offsets show every message arrived.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence

import _common

import oms

TOPIC = "ExampleBatchTopic"
SIZE_LIMIT = 4 * 1024 * 1024  # RocketMQ's limit for one batch request
LOG_OVERHEAD = 20  # bytes RocketMQ's sample counts per message for the stored record's header
BIG_COUNT = 600
BIG_BODY = 8 * 1024  # 600 x 8 KiB: about 4.7 MiB, more than one request may carry


def message_size(message: oms.BytesMessage) -> int:
    """What a message weighs in a batch, as RocketMQ's ListSplitter counts it: topic, body, properties, overhead."""
    size = len((message.destination or "").encode()) + len(message.get_body(bytes)) + LOG_OVERHEAD
    for key, value in message.user_headers().items():
        size += len(key.encode()) + len(value.encode())
    return size


class ListSplitter:
    """Cut a list of messages into sub-lists of at most ``limit`` bytes each (RocketMQ's batch sample)."""

    def __init__(self, messages: Sequence[oms.BytesMessage], limit: int = SIZE_LIMIT) -> None:
        self.messages = messages
        self.limit = limit

    def __iter__(self) -> Iterator[list[oms.BytesMessage]]:
        current: list[oms.BytesMessage] = []
        size = 0
        for message in self.messages:
            weight = message_size(message)
            if current and size + weight > self.limit:
                yield current
                current, size = [], 0
            current.append(message)  # a single message over the limit goes alone (and the broker refuses it)
            size += weight
        if current:
            yield current


def main(args: argparse.Namespace) -> None:
    run = _common.run_id()
    with _common.access_point(args.addr) as ap, ap.create_producer(compress_msg_body_over_howmuch=0) as producer:
        _common.ensure_topic(ap, TOPIC)
        rm = ap.resource_manager()
        before = rm.topic_status(TOPIC).total_messages

        small = [oms.BytesMessage(f"Hello world {i}", TOPIC, tags="TagA", keys=[f"{run}-{i}"]) for i in range(3)]
        results = producer.send_batch(small)
        _common.say(f"small batch: {len(results)} messages in one request")

        filler = b"x" * (BIG_BODY - 16)
        big = [oms.BytesMessage(f"{run}-{i:06d}-".encode() + filler, TOPIC, tags="TagB") for i in range(BIG_COUNT)]
        total = sum(map(message_size, big))
        _common.say(f"big list: {len(big)} messages, {total} bytes (limit {SIZE_LIMIT})")
        requests = 0
        for number, chunk in enumerate(ListSplitter(big), 1):
            weight = sum(map(message_size, chunk))
            sent = producer.send_batch(chunk)
            requests += 1
            _common.say(f"batch {number}: {len(sent)} messages, {weight} bytes, sent")
        if requests < 2:
            raise _common.ExampleError(f"a {total}-byte list went in {requests} request")
        _common.say(f"big list sent in {requests} batches")

        expected = len(small) + len(big)
        _common.wait_for(
            lambda: rm.topic_status(TOPIC).total_messages - before >= expected,
            args.timeout,
            f"{expected} messages stored",
        )
        _common.say(f"broker stored {rm.topic_status(TOPIC).total_messages - before} messages")


if __name__ == "__main__":
    _common.run(main, __doc__.splitlines()[0])
