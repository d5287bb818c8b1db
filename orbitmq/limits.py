"""Limits and defaults shared by servers and clients: the one place each number lives."""

from __future__ import annotations

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

# Message limits (RocketMQ/proxy defaults).
MAX_MESSAGE_BODY_SIZE = 4 * MIB
MAX_BATCH_SIZE = 4 * MIB
MAX_TOPIC_LENGTH = 127
MAX_GROUP_LENGTH = 120
MAX_PROPERTY_COUNT = 128
MAX_PROPERTIES_SIZE = 16 * KIB
MAX_MESSAGE_GROUP_LENGTH = 64

# Ports.
DEFAULT_NAMESRV_PORT = 9876
DEFAULT_BROKER_GRPC_PORT = 8081

# v2 client settings defaults (reference proxy values, protocol-v2 §4.3).
DEFAULT_LONG_POLLING_TIMEOUT_S = 20
DEFAULT_RECEIVE_BATCH_SIZE = 32
DEFAULT_MAX_DELIVERY_ATTEMPTS = 17  # retryMaxTimes 16 + 1
DEFAULT_OPERATION_TIMEOUT_MS = 5000  # OMS OPERATION_TIMEOUT default of every client call (RocketMQ's OMS adapter)
PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1000
PRODUCER_BACKOFF_MULTIPLIER = 2.0

# Name server / registration.
BROKER_EXPIRED_SECONDS = 120.0
BROKER_REGISTER_INTERVAL_S = 30.0
REGISTER_TIMEOUT_S = 3.0
SESSION_RETRY_DELAY_S = 1.0  # re-register this soon after a name server ends a live session
CLIENT_EXPIRED_SECONDS = 120.0

# Broker defaults (RocketMQ BrokerConfig / proxy defaults).
DEFAULT_TOPIC_QUEUE_NUMS = 4
MAX_DELAY_TIME_MS = 24 * 3600 * 1000
# the longest orphaned_transaction_recovery_duration a producer may ask for (the Java proxy's one hour)
MAX_TRANSACTION_RECOVERY_S = 3600
MAX_SEND_BATCH_MESSAGES = 1024
MAX_PULL_BATCH_SIZE = 1024
MAX_LONG_POLLING_MS = 20_000
DEFAULT_CONSUMER_RETRY_MAX_TIMES = 16

# Remoting protocol (orbitmq/remoting): RocketMQ's NettyDecoder refuses frames over 16 MiB
MAX_REMOTING_FRAME_BYTES = 16 * MIB
