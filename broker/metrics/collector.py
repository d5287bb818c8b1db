"""What a scrape (or an export) reads: the recorder's counters, and the gauges computed now from the broker's own
state (lag, in-flight, connections, storage), never kept up to date on the message paths."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from rocketmq.grpc_protocol import definition_pb2

from broker.metrics import constants as c
from broker.metrics.recorder import BrokerMetrics
from orbitmq.metrics.model import Family, Labels
from orbitmq.route import READ_WRITE, PermName
from orbitmq.topics import RETRY_GROUP_TOPIC_PREFIX, is_system_group, is_system_topic

if TYPE_CHECKING:
    from broker.context import BrokerContext

InflightSource = Callable[[], Mapping[tuple[str, str], int]]  # (group, topic) -> messages received, not acked


def _bool(flag: bool) -> str:
    return "true" if flag else "false"


class MetricsCollector:
    def __init__(
        self,
        ctx: BrokerContext,
        recorder: BrokerMetrics,
        extra_labels: Labels,
        inflight: InflightSource | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.ctx = ctx
        self.recorder = recorder
        self.inflight = inflight
        self.clock = clock
        self.base: Labels = {
            c.LABEL_CLUSTER_NAME: ctx.config.brokerClusterName,
            c.LABEL_NODE_TYPE: c.NODE_TYPE_BROKER,
            c.LABEL_NODE_ID: ctx.config.brokerName,
            **extra_labels,
        }

    def _l(self, **labels: str) -> Labels:
        return {**self.base, **labels}

    def families(self) -> list[Family]:
        return [*self._counters(), *self._gauges()]

    # -- counters and histograms ---------------------------------------------------------------------------------

    def _counters(self) -> Iterator[Family]:
        snap = self.recorder.snapshot()

        def in_labels(key: tuple[str, str, bool]) -> Labels:
            return self._l(topic=key[0], message_type=key[1], is_system=_bool(key[2]))

        def out_labels(key: tuple[str, str, bool, bool]) -> Labels:
            return self._l(topic=key[0], consumer_group=key[1], is_retry=_bool(key[2]), is_system=_bool(key[3]))

        yield Family(
            c.MESSAGES_IN_TOTAL, "counter", "messages stored", [(in_labels(k), v) for k, v in snap.messages_in.items()]
        )
        yield Family(
            c.THROUGHPUT_IN_TOTAL, "counter", "bytes stored", [(in_labels(k), v) for k, v in snap.throughput_in.items()]
        )
        yield Family(
            c.MESSAGE_SIZE,
            "histogram",
            "stored message size (bytes)",
            [(in_labels(k), h) for k, h in snap.message_size.items()],
        )
        yield Family(
            c.MESSAGES_OUT_TOTAL,
            "counter",
            "messages handed to consumers",
            [(out_labels(k), v) for k, v in snap.messages_out.items()],
        )
        yield Family(
            c.THROUGHPUT_OUT_TOTAL,
            "counter",
            "bytes handed to consumers",
            [(out_labels(k), v) for k, v in snap.throughput_out.items()],
        )
        yield Family(
            c.SEND_TO_DLQ_MESSAGES_TOTAL,
            "counter",
            "messages moved to a dead-letter queue",
            [
                (self._l(consumer_group=g, topic=t, is_system=_bool(is_system_group(g))), v)
                for (g, t), v in snap.send_to_dlq.items()
            ],
        )
        yield Family(
            c.COMMIT_MESSAGES_TOTAL,
            "counter",
            "transactions committed",
            [(self._l(topic=t), v) for t, v in snap.commits.items()],
        )
        yield Family(
            c.ROLLBACK_MESSAGES_TOTAL,
            "counter",
            "transactions rolled back",
            [(self._l(topic=t), v) for t, v in snap.rollbacks.items()],
        )
        yield Family(
            c.FINISH_MESSAGE_LATENCY,
            "histogram",
            "half message stored to commit (s)",
            [(self._l(topic=t), h) for t, h in snap.finish_latency.items()],
        )
        yield Family(
            c.TOPIC_CREATE_EXECUTION_TIME,
            "histogram",
            "topic creation time (ms)",
            [
                (self._l(invocation_status=status, is_system=_bool(system)), h)
                for (status, system), h in snap.topic_create.items()
            ],
        )
        yield Family(
            c.CONSUMER_GROUP_CREATE_EXECUTION_TIME,
            "histogram",
            "subscription group creation time (ms)",
            [(self._l(invocation_status=status), h) for (status, _), h in snap.group_create.items()],
        )
        yield from self.recorder.rpc.families(self._l)

    # -- gauges --------------------------------------------------------------------------------------------------

    def _gauges(self) -> Iterator[Family]:
        ctx = self.ctx
        store = ctx.store
        now_ms = int(self.clock() * 1000)
        topics = [t for t in ctx.topics.user_topics() if not is_system_topic(t.topic_name)]
        perm = int(PermName.PERM_READ) if ctx.config.is_slave else READ_WRITE
        yield Family(c.BROKER_PERMISSION, "gauge", "broker permission (PermName bits)", [(self._l(), perm)])
        yield Family(c.TOPIC_NUMBER, "gauge", "topics", [(self._l(), len(topics))])
        yield Family(c.CONSUMER_GROUP_NUMBER, "gauge", "subscription groups", [(self._l(), len(ctx.groups.all()))])
        yield from self._connections()
        yield from self._lag(now_ms)
        transactions = ctx.transactions
        half = transactions.pending_by_topic() if transactions is not None else {}
        yield Family(
            c.HALF_MESSAGES, "gauge", "half messages waiting", [(self._l(topic=t), n) for t, n in half.items()]
        )
        timer = ctx.timer
        yield Family(c.TIMING_MESSAGES, "gauge", "delay messages waiting", [(self._l(), timer.pending if timer else 0)])
        storage = self._l(storage_type=c.DEFAULT_STORAGE_TYPE, storage_medium=c.DEFAULT_STORAGE_MEDIUM)
        root = store.config.root
        yield Family(c.STORAGE_SIZE, "gauge", "bytes of the store's files", [(storage, _dir_size(root))])
        yield Family(
            c.STORAGE_FLUSH_BEHIND_BYTES, "gauge", "bytes written, not flushed", [(storage, store.flush_behind_bytes())]
        )
        yield Family(
            c.STORAGE_DISPATCH_BEHIND_BYTES,
            "gauge",
            "bytes stored, not yet in queues and index",
            [(storage, store.dispatch_behind_bytes())],
        )
        earliest = store.earliest_store_timestamp()
        reserve = max(0, now_ms - earliest) if earliest > 0 else 0
        yield Family(
            c.STORAGE_MESSAGE_RESERVE_TIME, "gauge", "age of the oldest message kept (ms)", [(storage, reserve)]
        )

    def _connections(self) -> Iterator[Family]:
        producers: defaultdict[tuple[str, str], int] = defaultdict(int)
        consumers: defaultdict[tuple[str, str, str, str], int] = defaultdict(int)
        for client in self.ctx.telemetry.clients():
            if not client.client_type:
                continue
            meta = client.meta
            language = (meta.language if meta else "").lower() or "unknown"
            version = (meta.client_version if meta else "").lower() or "unknown"
            if client.is_producer:
                producers[(language, version)] += 1
            else:
                mode = "push" if client.client_type == definition_pb2.ClientType.PUSH_CONSUMER else "pop"
                consumers[(client.group, language, version, mode)] += 1
        grpc = c.PROTOCOL_TYPE_GRPC
        yield Family(
            c.PRODUCER_CONNECTIONS,
            "gauge",
            "connected producers",
            [(self._l(language=lang, version=ver, protocol_type=grpc), n) for (lang, ver), n in producers.items()],
        )
        yield Family(
            c.CONSUMER_CONNECTIONS,
            "gauge",
            "connected consumers",
            [
                (
                    self._l(
                        consumer_group=g,
                        language=lang,
                        version=ver,
                        consume_mode=mode,
                        protocol_type=grpc,
                        is_system=_bool(is_system_group(g)),
                    ),
                    n,
                )
                for (g, lang, ver, mode), n in consumers.items()
            ],
        )

    def _lag(self, now_ms: int) -> Iterator[Family]:
        ctx = self.ctx
        store = ctx.store
        inflight = dict(self.inflight()) if self.inflight is not None else {}
        lag_rows, latency_rows, inflight_rows, ready_rows = [], [], [], []
        for group, topic in sorted(ctx.offsets.totals()):
            tc = ctx.topics.get(topic)
            if tc is None:
                continue
            committed = ctx.offsets.offsets_of(group, topic)
            lag = 0
            oldest = 0
            for qid in range(tc.read_queue_nums):
                end = store.get_max_offset_in_queue(topic, qid)
                at = committed.get(qid, 0)
                if end > at:
                    lag += end - at
                    ts = store.get_message_store_timestamp(topic, qid, at)
                    if ts > 0 and (oldest == 0 or ts < oldest):
                        oldest = ts
            labels = self._l(
                topic=topic,
                consumer_group=group,
                is_retry=_bool(topic.startswith(RETRY_GROUP_TOPIC_PREFIX)),
                is_system=_bool(is_system_topic(topic) or is_system_group(group)),
            )
            held = inflight.get((group, topic), 0)
            lag_rows.append((labels, lag))
            latency_rows.append((labels, max(0, now_ms - oldest) if oldest else 0))
            inflight_rows.append((labels, held))
            ready_rows.append((labels, max(0, lag - held)))
        yield Family(c.CONSUMER_LAG_MESSAGES, "gauge", "messages not yet consumed", lag_rows)
        yield Family(c.CONSUMER_LAG_LATENCY, "gauge", "age of the oldest unconsumed message (ms)", latency_rows)
        yield Family(c.CONSUMER_INFLIGHT_MESSAGES, "gauge", "messages received and not yet acked", inflight_rows)
        yield Family(c.CONSUMER_READY_MESSAGES, "gauge", "messages ready to be received", ready_rows)


def _dir_size(root: Path) -> int:
    total = 0
    for dirpath, _, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_size
            except OSError:  # deleted while walking (retention)
                continue
    return total
