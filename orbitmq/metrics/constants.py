"""The metric facts more than one process needs: RocketMQ 5's label names, ``rocketmq_rpc_latency`` (its
``RemotingMetricsConstant``) and the client histograms (rocketmq-clients' ``HistogramEnum`` / ``MetricLabels``).
Broker-only names live in ``broker/metrics/constants.py``."""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class ExporterType(StrEnum):
    """``metricsExporterType``."""

    DISABLE = "DISABLE"
    PROM = "PROM"
    OTLP_GRPC = "OTLP_GRPC"
    LOG = "LOG"


DEFAULT_PROM_EXPORTER_PORT: Final = 5557  # RocketMQ's metricsPromExporterPort

# every server sample carries these (BrokerMetricsConstant)
LABEL_CLUSTER_NAME: Final = "cluster"
LABEL_NODE_TYPE: Final = "node_type"
LABEL_NODE_ID: Final = "node_id"
NODE_TYPE_BROKER: Final = "broker"
NODE_TYPE_NAMESERVER: Final = "nameserver"  # the value RocketMQ 5's observability docs give the name server

# rocketmq_rpc_latency (RemotingMetricsConstant): every answered request, in ms
RPC_LATENCY: Final = "rocketmq_rpc_latency"
RPC_LATENCY_BUCKETS_MS: Final = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)
LABEL_PROTOCOL_TYPE: Final = "protocol_type"
LABEL_REQUEST_CODE: Final = "request_code"
LABEL_RESPONSE_CODE: Final = "response_code"
LABEL_RESULT: Final = "result"
PROTOCOL_TYPE_GRPC: Final = "grpc"
PROTOCOL_TYPE_REMOTING: Final = "remoting"
RESULT_SUCCESS: Final = "success"
RESULT_ONEWAY: Final = "oneway"
RESULT_FAILED: Final = "process_request_failed"

# label names shared by broker and client metrics
LABEL_TOPIC: Final = "topic"
LABEL_CONSUMER_GROUP: Final = "consumer_group"
LABEL_INVOCATION_STATUS: Final = "invocation_status"
INVOCATION_SUCCESS: Final = "success"
INVOCATION_FAILURE: Final = "failure"

# the clients' own histograms (ms), with the official clients' names, labels and buckets
LABEL_CLIENT_ID: Final = "client_id"
CLIENT_METER_NAME: Final = "org.apache.rocketmq.message"  # the official clients' OpenTelemetry meter
SEND_COST_TIME: Final = "rocketmq_send_cost_time"  # topic, client_id, invocation_status
DELIVERY_LATENCY: Final = "rocketmq_delivery_latency"  # topic, consumer_group, client_id
AWAIT_TIME: Final = "rocketmq_await_time"  # topic, consumer_group, client_id
PROCESS_TIME: Final = "rocketmq_process_time"  # topic, consumer_group, client_id, invocation_status
CONSUMER_CACHED_MESSAGES: Final = "rocketmq_consumer_cached_messages"  # gauge: topic, consumer_group, client_id
CONSUMER_CACHED_BYTES: Final = "rocketmq_consumer_cached_bytes"  # gauge: same labels
SEND_COST_TIME_BUCKETS_MS: Final = (1.0, 5.0, 10.0, 20.0, 50.0, 200.0, 500.0)
DELIVERY_LATENCY_BUCKETS_MS: Final = (1.0, 5.0, 10.0, 20.0, 50.0, 200.0, 500.0)
AWAIT_TIME_BUCKETS_MS: Final = (1.0, 5.0, 20.0, 100.0, 1000.0, 5_000.0, 10_000.0)
PROCESS_TIME_BUCKETS_MS: Final = (1.0, 5.0, 10.0, 100.0, 1000.0, 10_000.0, 60_000.0)
