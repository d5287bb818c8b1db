"""Consumers of the oms client: push (clustering/broadcasting, concurrent/orderly) and pull (receive/ack + queues).

Created by ``MessagingAccessPoint.create_push_consumer`` / ``create_pull_consumer``; see docs/oms.md "Consumers".
"""

from __future__ import annotations

from oms.consumer.columns import MessageColumns
from oms.consumer.config import ConsumeFromWhere, ConsumeMode, ConsumerConfig, ConsumerKeys, MessageModel
from oms.consumer.frames import RecordFrames
from oms.consumer.listener import (
    ConsumeConcurrentlyStatus,
    ConsumeContext,
    ConsumeOrderlyStatus,
)
from oms.consumer.pull import PendingPull, PullConsumer, PullResult, PullShape, PullStatus
from oms.consumer.push import PushConsumer
from oms.consumer.selector import ExpressionType, MessageSelector

__all__ = [
    "ConsumeConcurrentlyStatus",
    "ConsumeContext",
    "ConsumeFromWhere",
    "ConsumeMode",
    "ConsumeOrderlyStatus",
    "ConsumerConfig",
    "ConsumerKeys",
    "ExpressionType",
    "MessageColumns",
    "MessageModel",
    "MessageSelector",
    "PendingPull",
    "PullConsumer",
    "PullResult",
    "PullShape",
    "PullStatus",
    "PushConsumer",
    "RecordFrames",
]
