"""``oms``'s own metrics with the official clients' names, labels and buckets: recorded for sends (success and
failure), receipts and listener calls against a real broker, readable from code, and exported over OTLP to the
collector the broker's settings name (metricsExporterType=OTLP_GRPC), as the official clients do."""

from __future__ import annotations

import threading

import pytest

import oms
import oms.client.metrics as client_metrics
from orbitmq.metrics import constants as c
from tests.oms.helpers import create_topic
from tests.otlp import Collector
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

TOPIC, GROUP = "ClientMetricsT", "GClientMetrics"


@pytest.mark.timeout(120)
def test_client_metrics_recorded_readable_and_exported(broker_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_metrics, "EXPORT_INTERVAL_MS", 300)  # the official 60 s would hold the test
    with Collector() as collector:
        broker = broker_factory.broker(
            options={
                "metricsExporterType": "OTLP_GRPC",
                "metricsGrpcExporterTarget": collector.target,
                "metricGrpcExporterIntervalInMills": "60000",
                "autoCreateTopicEnable": "false",
            }
        )
        create_topic(broker.addr, TOPIC)
        seen = threading.Event()
        failed_once: set[str] = set()

        def listener(message: oms.BytesMessage, context: oms.ConsumeContext) -> object:
            body = message.get_body(str)
            if body == "fail-once" and body not in failed_once:
                failed_once.add(body)
                return oms.ConsumeConcurrentlyStatus.RECONSUME_LATER
            seen.set()
            return oms.ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        with oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap:
            producer = ap.create_producer()
            producer.startup()
            for _ in range(3):
                producer.send(oms.BytesMessage(b"one", TOPIC))
            producer.send_batch([oms.BytesMessage(b"batch", TOPIC) for _ in range(10)])
            with pytest.raises(oms.OMSException):  # no such topic, auto-creation off: a failed send call
                producer.send(oms.BytesMessage(b"nowhere", "ClientMetricsMissing"))

            metrics = producer.metrics
            assert metrics is not None and producer.client_id is not None
            sent = metrics.histogram(c.SEND_COST_TIME, topic=TOPIC, invocation_status="success")
            assert sent.n == 13, "each message of a batch counts once, in one update"
            assert list(sent.bounds) == [1.0, 5.0, 10.0, 20.0, 50.0, 200.0, 500.0]
            assert sum(sent.counts) == 13 and sent.total > 0
            assert metrics.histogram(c.SEND_COST_TIME, topic="ClientMetricsMissing", invocation_status="failure").n == 1
            labels = next(f for f in metrics.families() if f.name == c.SEND_COST_TIME).samples[0][0]
            assert set(labels) == {"topic", "client_id", "invocation_status"}
            assert labels["client_id"] == producer.client_id

            consumer = ap.create_push_consumer(consumer_id=GROUP, consume_from_where="first", rebalance_interval=500)
            consumer.attach_queue(TOPIC, listener)
            consumer.startup()
            try:
                producer.send(oms.BytesMessage(b"fail-once", TOPIC))
                cm = consumer.metrics
                assert cm is not None

                def processed() -> bool:
                    ok = cm.histogram(c.PROCESS_TIME, topic=TOPIC, consumer_group=GROUP, invocation_status="success")
                    return ok.n >= 14  # 13 + the one that failed first

                wait_until(processed, 60, what="14 messages processed")
                failure = cm.histogram(c.PROCESS_TIME, topic=TOPIC, consumer_group=GROUP, invocation_status="failure")
                assert failure.n == 1
                assert list(failure.bounds) == [1.0, 5.0, 10.0, 100.0, 1000.0, 10_000.0, 60_000.0]
                waited = cm.histogram(c.AWAIT_TIME, topic=TOPIC, consumer_group=GROUP)
                assert waited.n >= 15 and list(waited.bounds) == [1.0, 5.0, 20.0, 100.0, 1000.0, 5000.0, 10_000.0]
                delivered = cm.histogram(c.DELIVERY_LATENCY, topic=TOPIC, consumer_group=GROUP)
                assert delivered.n >= 14, "the broker stamps each receive answer with its delivery time"

                def held() -> dict[str, float]:
                    family = next(f for f in cm.families() if f.name == c.CONSUMER_CACHED_MESSAGES)
                    assert all(set(labels) == {"topic", "consumer_group", "client_id"} for labels, _ in family.samples)
                    return {labels["topic"]: float(v) for labels, v in family.samples}

                wait_until(lambda: held().get(TOPIC) == 0, 30, what="nothing held once all is consumed")

                # exported to the collector the broker's settings reply named, under the official meter's name
                def exported(name: str, **labels: str) -> bool:
                    return any(
                        sum(p.bucket_counts) == p.count and p.count >= 1
                        for _, p in collector.histogram_points(name, **labels)
                    )

                wait_until(
                    lambda: exported(c.SEND_COST_TIME, topic=TOPIC, client_id=producer.client_id or ""),
                    30,
                    what="the producer's rocketmq_send_cost_time at the collector",
                )
                wait_until(
                    lambda: exported(c.PROCESS_TIME, consumer_group=GROUP, invocation_status="failure"),
                    30,
                    what="the consumer's rocketmq_process_time at the collector",
                )
                wait_until(
                    lambda: any(m.gauge.data_points for _, m in collector.metrics(c.CONSUMER_CACHED_MESSAGES)),
                    30,
                    what="the consumer's rocketmq_consumer_cached_messages gauge at the collector",
                )
                scopes = {scope for scope, _ in collector.metrics(c.SEND_COST_TIME)}
                assert scopes == {"org.apache.rocketmq.message"}
                points = collector.histogram_points(c.SEND_COST_TIME, topic=TOPIC, invocation_status="success")
                assert list(points[-1][1].explicit_bounds) == list(c.SEND_COST_TIME_BUCKETS_MS)
                assert max(p.count for _, p in points) == 14  # the 13 and "fail-once"
            finally:
                consumer.shutdown()
                producer.shutdown()
        assert metrics.exporter is None, "shutdown stops the export"


@pytest.mark.timeout(60)
def test_client_metrics_not_exported_without_a_collector(shared_broker) -> None:
    """A broker without OTLP_GRPC says metric off: the client records (readable) but exports nothing."""
    with oms.get_messaging_access_point(f"oms:rocketmq://{shared_broker.addr}/") as ap:
        producer = ap.create_producer()
        producer.startup()
        try:
            producer.send(oms.BytesMessage(b"x", "ClientMetricsQuiet"))
            metrics = producer.metrics
            assert metrics is not None
            assert metrics.histogram(c.SEND_COST_TIME, topic="ClientMetricsQuiet").n == 1
            assert metrics.exporter is None and metrics.target is None
        finally:
            producer.shutdown()
