"""RocketMQ 5's broker metric names, label names and histogram buckets (BrokerMetricsConstant,
DefaultStoreMetricsConstant): dashboards and alerts written for RocketMQ read OrbitMQ's unchanged. What the name
server and the clients share with the broker (common labels, ``rocketmq_rpc_latency``, the exporter types) is in
``orbitmq/metrics/constants.py`` and re-exported here so broker code reads one module."""

from __future__ import annotations

from typing import Final

from orbitmq.metrics.constants import (  # noqa: F401  (re-exported)
    DEFAULT_PROM_EXPORTER_PORT,
    INVOCATION_FAILURE,
    INVOCATION_SUCCESS,
    LABEL_CLUSTER_NAME,
    LABEL_CONSUMER_GROUP,
    LABEL_INVOCATION_STATUS,
    LABEL_NODE_ID,
    LABEL_NODE_TYPE,
    LABEL_PROTOCOL_TYPE,
    LABEL_REQUEST_CODE,
    LABEL_RESPONSE_CODE,
    LABEL_RESULT,
    LABEL_TOPIC,
    NODE_TYPE_BROKER,
    PROTOCOL_TYPE_GRPC,
    PROTOCOL_TYPE_REMOTING,
    RESULT_FAILED,
    RESULT_SUCCESS,
    RPC_LATENCY,
    RPC_LATENCY_BUCKETS_MS,
    ExporterType,
)

OPEN_TELEMETRY_METER_NAME: Final = "broker-meter"


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
FINISH_MESSAGE_LATENCY: Final = "rocketmq_finish_message_latency"
TOPIC_CREATE_EXECUTION_TIME: Final = "rocketmq_topic_create_execution_time"
CONSUMER_GROUP_CREATE_EXECUTION_TIME: Final = "rocketmq_consumer_group_create_execution_time"
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
LABEL_MESSAGE_TYPE: Final = "message_type"
LABEL_IS_RETRY: Final = "is_retry"
LABEL_IS_SYSTEM: Final = "is_system"
LABEL_LANGUAGE: Final = "language"
LABEL_VERSION: Final = "version"
LABEL_CONSUME_MODE: Final = "consume_mode"
LABEL_STORAGE_TYPE: Final = "storage_type"
LABEL_STORAGE_MEDIUM: Final = "storage_medium"
DEFAULT_STORAGE_TYPE: Final = "local"
DEFAULT_STORAGE_MEDIUM: Final = "disk"

# histogram buckets, as BrokerMetricsManager registers them
MESSAGE_SIZE_BUCKETS: Final = (1024.0, 4 * 1024.0, 512 * 1024.0, 1024 * 1024.0, 2 * 1024 * 1024.0, 4 * 1024 * 1024.0)
FINISH_MESSAGE_LATENCY_BUCKETS_S: Final = (5.0, 60.0, 600.0, 3600.0, 12 * 3600.0, 24 * 3600.0)  # commit latency
CREATE_EXECUTION_TIME_BUCKETS_MS: Final = (10.0, 100.0, 1000.0, 3000.0, 5000.0)  # topic and group creation
