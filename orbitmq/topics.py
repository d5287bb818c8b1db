"""RocketMQ's system topic and group names and the helpers that build and recognise them (its ``TopicValidator`` and
``MixAll``): the one place broker, name server, plugins and ``oms`` read them from."""

from __future__ import annotations

from typing import Final

RETRY_GROUP_TOPIC_PREFIX: Final = "%RETRY%"  # %RETRY%<group>: a consumer group's failed messages, redelivered
DLQ_GROUP_TOPIC_PREFIX: Final = "%DLQ%"  # %DLQ%<group>: what failed its group's last attempt
AUTO_CREATE_TOPIC_KEY_TOPIC: Final = "TBW102"  # the template a topic created on first send copies
SCHEDULE_TOPIC: Final = "SCHEDULE_TOPIC_XXXX"  # delay messages, queue = delay level - 1
TRANS_HALF_TOPIC: Final = "RMQ_SYS_TRANS_HALF_TOPIC"  # transactional messages before EndTransaction
TRANS_OP_HALF_TOPIC: Final = "RMQ_SYS_TRANS_OP_HALF_TOPIC"  # the commit/rollback record of each half message

SYSTEM_TOPIC_PREFIX: Final = "rmq_sys_"
SYSTEM_TOPICS: frozenset[str] = frozenset(
    {
        AUTO_CREATE_TOPIC_KEY_TOPIC,
        SCHEDULE_TOPIC,
        "BenchmarkTest",
        TRANS_HALF_TOPIC,
        "RMQ_SYS_TRACE_TOPIC",
        TRANS_OP_HALF_TOPIC,
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "rmq_sys_wheel_timer",
        "rmq_sys_REVIVE_LOG",
    }
)
SYSTEM_GROUP_PREFIX: Final = "CID_RMQ_SYS_"
SYSTEM_GROUPS: frozenset[str] = frozenset(
    {
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "__MONITOR_CONSUMER",
        "CLIENT_INNER_PRODUCER",
        "SELF_TEST_P_GROUP",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
        "CID_ONSAPI_PULL",
    }
)


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX)


def is_dlq_topic(topic: str) -> bool:
    return topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def is_group_topic(topic: str) -> bool:
    """``%RETRY%<group>`` or ``%DLQ%<group>``: a topic the broker creates for a consumer group."""
    return topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX))


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def is_system_group(group: str) -> bool:
    return group in SYSTEM_GROUPS or group.startswith(SYSTEM_GROUP_PREFIX)


def group_of_topic(topic: str) -> str | None:
    """The group a ``%RETRY%<group>`` / ``%DLQ%<group>`` topic belongs to, else None."""
    for prefix in (RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX):
        if topic.startswith(prefix) and len(topic) > len(prefix):
            return topic[len(prefix) :]
    return None
