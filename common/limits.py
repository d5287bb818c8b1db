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
