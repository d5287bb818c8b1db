"""``/metrics`` of a real broker (metricsExporterType=PROM) after known traffic: RocketMQ 5's names, labels and
values; and the metrics keys' start-up errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import rocketmq
from rocketmq.grpc_protocol import Metric
from rocketmq.v5.client.metrics.client_metrics import ClientMetrics

import oms
from orbitmq.metrics.constants import RPC_LATENCY_BUCKETS_MS
from orbitmq.remoting.codec import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.oms.helpers import create_topic
from tests.procs import ROOT, free_port
from tests.remoting.client import remoting_call
from tests.scrape import buckets, scrape, value
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC, GROUP = "MetricsT", "GMetrics"


@pytest.mark.timeout(120)
def test_prometheus_endpoint_after_known_traffic(broker_factory) -> None:
    port, remoting = free_port(), free_port()
    broker = broker_factory.broker(
        options={
            "metricsExporterType": "PROM",
            "metricsPromExporterPort": str(port),
            "metricsLabel": "instance_id:m1",
            "remotingListenPort": str(remoting),
        }
    )
    with oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap, ap.resource_manager() as rm:
        rm.create_topic(TOPIC, read_queue_nums=2, write_queue_nums=2)
        rm.create_group(GROUP)
        for _ in range(2):  # a 4.x client's question, over remoting
            answer = remoting_call(
                remoting, RemotingCommand(RequestCode.GET_MAX_OFFSET, ext_fields={"topic": TOPIC, "queueId": "0"})
            )
            assert answer.code == ResponseCode.SUCCESS
        producer = ap.create_producer()
        producer.startup()
        for _ in range(5):
            producer.send(oms.BytesMessage(b"m" * 100, TOPIC, tags="TagA"))
        producer.send_batch([oms.BytesMessage(b"b" * 200, TOPIC) for _ in range(3)])
        consumer = ap.create_pull_consumer({"rmq.consume.from.where": "first"}, consumer_id=GROUP)
        consumer.attach_queue(TOPIC)
        consumer.startup()
        got: list[oms.BytesMessage] = []

        def drained() -> bool:
            for m in consumer.batch_receive(8, 0.5):
                consumer.ack(m)
                got.append(m)
            return len(got) >= 8

        wait_until(drained, 30, what="8 messages received and acked")
        for _ in range(2):  # stored after the group's offsets: its lag
            producer.send(oms.BytesMessage(b"late", TOPIC))

        metrics = scrape(port)
        base = {"cluster": "DefaultCluster", "node_type": "broker", "instance_id": "m1"}
        mine = {**base, "topic": TOPIC, "message_type": "normal", "is_system": "false"}
        assert value(metrics, "rocketmq_messages_in_total", **mine) == 10
        assert value(metrics, "rocketmq_throughput_in_total", **mine) > 5 * 100 + 3 * 200
        assert value(metrics, "rocketmq_message_size_count", **mine) >= 1
        sizes = buckets(metrics, "rocketmq_message_size", topic=TOPIC)
        assert list(sizes) == ["1024.0", "4096.0", "524288.0", "1048576.0", "2097152.0", "4194304.0", "+Inf"]
        assert sizes["+Inf"] == value(metrics, "rocketmq_message_size_count", **mine)
        out = {**base, "topic": TOPIC, "consumer_group": GROUP, "is_retry": "false"}
        assert value(metrics, "rocketmq_messages_out_total", **out) == 8
        assert value(metrics, "rocketmq_throughput_out_total", **out) > 0
        lag = {**base, "topic": TOPIC, "consumer_group": GROUP}
        wait_until(lambda: value(scrape(port), "rocketmq_consumer_lag_messages", **lag) == 2, 15, what="lag 2")
        metrics = scrape(port)
        assert value(metrics, "rocketmq_consumer_lag_latency", **lag) >= 0
        assert value(metrics, "rocketmq_consumer_ready_messages", **lag) == 2
        assert value(metrics, "rocketmq_consumer_inflight_messages", **lag) == 0
        assert value(metrics, "rocketmq_consumer_connections", consumer_group=GROUP, language="python") == 1
        assert value(metrics, "rocketmq_producer_connections", language="python", protocol_type="grpc") >= 1
        assert value(metrics, "rocketmq_topic_number", **base) >= 1
        assert value(metrics, "rocketmq_broker_permission", **base) == 6
        assert value(metrics, "rocketmq_storage_size", **base, storage_type="local") > 0
        assert value(metrics, "rocketmq_storage_dispatch_behind_bytes", **base) >= 0
        assert value(metrics, "rocketmq_storage_message_reserve_time", **base) >= 0
        sends = value(metrics, "rocketmq_rpc_latency_count", request_code="SendMessage", protocol_type="grpc")
        assert sends >= 5, "every v2 SendMessage call is timed"
        over_remoting = {"protocol_type": "remoting", "request_code": "get_max_offset", "response_code": "success"}
        assert value(metrics, "rocketmq_rpc_latency_count", **base, **over_remoting, result="success") == 2
        created = {**base, "invocation_status": "success"}
        assert value(metrics, "rocketmq_topic_create_execution_time_count", **created, is_system="false") == 1
        les = buckets(metrics, "rocketmq_topic_create_execution_time", **created)
        assert list(les) == ["10.0", "100.0", "1000.0", "3000.0", "5000.0", "+Inf"]
        assert value(metrics, "rocketmq_consumer_group_create_execution_time_count", **created) == 1
        consumer.shutdown()
        producer.shutdown()


@pytest.mark.timeout(90)
def test_transaction_metrics(broker_factory) -> None:
    """A commit and a rollback: RocketMQ's counters, the half-message gauge and the commit latency histogram."""
    port = free_port()
    broker = broker_factory.broker(options={"metricsExporterType": "PROM", "metricsPromExporterPort": str(port)})
    create_topic(broker.addr, "MetricsTx", "TRANSACTION")
    with oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap:
        producer = ap.create_producer()
        producer.startup()
        try:
            committed = producer.send(oms.BytesMessage(b"commit", "MetricsTx"), executor=lambda m, ctx: "commit")
            assert committed.transaction_resolution is oms.TransactionResolution.COMMIT
            rolled = producer.send(oms.BytesMessage(b"rollback", "MetricsTx"), executor=lambda m, ctx: "rollback")
            assert rolled.transaction_resolution is oms.TransactionResolution.ROLLBACK
        finally:
            producer.shutdown()
    metrics = scrape(port)
    assert value(metrics, "rocketmq_commit_messages_total", topic="MetricsTx") == 1
    assert value(metrics, "rocketmq_rollback_messages_total", topic="MetricsTx") == 1
    assert value(metrics, "rocketmq_finish_message_latency_count", topic="MetricsTx") == 1
    les = buckets(metrics, "rocketmq_finish_message_latency", topic="MetricsTx")
    assert list(les) == ["5.0", "60.0", "600.0", "3600.0", "43200.0", "86400.0", "+Inf"]
    assert les["5.0"] == 1, "committed within seconds"


@pytest.mark.timeout(60)
def test_metrics_keys_refused_at_start(tmp_path: Path) -> None:
    def fails(*options: str) -> str:
        args = [sys.executable, "-m", "broker.cli", "--store", str(tmp_path / "s"), "--port", str(free_port())]
        for option in options:
            args += ["-o", option]
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        return done.stderr.strip().splitlines()[-1]

    assert "metricsExporterType" in fails("metricsExporterType=GRAPHITE")
    assert "metricsGrpcExporterTarget" in fails("metricsExporterType=OTLP_GRPC")
    assert "metricsLabel item 'nocolon'" in fails("metricsExporterType=PROM", "metricsLabel=a:b,nocolon")


@pytest.mark.timeout(90)
def test_otlp_grpc_exporter_pushes_to_a_collector(broker_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    """An OTLP/gRPC metrics receiver (the collector's service, run here) gets RocketMQ's names with their labels."""
    from concurrent import futures

    import grpc
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc

    received: list[metrics_service_pb2.ExportMetricsServiceRequest] = []

    class Receiver(metrics_service_pb2_grpc.MetricsServiceServicer):
        def Export(self, request, context):
            received.append(request)
            return metrics_service_pb2.ExportMetricsServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Receiver(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        broker = broker_factory.broker(
            options={
                "metricsExporterType": "OTLP_GRPC",
                "metricsGrpcExporterTarget": f"127.0.0.1:{port}",
                "metricGrpcExporterIntervalInMills": "300",
            }
        )
        with oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap:
            producer = ap.create_producer()
            producer.startup()
            for _ in range(3):
                producer.send(oms.BytesMessage(b"otlp", "OtlpT"))
            producer.shutdown()

        def points(name: str) -> list[tuple[dict[str, str], float]]:
            out = []
            for request in list(received):
                for rm in request.resource_metrics:
                    for sm in rm.scope_metrics:
                        for metric in sm.metrics:
                            if metric.name != name:
                                continue
                            data = metric.sum.data_points or metric.gauge.data_points
                            for p in data:
                                labels = {a.key: a.value.string_value for a in p.attributes}
                                out.append((labels, p.as_int or p.as_double))
            return out

        def exported() -> bool:
            return any(labels.get("topic") == "OtlpT" and v >= 3 for labels, v in points("rocketmq_messages_in_total"))

        # the official client, told by the settings reply where the collector is, exports its own metrics there
        # (every 60 s by its own reader period; shortened here so the test does not wait a minute)
        monkeypatch.setattr(ClientMetrics, "METRIC_READER_INTERVAL", 300)
        official = rocketmq.Producer(rocketmq.ClientConfiguration(broker.addr, rocketmq.Credentials()), ("OtlpT",))
        official.startup()
        try:
            m = rocketmq.Message()
            m.topic, m.body = "OtlpT", b"from the official client"
            official.send(m)
            wait_until(
                lambda: any(
                    metric.name == "rocketmq_send_cost_time"
                    for request in list(received)
                    for rm in request.resource_metrics
                    for sm in rm.scope_metrics
                    for metric in sm.metrics
                ),
                30,
                what="the official client's rocketmq_send_cost_time at the collector",
            )
        finally:
            official.shutdown()
            # the official client's shutdown leaves its meter provider exporting (to a collector this test stops, so
            # its SDK logs an ERROR into whatever test runs next); a settings reply with metrics off stops it
            official.reset_metric(Metric(on=False))
        wait_until(
            exported,
            30,
            what="rocketmq_messages_in_total of OtlpT exported",
        )
        assert any(v >= 1 for _, v in points("rocketmq_topic_number"))
        # histograms go out whole: RocketMQ's buckets, counts per bucket
        latency = [
            p
            for request in list(received)
            for rm in request.resource_metrics
            for sm in rm.scope_metrics
            if sm.scope.name == "broker-meter"
            for metric in sm.metrics
            if metric.name == "rocketmq_rpc_latency"
            for p in metric.histogram.data_points
        ]
        assert latency, "rocketmq_rpc_latency exported as a histogram"
        assert all(list(p.explicit_bounds) == list(RPC_LATENCY_BUCKETS_MS) for p in latency)
        assert all(sum(p.bucket_counts) == p.count for p in latency)
    finally:
        server.stop(0)
