"""Shared helpers for the official-client consumer interop tests (C2): produce, simple consumer, group config."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocketmq import ClientConfiguration, Credentials, FilterExpression, Message, Producer, SimpleConsumer
from rocketmq.v5.client.connection.rpc_client import RpcClient


def config(addr: str) -> ClientConfiguration:
    _bind_official_loop()
    return ClientConfiguration(addr, Credentials(), request_timeout=5)


def _bind_official_loop() -> None:
    """The official client opens its Telemetry stream from the caller's thread through grpc.aio, which reads that
    thread's current event loop: the client's io loop once a channel was created there, none after an asyncio.run()
    in between (a later client of the same broker then fails: 'There is no current event loop')."""
    loop = RpcClient.get_channel_io_loop()
    if loop is not None and threading.current_thread() is threading.main_thread():
        asyncio.set_event_loop(loop)


def produce(
    addr: str, topic: str, bodies: list[bytes], tag: str = "TagA", message_group: str | None = None
) -> list[str]:
    producer = Producer(config(addr), (topic,))
    producer.startup()
    try:
        ids = []
        for body in bodies:
            msg = Message()
            msg.topic = topic
            msg.body = body
            msg.tag = tag
            if message_group:
                msg.message_group = message_group
            ids.append(producer.send(msg).message_id)
        return ids
    finally:
        producer.shutdown()


@contextlib.contextmanager
def simple_consumer(addr: str, group: str, topic: str, await_s: int = 2, expr: str = "*") -> Iterator[SimpleConsumer]:
    consumer = SimpleConsumer(config(addr), group, {topic: FilterExpression(expr)}, await_duration=await_s)
    consumer.startup()
    try:
        yield consumer
    finally:
        consumer.shutdown()


def receive_until(
    consumer: SimpleConsumer, want: int, invisible_s: int, timeout: float = 30.0, batch: int = 16
) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got += consumer.receive(batch, invisible_s)
    return got


def write_group_config(store: Path, group: str, *, retry_max_times: int = 16, orderly: bool = False) -> None:
    """Pre-seed ``config/subscriptionGroup.json`` (as mqadmin updateSubGroup would) before the broker starts."""
    path = store / "config" / "subscriptionGroup.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    table = json.loads(path.read_text()) if path.exists() else {"subscriptionGroupTable": {}}
    table["subscriptionGroupTable"][group] = {
        "groupName": group,
        "consumeEnable": True,
        "retryMaxTimes": retry_max_times,
        "consumeMessageOrderly": orderly,
    }
    path.write_text(json.dumps(table))


def write_topic_config(store: Path, topic: str, *, queues: int = 4, message_type: str = "NORMAL") -> None:
    """Pre-seed ``config/topics.json`` (as mqadmin updateTopic would) before the broker starts."""
    path = store / "config" / "topics.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    table = json.loads(path.read_text()) if path.exists() else {"topicConfigTable": {}}
    table["topicConfigTable"][topic] = {
        "topicName": topic,
        "readQueueNums": queues,
        "writeQueueNums": queues,
        "perm": 6,
        "messageType": message_type,
    }
    path.write_text(json.dumps(table))
