"""Fixtures of the log appender tests: one broker per module, a reader that pulls a topic back, a silent port.

Short linger, timeouts and backoffs come in through the appender's options, never by skipping behaviour.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

import oms
from plugins.logappender import iter_records
from tests.conftest import BrokerFactory, BrokerHandle

FAST: dict[str, Any] = {
    "linger": 0.005,
    "send_timeout": 2.0,
    "retry_backoff": 0.05,
    "retry_backoff_max": 0.3,
    "flush_timeout": 10.0,
    "close_timeout": 10.0,
    "warn_interval": 0.0,
}


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerHandle]:
    factory = BrokerFactory(tmp_path_factory.mktemp("logappender-broker"))
    try:
        yield factory.broker()
    finally:
        factory.stop_all()


@dataclass
class Stored:
    """One stored message and the records its body holds."""

    message: oms.BytesMessage
    records: list[dict[str, Any]]


def read_topic(addr: str, topic: str, expect: int, timeout: float = 20.0) -> list[Stored]:
    """Every message of ``topic`` (all queues, from offset 0), waiting until ``expect`` records are stored."""
    deadline = time.monotonic() + timeout
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{addr}/") as ap,
        ap.create_pull_consumer(consumer_id="logappender-test-reader", operation_timeout=5000) as consumer,
    ):
        while True:
            try:
                stored = _read_all(consumer, topic)
            except oms.OMSConnectionException:  # a restarted broker: gRPC reconnects within seconds
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
                continue
            if sum(len(s.records) for s in stored) >= expect or time.monotonic() > deadline:
                return stored
            time.sleep(0.1)


def _read_all(consumer: oms.PullConsumer, topic: str) -> list[Stored]:
    stored: list[Stored] = []
    for queue in sorted(consumer.queues(topic), key=lambda q: (q.broker_name, q.queue_id)):
        offset = 0
        while True:
            result = consumer.pull(queue, offset, 256)
            if not result.messages:
                break
            for m in result.messages:
                stored.append(Stored(m, list(iter_records(m.get_body(), m.user_headers().get("records")))))
            offset = result.next_offset
    return stored


def records_of(stored: list[Stored]) -> list[dict[str, Any]]:
    return [r for s in stored for r in s.records]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections and never answers: a hung broker."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield int(s.getsockname()[1])
