"""``metricsExporterType``: PROM serves ``/metrics`` (prometheus_client's exposition and HTTP server), OTLP_GRPC
pushes to ``metricsGrpcExporterTarget`` with the OpenTelemetry SDK, LOG writes the families to the log."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

from broker.metrics import constants as c
from broker.metrics.collector import Family, MetricsCollector
from broker.metrics.recorder import Histogram
from orbitmq.logging import get_logger

log = get_logger("broker.metrics")

CACHE_S = 1.0  # an OTLP export reads every instrument within this; one collector pass serves them all


class PrometheusExporter:
    """A registry of its own (not the process-wide default: tests run several brokers) behind an HTTP server."""

    def __init__(self, collector: MetricsCollector, host: str, port: int) -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_PromAdapter(collector))
        self.server, self.thread = start_http_server(port, addr=host, registry=self.registry)
        self.port = int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class _PromAdapter:
    def __init__(self, collector: MetricsCollector) -> None:
        self.collector = collector

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        for fam in self.collector.families():
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


class OtlpExporter:
    """Observable instruments read the collector at each export (every ``interval_ms``); histograms are exported
    as their count and sum (OpenTelemetry has no observable histogram)."""

    def __init__(self, collector: MetricsCollector, target: str, headers: str, interval_ms: int, timeout_ms: int):
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        pairs = dict(p.split("=", 1) for p in headers.split(",") if "=" in p)
        exporter = OTLPMetricExporter(endpoint=target, insecure=True, headers=pairs or None, timeout=timeout_ms / 1000)
        reader = PeriodicExportingMetricReader(exporter, export_interval_millis=interval_ms)
        self.provider = MeterProvider(metric_readers=[reader])
        meter = self.provider.get_meter("broker-meter")
        self.collector = collector
        self._cache: dict[str, Family] = {}
        self._cache_at = 0.0
        for fam in collector.families():
            self._instrument(meter, fam.name, fam.kind)

    def _family(self, name: str) -> Family | None:
        # one collector pass per export, shared by the instruments that export reads
        if time.monotonic() - self._cache_at > CACHE_S:
            self._cache = {f.name: f for f in self.collector.families()}
            self._cache_at = time.monotonic()
        return self._cache.get(name)

    def _instrument(self, meter: Any, name: str, kind: str) -> None:
        from opentelemetry.metrics import Observation

        def observe(_options: Any) -> list[Any]:
            fam = self._family(name)
            return [
                Observation(value.n if isinstance(value, Histogram) else value, labels)
                for labels, value in (fam.samples if fam else [])
            ]

        if kind == "gauge":
            meter.create_observable_gauge(name, callbacks=[observe])
        else:
            meter.create_observable_counter(name, callbacks=[observe])

    def close(self) -> None:
        self.provider.shutdown()


class LogExporter:
    """Every ``interval_ms`` a log line per family with its samples (RocketMQ's LOG exporter)."""

    def __init__(self, collector: MetricsCollector, interval_ms: int) -> None:
        self.collector = collector
        self.interval_s = max(0.05, interval_ms / 1000)
        self.task = asyncio.get_running_loop().create_task(self._run(), name="metrics-log")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            for fam in self.collector.families():
                samples = [
                    {**labels, "value": value.n if isinstance(value, Histogram) else value}
                    for labels, value in fam.samples
                ]
                if samples:
                    log.info("metrics", metric=fam.name, samples=samples)

    def close(self) -> None:
        self.task.cancel()


Exporter = PrometheusExporter | OtlpExporter | LogExporter


def start_exporter(kind: c.ExporterType, collector: MetricsCollector, cfg: Any, bind_host: str) -> Exporter | None:
    """The exporter ``metricsExporterType`` names, started; None for DISABLE."""
    if kind is c.ExporterType.PROM:
        host = cfg.metricsPromExporterHost or bind_host
        exporter = PrometheusExporter(collector, host, cfg.metricsPromExporterPort)
        log.info("metrics on /metrics", host=host, port=exporter.port)
        return exporter
    if kind is c.ExporterType.OTLP_GRPC:
        return OtlpExporter(
            collector,
            cfg.metricsGrpcExporterTarget,
            cfg.metricsGrpcExporterHeader,
            cfg.metricGrpcExporterIntervalInMills,
            cfg.metricGrpcExporterTimeOutInMills,
        )
    if kind is c.ExporterType.LOG:
        return LogExporter(collector, cfg.metricLoggingExporterIntervalInMills)
    return None


def close_exporter(exporter: Exporter | None) -> None:
    if exporter is not None:
        exporter.close()
