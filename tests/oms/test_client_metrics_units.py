"""``oms``'s metrics recorder without a server: one update per call, the official buckets, settings to target."""

from __future__ import annotations

import pytest
from rocketmq.grpc_protocol import definition_pb2

from oms.client.metrics import ClientMetrics, metric_target
from orbitmq.metrics import constants as c


def test_client_metrics_record_once_per_call() -> None:
    m = ClientMetrics("cid")
    m.on_send("T", 1024, 0.004, True)
    m.on_send("T", 1, 0.3, False)
    m.on_consume("T", "G", 2.0, 0.010, [True, True, False, True])
    m.on_delivery("T", "G", 4, -5.0)  # clocks apart: dropped
    sent = m.histogram(c.SEND_COST_TIME, topic="T", invocation_status="success")
    assert sent.n == 1024 and sent.counts[1] == 1024  # 4 ms: the (1, 5] bucket
    assert m.histogram(c.SEND_COST_TIME, invocation_status="failure").counts[-2] == 1  # 300 ms: (200, 500]
    process = m.histogram(c.PROCESS_TIME, consumer_group="G")
    assert process.n == 4 and process.total == pytest.approx(10.0)  # 10 ms shared by 4 messages
    assert m.histogram(c.PROCESS_TIME, invocation_status="failure").n == 1
    assert m.histogram(c.AWAIT_TIME, topic="T").n == 4
    assert m.histogram(c.DELIVERY_LATENCY).n == 0


def test_metric_target_from_settings() -> None:
    metric = definition_pb2.Metric(on=True)
    assert metric_target(metric) is None, "on without an address: nowhere to export"
    metric.endpoints.addresses.add(host="10.0.0.1", port=4317)
    assert metric_target(metric) == "10.0.0.1:4317"
    metric.on = False
    assert metric_target(metric) is None
