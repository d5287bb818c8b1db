"""RocketMQ 5's metric names, label names and histogram buckets (BrokerMetricsConstant, DefaultStoreMetricsConstant,
RemotingMetricsConstant): dashboards and alerts written for RocketMQ read OrbitMQ's unchanged."""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class ExporterType(StrEnum):
    """``metricsExporterType``."""

    DISABLE = "DISABLE"
    PROM = "PROM"
    OTLP_GRPC = "OTLP_GRPC"
    LOG = "LOG"


# counters
MESSAGES_IN_TOTAL: Final = "rocketmq_messages_in_total"
MESSAGES_OUT_TOTAL: Final = "rocketmq_messages_out_total"
THROUGHPUT_IN_TOTAL: Final = "rocketmq_throughput_in_total"
THROUGHPUT_OUT_TOTAL: Final = "rocketmq_throughput_out_total"
SEND_TO_DLQ_MESSAGES_TOTAL: Final = "rocketmq_send_to_dlq_messages_total"
COMMIT_MESSAGES_TOTAL: Final = "rocketmq_commit_messages_total"
ROLLBACK_MESSAGES_TOTAL: Final = "rocketmq_rollback_messages_total"
# histograms
MESSAGE_SIZE: Final = "rocketmq_message_size"
RPC_LATENCY: Final = "rocketmq_rpc_latency"
# gauges (computed when scraped)
BROKER_PERMISSION: Final = "rocketmq_broker_permission"
TOPIC_NUMBER: Final = "rocketmq_topic_number"
CONSUMER_GROUP_NUMBER: Final = "rocketmq_consumer_group_number"
PRODUCER_CONNECTIONS: Final = "rocketmq_producer_connections"
CONSUMER_CONNECTIONS: Final = "rocketmq_consumer_connections"
CONSUMER_LAG_MESSAGES: Final = "rocketmq_consumer_lag_messages"
CONSUMER_LAG_LATENCY: Final = "rocketmq_consumer_lag_latency"
CONSUMER_INFLIGHT_MESSAGES: Final = "rocketmq_consumer_inflight_messages"
CONSUMER_READY_MESSAGES: Final = "rocketmq_consumer_ready_messages"
HALF_MESSAGES: Final = "rocketmq_half_messages"
TIMING_MESSAGES: Final = "rocketmq_timing_messages"
STORAGE_SIZE: Final = "rocketmq_storage_size"
STORAGE_FLUSH_BEHIND_BYTES: Final = "rocketmq_storage_flush_behind_bytes"
STORAGE_DISPATCH_BEHIND_BYTES: Final = "rocketmq_storage_dispatch_behind_bytes"
STORAGE_MESSAGE_RESERVE_TIME: Final = "rocketmq_storage_message_reserve_time"

# labels
LABEL_CLUSTER_NAME: Final = "cluster"
LABEL_NODE_TYPE: Final = "node_type"
LABEL_NODE_ID: Final = "node_id"
NODE_TYPE_BROKER: Final = "broker"
LABEL_TOPIC: Final = "topic"
LABEL_CONSUMER_GROUP: Final = "consumer_group"
LABEL_MESSAGE_TYPE: Final = "message_type"
LABEL_IS_RETRY: Final = "is_retry"
LABEL_IS_SYSTEM: Final = "is_system"
LABEL_LANGUAGE: Final = "language"
LABEL_VERSION: Final = "version"
LABEL_CONSUME_MODE: Final = "consume_mode"
LABEL_PROTOCOL_TYPE: Final = "protocol_type"
LABEL_REQUEST_CODE: Final = "request_code"
LABEL_RESPONSE_CODE: Final = "response_code"
LABEL_RESULT: Final = "result"
LABEL_STORAGE_TYPE: Final = "storage_type"
LABEL_STORAGE_MEDIUM: Final = "storage_medium"
PROTOCOL_TYPE_GRPC: Final = "grpc"
RESULT_SUCCESS: Final = "success"
RESULT_FAILED: Final = "process_request_failed"
DEFAULT_STORAGE_TYPE: Final = "local"
DEFAULT_STORAGE_MEDIUM: Final = "disk"

# histogram buckets, as BrokerMetricsManager / RemotingMetricsManager register them
MESSAGE_SIZE_BUCKETS: Final = (1024.0, 4 * 1024.0, 512 * 1024.0, 1024 * 1024.0, 2 * 1024 * 1024.0, 4 * 1024 * 1024.0)
RPC_LATENCY_BUCKETS_MS: Final = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)

DEFAULT_PROM_EXPORTER_PORT: Final = 5557  # RocketMQ's metricsPromExporterPort
