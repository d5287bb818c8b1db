"""Administration for the ``oms`` client: ``ResourceManager`` (topics, groups, offsets, queries, dead letters).

Get one with ``access_point.resource_manager()``; the ``mqadmin`` command (``oms.mqadmin``) is built on it.
"""

from __future__ import annotations

from oms.admin.manager import ResourceManager
from oms.admin.models import (
    BrokerData,
    BrokerInfo,
    ConsumerProgress,
    GroupInfo,
    MessageView,
    OffsetReset,
    QueueData,
    QueueProgress,
    QueueStatus,
    ResendResult,
    TopicInfo,
    TopicRoute,
    TopicStatus,
)

__all__ = [
    "BrokerData",
    "BrokerInfo",
    "ConsumerProgress",
    "GroupInfo",
    "MessageView",
    "OffsetReset",
    "QueueData",
    "QueueProgress",
    "QueueStatus",
    "ResendResult",
    "ResourceManager",
    "TopicInfo",
    "TopicRoute",
    "TopicStatus",
]
