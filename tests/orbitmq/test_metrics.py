"""The shared metrics pieces without a server: histogram buckets, the remoting names of rocketmq_rpc_latency, the
config keys' checks and client endpoints, the OTLP request built from families."""

from __future__ import annotations

import pytest

from orbitmq.config import ConfigError
from orbitmq.metrics import constants as c
from orbitmq.metrics.config import MetricsConfig
from orbitmq.metrics.exporters import OtlpExporter, parse_headers
from orbitmq.metrics.model import Family, Histogram, parse_metrics_label
from orbitmq.metrics.rpc import RpcLatency
from orbitmq.remoting.codes import RequestCode, ResponseCode


def test_histogram_bucket_edges_are_inclusive() -> None:
    h = Histogram((1.0, 5.0))
    for value in (0.5, 1.0, 1.5, 5.0, 9.0):
        h.observe(value)
    h.observe(2.0, times=3)  # a batch: one update, three observations
    assert h.counts == [2, 5, 1] and h.n == 8 and h.total == pytest.approx(23.0)


def test_rpc_latency_names_remoting_codes_as_rocketmq_does() -> None:
    rpc = RpcLatency()
    rpc.on_remoting(RequestCode.SEND_MESSAGE, ResponseCode.SUCCESS, False, 0.002)
    rpc.on_remoting(9999, 4242, False, 0.001)  # codes without a name: the number
    rpc.on_remoting(RequestCode.HEART_BEAT, None, True, 0.001)
    rpc.on_remoting(RequestCode.PULL_MESSAGE, None, False, 0.001)
    rpc.on_grpc("/apache.rocketmq.v2.MessagingService/SendMessage", None, 0.001)
    (family,) = rpc.families(lambda **own: {"node_type": "x", **own})
    keys = {
        (s[0]["protocol_type"], s[0]["request_code"], s[0]["response_code"], s[0]["result"]) for s in family.samples
    }
    assert keys == {
        ("remoting", "send_message", "success", "success"),
        ("remoting", "9999", "4242", "success"),
        ("remoting", "heart_beat", "", "oneway"),
        ("remoting", "pull_message", "", "process_request_failed"),
        ("grpc", "SendMessage", "-1", "process_request_failed"),
    }
    hist = next(v for labels, v in family.samples if labels["request_code"] == "send_message")
    assert isinstance(hist, Histogram) and list(hist.bounds) == list(c.RPC_LATENCY_BUCKETS_MS) and hist.total == 2.0


def test_metrics_keys_checked_and_client_endpoints() -> None:
    with pytest.raises(ConfigError, match="metricsGrpcExporterTarget"):
        MetricsConfig(metricsExporterType=c.ExporterType.OTLP_GRPC).validate_metrics()
    with pytest.raises(ConfigError, match="metricsLabel item 'x'"):
        MetricsConfig(metricsLabel="a:b,x").validate_metrics()
    assert parse_metrics_label(" a : 1 , b:2 ") == {"a": "1", "b": "2"}
    assert parse_headers("k=v, x=y=z,bad") == {"k": "v", "x": "y=z"}
    assert MetricsConfig(metricsExporterType=c.ExporterType.PROM).client_metric_endpoints() == []
    otlp = MetricsConfig(metricsExporterType=c.ExporterType.OTLP_GRPC, metricsGrpcExporterTarget="http://h:4317,k:1")
    assert otlp.client_metric_endpoints() == [("h", 4317), ("k", 1)]


def test_otlp_request_carries_histograms_whole() -> None:
    h = Histogram((1.0, 5.0))
    h.observe(3.0, times=2)

    class Source:
        def families(self) -> list[Family]:
            return [
                Family("a_total", "counter", "", [({"t": "x"}, 7)]),
                Family("b", "gauge", "", [({}, 1.5)]),
                Family("c", "histogram", "", [({"t": "x"}, h)]),
                Family("empty", "gauge", "", []),
            ]

    exporter = OtlpExporter.__new__(OtlpExporter)  # the request builder only: no channel, no thread
    exporter.scope, exporter.started_ns = "scope", 1
    data = exporter._metrics_data(Source().families())
    (rm,) = data.resource_metrics
    (sm,) = rm.scope_metrics
    assert sm.scope.name == "scope"
    by_name = {m.name: m.data for m in sm.metrics}
    assert set(by_name) == {"a_total", "b", "c"}
    assert by_name["a_total"].is_monotonic and by_name["a_total"].data_points[0].value == 7
    point = by_name["c"].data_points[0]
    assert (point.count, point.sum, list(point.bucket_counts), list(point.explicit_bounds)) == (
        2,
        6.0,
        [0, 2, 0],
        [1, 5],
    )
