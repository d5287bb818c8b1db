"""``metricsExporterType``: PROM serves ``/metrics`` (prometheus_client's exposition and HTTP server), OTLP_GRPC
pushes to an OpenTelemetry collector (the SDK's OTLP/gRPC exporter, histograms whole), LOG writes the families to
the log. Each reads a ``MetricsSource`` from its own thread (or, for LOG, a loop task): nothing here runs on the
message paths."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from orbitmq.logging import get_logger
from orbitmq.metrics.constants import ExporterType
from orbitmq.metrics.model import Family, Histogram, MetricsSource

log = get_logger("metrics")


class PrometheusExporter:
    """A registry of its own (not the process-wide default: tests run several servers) behind an HTTP server."""

    def __init__(self, source: MetricsSource, host: str, port: int) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_PromAdapter(source))
        self.server, self.thread = start_http_server(port, addr=host, registry=self.registry)
        self.port = int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class _PromAdapter:
    def __init__(self, source: MetricsSource) -> None:
        self.source = source

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        for fam in self.source.families():
            if not fam.samples:
                continue
            names = sorted(fam.samples[0][0])
            metric: Any
            if fam.kind == "counter":
                metric = CounterMetricFamily(fam.name, fam.help, labels=names)
            elif fam.kind == "histogram":
                metric = HistogramMetricFamily(fam.name, fam.help, labels=names)
            else:
                metric = GaugeMetricFamily(fam.name, fam.help, labels=names)
            for labels, value in fam.samples:
                values = [labels.get(n, "") for n in names]
                if isinstance(value, Histogram):
                    metric.add_metric(values, buckets=_cumulative(value), sum_value=value.total)
                else:
                    metric.add_metric(values, float(value))
            yield metric


def _cumulative(h: Histogram) -> list[tuple[str, float]]:
    out, running = [], 0
    for bound, count in zip([*map(str, h.bounds), "+Inf"], h.counts, strict=True):
        running += count
        out.append((bound, float(running)))
    return out


def parse_headers(text: str) -> dict[str, str]:
    """``metricsGrpcExporterHeader``: ``key=value,key=value``."""
    return {k.strip(): v.strip() for k, _, v in (p.partition("=") for p in text.split(",") if "=" in p)}


class OtlpExporter:
    """Every ``interval_ms`` (and once more at close) the source's families go to ``target`` as one OTLP request:
    counters as cumulative monotonic sums, gauges as gauges, histograms with their buckets (built here from the
    families, so the source keeps its own cheap aggregation and the SDK's instruments are not needed)."""

    def __init__(
        self,
        source: MetricsSource,
        target: str,
        *,
        scope: str,
        interval_ms: int,
        timeout_ms: int,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        self.source = source
        self.scope = scope
        self.target = target
        self.interval_s = max(0.05, interval_ms / 1000)
        self.timeout_ms = timeout_ms
        self.exporter = OTLPMetricExporter(
            endpoint=target, insecure=True, headers=dict(headers) if headers else None, timeout=timeout_ms / 1000
        )
        self.started_ns = time.time_ns()  # the start of every cumulative point
        self.reachable = True  # the last export went through (a close does not wait on a collector that is away)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"otlp-metrics {target}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.export_once()

    def export_once(self) -> bool:
        """One push of everything now; False (logged) when the collector did not take it."""
        from opentelemetry.sdk.metrics.export import MetricExportResult

        try:
            data = self._metrics_data(self.source.families())
            ok = self.exporter.export(data, timeout_millis=self.timeout_ms) is MetricExportResult.SUCCESS
        except Exception as exc:  # a collector away must never take the process with it
            log.info("metrics export failed", target=self.target, error=repr(exc))
            ok = False
        else:
            if not ok:
                log.info("metrics export refused", target=self.target)
        self.reachable = ok
        return ok

    def _metrics_data(self, families: list[Family]) -> Any:
        from opentelemetry.sdk.metrics.export import (
            AggregationTemporality,
            Gauge,
            HistogramDataPoint,
            Metric,
            MetricsData,
            NumberDataPoint,
            ResourceMetrics,
            ScopeMetrics,
            Sum,
        )
        from opentelemetry.sdk.metrics.export import Histogram as OtelHistogram
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope

        now, start = time.time_ns(), self.started_ns
        cumulative = AggregationTemporality.CUMULATIVE
        metrics = []
        for fam in families:
            if not fam.samples:
                continue
            data: Any
            if fam.kind == "histogram":
                points = [
                    HistogramDataPoint(
                        attributes=labels,
                        start_time_unix_nano=start,
                        time_unix_nano=now,
                        count=value.n,
                        sum=value.total,
                        bucket_counts=list(value.counts),
                        explicit_bounds=list(value.bounds),
                        min=None,  # type: ignore[arg-type]  # not kept (optional in OTLP: left unset)
                        max=None,  # type: ignore[arg-type]
                    )
                    for labels, value in fam.samples
                    if isinstance(value, Histogram)
                ]
                data = OtelHistogram(points, cumulative)
            else:
                numbers = [
                    NumberDataPoint(attributes=labels, start_time_unix_nano=start, time_unix_nano=now, value=value)
                    for labels, value in fam.samples
                    if not isinstance(value, Histogram)
                ]
                data = Sum(numbers, cumulative, is_monotonic=True) if fam.kind == "counter" else Gauge(numbers)
            metrics.append(Metric(name=fam.name, description=fam.help, unit=None, data=data))
        scope = ScopeMetrics(InstrumentationScope(self.scope), metrics, schema_url="")
        return MetricsData([ResourceMetrics(Resource.get_empty(), [scope], schema_url="")])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.timeout_ms / 1000 + 1)  # an export under way ends within its timeout
        if self.reachable:
            self.export_once()  # what happened since the last period is not lost
        self.exporter.shutdown()


class LogExporter:
    """Every ``interval_ms`` a log line per family with its samples (RocketMQ's LOG exporter)."""

    def __init__(self, source: MetricsSource, interval_ms: int) -> None:
        self.source = source
        self.interval_s = max(0.05, interval_ms / 1000)
        self.task = asyncio.get_running_loop().create_task(self._run(), name="metrics-log")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            for fam in self.source.families():
                samples = [
                    {**labels, "value": value.n if isinstance(value, Histogram) else value}
                    for labels, value in fam.samples
                ]
                if samples:
                    log.info("metrics", metric=fam.name, samples=samples)

    def close(self) -> None:
        self.task.cancel()


Exporter = PrometheusExporter | OtlpExporter | LogExporter


class _ExporterKeys(Protocol):
    """The ``MetricsConfig`` keys an exporter reads."""

    metricsExporterType: ExporterType
    metricsPromExporterHost: str
    metricsPromExporterPort: int
    metricsGrpcExporterTarget: str
    metricsGrpcExporterHeader: str
    metricGrpcExporterIntervalInMills: int
    metricGrpcExporterTimeOutInMills: int
    metricLoggingExporterIntervalInMills: int


def start_exporter(source: MetricsSource, cfg: _ExporterKeys, bind_host: str, scope: str) -> Exporter | None:
    """The exporter ``metricsExporterType`` names, started (LOG needs a running loop); None for DISABLE.
    ``scope`` names the OpenTelemetry meter, as RocketMQ's (``broker-meter``)."""
    kind = cfg.metricsExporterType
    if kind is ExporterType.PROM:
        host = cfg.metricsPromExporterHost or bind_host
        exporter = PrometheusExporter(source, host, cfg.metricsPromExporterPort)
        log.info("metrics on /metrics", host=host, port=exporter.port)
        return exporter
    if kind is ExporterType.OTLP_GRPC:
        return OtlpExporter(
            source,
            cfg.metricsGrpcExporterTarget,
            scope=scope,
            interval_ms=cfg.metricGrpcExporterIntervalInMills,
            timeout_ms=cfg.metricGrpcExporterTimeOutInMills,
            headers=parse_headers(cfg.metricsGrpcExporterHeader),
        )
    if kind is ExporterType.LOG:
        return LogExporter(source, cfg.metricLoggingExporterIntervalInMills)
    return None


def close_exporter(exporter: Exporter | None) -> None:
    if exporter is not None:
        exporter.close()
