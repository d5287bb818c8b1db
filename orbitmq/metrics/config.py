"""The metrics keys of ``broker.conf`` and ``namesrv.conf`` (RocketMQ 5's names), mixed into both configs."""

from __future__ import annotations

from dataclasses import dataclass

from orbitmq.config import ConfigError
from orbitmq.metrics.constants import DEFAULT_PROM_EXPORTER_PORT, ExporterType
from orbitmq.metrics.model import parse_metrics_label


@dataclass
class MetricsConfig:
    """Metrics keys of a server process (mixed into ``BrokerConfig`` and ``NamesrvConfig``; docs/metrics.md)."""

    metricsExporterType: ExporterType = ExporterType.DISABLE  # DISABLE, PROM (/metrics), OTLP_GRPC or LOG
    metricsPromExporterHost: str = ""  # PROM: address of /metrics; empty = the process's bind address
    metricsPromExporterPort: int = DEFAULT_PROM_EXPORTER_PORT  # PROM: port of /metrics (0 = a free port)
    metricsGrpcExporterTarget: str = ""  # OTLP_GRPC: the collector's host:port (required for OTLP_GRPC)
    metricsGrpcExporterHeader: str = ""  # OTLP_GRPC: key=value,key=value headers sent with each export
    metricGrpcExporterTimeOutInMills: int = 3_000  # OTLP_GRPC: export timeout (ms)
    metricGrpcExporterIntervalInMills: int = 60_000  # OTLP_GRPC: ms between exports
    metricLoggingExporterIntervalInMills: int = 10_000  # LOG: ms between metric log lines
    metricsLabel: str = ""  # key:value,key:value labels added to every metric (e.g. instance_id:a1)

    def validate_metrics(self) -> None:
        """ConfigError naming the key, before anything starts."""
        if self.metricsExporterType is ExporterType.OTLP_GRPC and not self.metricsGrpcExporterTarget.strip():
            raise ConfigError(
                "metricsExporterType=OTLP_GRPC needs metricsGrpcExporterTarget (the collector's host:port)"
            )
        if not 0 <= self.metricsPromExporterPort <= 65535:
            raise ConfigError(f"metricsPromExporterPort must be a port (0-65535), got {self.metricsPromExporterPort}")
        try:
            parse_metrics_label(self.metricsLabel)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def metrics_enabled(self) -> bool:
        return self.metricsExporterType is not ExporterType.DISABLE

    def client_metric_endpoints(self) -> list[tuple[str, int]]:
        """Where v2 clients export their own metrics (``Settings.metric``): the OTLP collector this process exports
        to, so clients and servers land in one place; none unless ``OTLP_GRPC``."""
        if self.metricsExporterType is not ExporterType.OTLP_GRPC:
            return []
        out = []
        for target in self.metricsGrpcExporterTarget.split(","):
            host, _, port = target.strip().removeprefix("http://").removeprefix("https://").rpartition(":")
            if host and port.isdigit():
                out.append((host, int(port)))
        return out
