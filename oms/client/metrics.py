"""A client's own metrics with the official RocketMQ 5 clients' names, labels and buckets (``rocketmq_send_cost_time``,
``rocketmq_delivery_latency``, ``rocketmq_await_time``, ``rocketmq_process_time``; ms), recorded once per send call or
consumed batch (a batch of n counts n observations in one update), readable from code (``families()``,
``histogram()``) and exported as the official clients do: over OTLP/gRPC to the collector the broker's settings reply
names (``Settings.metric``), while it names one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence

from rocketmq.grpc_protocol import definition_pb2

from orbitmq.metrics import constants as c
from orbitmq.metrics.exporters import OtlpExporter
from orbitmq.metrics.model import Family, Histogram, Labels

log = logging.getLogger("oms.client.metrics")

# the official clients' OTLP export period and timeout (ClientMetrics.METRIC_READER_INTERVAL, ..._RPC_TIMEOUT)
EXPORT_INTERVAL_MS = 60_000
EXPORT_TIMEOUT_MS = 5_000

SendKey = tuple[str, str]  # topic, invocation status
GroupKey = tuple[str, str]  # topic, consumer group
ProcessKey = tuple[str, str, str]  # topic, consumer group, invocation status


def _observe(
    table: dict[tuple[str, ...], Histogram], key: tuple[str, ...], bounds: Sequence[float], ms: float, n: int
) -> None:
    hist = table.get(key)
    if hist is None:
        hist = table[key] = Histogram(bounds)
    hist.observe(ms, n)


def _status(ok: bool) -> str:
    return c.INVOCATION_SUCCESS if ok else c.INVOCATION_FAILURE


def metric_target(metric: definition_pb2.Metric) -> str | None:
    """``host:port`` of the collector a settings reply names; None when metrics are off (or no address)."""
    if not metric.on:
        return None
    for address in metric.endpoints.addresses:
        if address.host and address.port:
            return f"{address.host}:{address.port}"
    return None


class ClientMetrics:
    """Thread-safe: sends record on the loop, listeners on the consumer's pool threads, exports on their own."""

    def __init__(self, client_id: str) -> None:
        self.client_id = client_id
        self._lock = threading.Lock()
        self._send: dict[tuple[str, ...], Histogram] = {}
        self._delivery: dict[tuple[str, ...], Histogram] = {}
        self._await: dict[tuple[str, ...], Histogram] = {}
        self._process: dict[tuple[str, ...], Histogram] = {}
        self.exporter: OtlpExporter | None = None
        # a push consumer's held messages, topic -> (messages, bytes), read when exported (gauges, as the officials')
        self._cache: Callable[[], Mapping[str, tuple[int, int]]] | None = None
        self._cache_group = ""
        self.target: str | None = None  # the collector exported to, from the last settings reply

    # -- recording ----------------------------------------------------------------------------------------------

    def on_send(self, topic: str, messages: int, seconds: float, ok: bool) -> None:
        """One send call (its retries included) of ``messages`` messages: each message's cost is the call's."""
        with self._lock:
            _observe(self._send, (topic, _status(ok)), c.SEND_COST_TIME_BUCKETS_MS, seconds * 1000, messages)

    def on_delivery(self, topic: str, group: str, messages: int, ms: float) -> None:
        """Messages received ``ms`` after the broker stamped their delivery (v2 ReceiveMessage's timestamp)."""
        if ms < 0:  # clocks apart: the official clients drop it too
            return
        with self._lock:
            _observe(self._delivery, (topic, group), c.DELIVERY_LATENCY_BUCKETS_MS, ms, messages)

    def on_consume(self, topic: str, group: str, await_ms: float, process_s: float, oks: Sequence[bool]) -> None:
        """One listener call over ``len(oks)`` messages: each waited ``await_ms`` since it arrived and took the call's
        time divided among them (exact for the usual one message per call)."""
        n = len(oks)
        if not n:
            return
        failed = n - sum(oks)
        each_ms = process_s * 1000 / n
        with self._lock:
            if await_ms >= 0:
                _observe(self._await, (topic, group), c.AWAIT_TIME_BUCKETS_MS, await_ms, n)
            if n - failed:
                _observe(
                    self._process, (topic, group, c.INVOCATION_SUCCESS), c.PROCESS_TIME_BUCKETS_MS, each_ms, n - failed
                )
            if failed:
                _observe(
                    self._process, (topic, group, c.INVOCATION_FAILURE), c.PROCESS_TIME_BUCKETS_MS, each_ms, failed
                )

    def watch_cache(self, group: str, cached: Callable[[], Mapping[str, tuple[int, int]]]) -> None:
        """A push consumer's held messages become ``rocketmq_consumer_cached_messages`` / ``_bytes``."""
        self._cache_group, self._cache = group, cached

    # -- reading ------------------------------------------------------------------------------------------------

    def families(self) -> list[Family]:
        me = self.client_id
        with self._lock:
            send = [
                ({c.LABEL_TOPIC: t, c.LABEL_CLIENT_ID: me, c.LABEL_INVOCATION_STATUS: s}, h.copy())
                for (t, s), h in self._send.items()
            ]
            delivery = [(self._group_labels(t, g), h.copy()) for (t, g), h in self._delivery.items()]
            waited = [(self._group_labels(t, g), h.copy()) for (t, g), h in self._await.items()]
            process = [
                ({**self._group_labels(t, g), c.LABEL_INVOCATION_STATUS: s}, h.copy())
                for (t, g, s), h in self._process.items()
            ]
        messages: list[tuple[Labels, float | Histogram]] = []
        held_bytes: list[tuple[Labels, float | Histogram]] = []
        if self._cache is not None:
            for topic, (n, size) in self._cache().items():
                labels = self._group_labels(topic, self._cache_group)
                messages.append((labels, n))
                held_bytes.append((labels, size))
        return [
            Family(c.CONSUMER_CACHED_MESSAGES, "gauge", "messages held, not yet consumed", messages),
            Family(c.CONSUMER_CACHED_BYTES, "gauge", "body bytes held, not yet consumed", held_bytes),
            Family(c.SEND_COST_TIME, "histogram", "send call cost (ms)", send),
            Family(c.DELIVERY_LATENCY, "histogram", "broker delivery to client receipt (ms)", delivery),
            Family(c.AWAIT_TIME, "histogram", "receipt to listener start (ms)", waited),
            Family(c.PROCESS_TIME, "histogram", "listener time per message (ms)", process),
        ]

    def _group_labels(self, topic: str, group: str) -> Labels:
        return {c.LABEL_TOPIC: topic, c.LABEL_CONSUMER_GROUP: group, c.LABEL_CLIENT_ID: self.client_id}

    def histogram(self, name: str, **labels: str) -> Histogram:
        """The sum of ``name``'s histograms whose labels include ``labels`` (empty when none has been recorded)."""
        family = next(f for f in self.families() if f.name == name)
        total: Histogram | None = None
        for got, value in family.samples:
            if isinstance(value, Histogram) and labels.items() <= got.items():
                if total is None:
                    total = Histogram(value.bounds)
                total.counts = [a + b for a, b in zip(total.counts, value.counts, strict=True)]
                total.total += value.total
                total.n += value.n
        return total or Histogram(_BUCKETS[name])

    # -- export -------------------------------------------------------------------------------------------------

    def apply_settings(self, metric: definition_pb2.Metric) -> None:
        """A settings reply arrived: export to the collector it names, stop when it names none (loop thread)."""
        target = metric_target(metric)
        if target == self.target:
            return
        old, self.exporter = self.exporter, None
        if old is not None:  # its last export may wait for the collector: not on the loop
            threading.Thread(target=old.close, name="otlp-metrics close", daemon=True).start()
        self.target = target
        if target is not None:
            self.exporter = OtlpExporter(
                self, target, scope=c.CLIENT_METER_NAME, interval_ms=EXPORT_INTERVAL_MS, timeout_ms=EXPORT_TIMEOUT_MS
            )
            log.info("client %s exports its metrics to %s", self.client_id, target)

    def close(self) -> None:
        """At shutdown, off the loop: one last export (what the period had not sent yet) may wait for the collector."""
        self.target = None
        exporter, self.exporter = self.exporter, None
        if exporter is not None:
            exporter.close()


_BUCKETS: dict[str, Sequence[float]] = {
    c.SEND_COST_TIME: c.SEND_COST_TIME_BUCKETS_MS,
    c.DELIVERY_LATENCY: c.DELIVERY_LATENCY_BUCKETS_MS,
    c.AWAIT_TIME: c.AWAIT_TIME_BUCKETS_MS,
    c.PROCESS_TIME: c.PROCESS_TIME_BUCKETS_MS,
}
