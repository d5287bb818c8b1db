"""The counters the message paths feed: one update per stored batch, read or RPC (never one per message), under a
lock because the store also puts from its own threads. Exporters read ``snapshot()`` (and ``rpc``'s families)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from broker.metrics import constants as c
from orbitmq import message_const as mc
from orbitmq.metrics.model import Histogram
from orbitmq.metrics.rpc import RpcLatency
from orbitmq.topics import (
    DLQ_GROUP_TOPIC_PREFIX,
    RETRY_GROUP_TOPIC_PREFIX,
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    is_system_topic,
)

InKey = tuple[str, str, bool]  # topic, message type, is system
OutKey = tuple[str, str, bool, bool]  # topic, consumer group, is retry, is system
CreateKey = tuple[str, bool]  # invocation status, is system (topics; always False for groups)

# where a put lands is not what the message is: these topics hold messages on their way elsewhere
_INTERNAL_PUT_TOPICS = frozenset({SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC})


@dataclass
class Snapshot:
    """The counters at one moment (exporters turn it into their own types)."""

    messages_in: dict[InKey, int]
    throughput_in: dict[InKey, int]
    message_size: dict[InKey, Histogram]
    messages_out: dict[OutKey, int]
    throughput_out: dict[OutKey, int]
    send_to_dlq: dict[tuple[str, str], int]  # (consumer group, topic)
    commits: dict[str, int]  # topic
    rollbacks: dict[str, int]
    finish_latency: dict[str, Histogram]  # topic
    topic_create: dict[CreateKey, Histogram]
    group_create: dict[CreateKey, Histogram]


def message_type_of(properties: dict[str, str]) -> str:
    """RocketMQ's metrics value of ``TopicMessageType.parseFromMessageProperty``."""
    if properties.get(mc.PROPERTY_TRANSACTION_PREPARED) == "true":
        return "transaction"
    if mc.PROPERTY_TIMER_DELIVER_MS in properties or mc.PROPERTY_DELAY_TIME_LEVEL in properties:
        return "delay"
    if mc.PROPERTY_MESSAGE_GROUP in properties:
        return "fifo"
    return "normal"


class BrokerMetrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in: defaultdict[InKey, int] = defaultdict(int)
        self._in_bytes: defaultdict[InKey, int] = defaultdict(int)
        self._size: dict[InKey, Histogram] = {}
        self._out: defaultdict[OutKey, int] = defaultdict(int)
        self._out_bytes: defaultdict[OutKey, int] = defaultdict(int)
        self._dlq: defaultdict[tuple[str, str], int] = defaultdict(int)
        self._commits: defaultdict[str, int] = defaultdict(int)
        self._rollbacks: defaultdict[str, int] = defaultdict(int)
        self._finish: dict[str, Histogram] = {}  # topic
        self._topic_create: dict[CreateKey, Histogram] = {}
        self._group_create: dict[CreateKey, Histogram] = {}
        self.rpc = RpcLatency()  # fed by the gRPC server and the remoting listener

    # -- the message paths ---------------------------------------------------------------------------------------

    def on_put(self, msgs: Sequence[Any], counts: dict[str, int], total_bytes: int) -> None:
        """A stored batch: ``counts`` messages per topic, ``total_bytes`` written (the store's put path)."""
        single = len(counts) == 1
        total_n = sum(counts.values())
        with self._lock:
            for topic, n in counts.items():
                if not n:
                    continue
                first = msgs[0] if single else next(m for m in msgs if m.topic == topic)
                if topic.startswith(DLQ_GROUP_TOPIC_PREFIX):
                    self._dead_letters(topic, msgs)
                if topic in _INTERNAL_PUT_TOPICS:
                    continue
                key = (topic, message_type_of(first.properties), is_system_topic(topic))
                size = total_bytes if single else total_bytes * n // total_n  # records of several topics: by share
                self._in[key] += n
                self._in_bytes[key] += size
                hist = self._size.get(key)
                if hist is None:
                    hist = self._size[key] = Histogram(c.MESSAGE_SIZE_BUCKETS)
                hist.observe(size / n)  # one observation per request, its average size, as RocketMQ records

    def _dead_letters(self, topic: str, msgs: Sequence[Any]) -> None:
        group = topic[len(DLQ_GROUP_TOPIC_PREFIX) :]
        for m in msgs:
            if m.topic == topic:
                self._dlq[(group, m.properties.get(mc.PROPERTY_RETRY_TOPIC, topic))] += 1

    def on_get(self, group: str, topic: str, count: int, size: int) -> None:
        """Messages handed to ``group`` (pull, pop): the store's read path, consumer reads only."""
        retry = topic.startswith(RETRY_GROUP_TOPIC_PREFIX)
        key = (topic, group, retry, is_system_topic(topic))
        with self._lock:
            self._out[key] += count
            self._out_bytes[key] += size

    def on_transaction_end(self, topic: str, commit: bool, half_stored_ms: int) -> None:
        """A transaction ended; a commit also records how long it took since its half message was stored, in
        seconds as RocketMQ's ``rocketmq_finish_message_latency`` (commits only, as there)."""
        with self._lock:
            (self._commits if commit else self._rollbacks)[topic] += 1
            if commit:
                hist = self._finish.get(topic)
                if hist is None:
                    hist = self._finish[topic] = Histogram(c.FINISH_MESSAGE_LATENCY_BUCKETS_S)
                hist.observe(max(0, int(time.time() * 1000) - half_stored_ms) // 1000)

    def on_create(self, kind: str, started: float, success: bool, is_system: bool = False) -> None:
        """A topic (``kind`` "topic") or subscription group ("group") created or updated by an admin call that
        began at ``started`` (``time.perf_counter()``): RocketMQ's ``rocketmq_*_create_execution_time`` (ms)."""
        ms = (time.perf_counter() - started) * 1000
        key = (c.INVOCATION_SUCCESS if success else c.INVOCATION_FAILURE, is_system)
        table = self._topic_create if kind == "topic" else self._group_create
        with self._lock:
            hist = table.get(key)
            if hist is None:
                hist = table[key] = Histogram(c.CREATE_EXECUTION_TIME_BUCKETS_MS)
            hist.observe(ms)

    # -- exporters -----------------------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(
                dict(self._in),
                dict(self._in_bytes),
                {k: h.copy() for k, h in self._size.items()},
                dict(self._out),
                dict(self._out_bytes),
                dict(self._dlq),
                dict(self._commits),
                dict(self._rollbacks),
                {k: h.copy() for k, h in self._finish.items()},
                {k: h.copy() for k, h in self._topic_create.items()},
                {k: h.copy() for k, h in self._group_create.items()},
            )
