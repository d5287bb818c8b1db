"""An OTLP/gRPC metrics receiver (the OpenTelemetry collector's service) run inside a test, and what it received."""

from __future__ import annotations

import threading
from concurrent import futures
from typing import Any

import grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc


class Collector(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self) -> None:
        self.received: list[metrics_service_pb2.ExportMetricsServiceRequest] = []
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(self, self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")

    def Export(self, request: Any, context: Any) -> metrics_service_pb2.ExportMetricsServiceResponse:
        with self._lock:
            self.received.append(request)
        return metrics_service_pb2.ExportMetricsServiceResponse()

    def __enter__(self) -> Collector:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop(0)

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def metrics(self, name: str, scope: str | None = None) -> list[tuple[str, Any]]:
        """(scope name, metric) of every export of ``name`` so far, oldest first."""
        with self._lock:
            requests = list(self.received)
        return [
            (sm.scope.name, metric)
            for request in requests
            for rm in request.resource_metrics
            for sm in rm.scope_metrics
            if scope is None or sm.scope.name == scope
            for metric in sm.metrics
            if metric.name == name
        ]

    def histogram_points(self, name: str, **labels: str) -> list[tuple[dict[str, str], Any]]:
        """(attributes, histogram data point) of ``name`` whose attributes include ``labels``."""
        out = []
        for _, metric in self.metrics(name):
            for point in metric.histogram.data_points:
                attributes = {a.key: a.value.string_value for a in point.attributes}
                if labels.items() <= attributes.items():
                    out.append((attributes, point))
        return out
