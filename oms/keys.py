"""The OMS key strings: message sys-header names, access point/client attribute names and ``rmq.*`` keys.

The strings are exactly OMS Java 0.3's (and RocketMQ's ``NonStandardKeys``) so code and configs port as-is.
"""

from __future__ import annotations

from typing import Final

from orbitmq.message_const import PROPERTY_CLIENT_DELAY_LEVEL


class BuiltinKeys:
    """Names of message sys headers (OMS ``Message.BuiltinKeys``)."""

    MESSAGE_ID: Final = "MESSAGE_ID"
    DESTINATION: Final = "DESTINATION"
    RECEIPT_HANDLE: Final = "RECEIPT_HANDLE"
    BORN_TIMESTAMP: Final = "BORN_TIMESTAMP"
    BORN_HOST: Final = "BORN_HOST"
    STORE_TIMESTAMP: Final = "STORE_TIMESTAMP"
    STORE_HOST: Final = "STORE_HOST"
    START_TIME: Final = "START_TIME"  # absolute delivery time, ms since the epoch
    STOP_TIME: Final = "STOP_TIME"
    TIMEOUT: Final = "TIMEOUT"
    PRIORITY: Final = "PRIORITY"
    RELIABILITY: Final = "RELIABILITY"
    SEARCH_KEYS: Final = "SEARCH_KEYS"  # comma-separated, indexed by the broker
    SCHEDULE_EXPRESSION: Final = "SCHEDULE_EXPRESSION"
    SHARDING_KEY: Final = "SHARDING_KEY"
    SHARDING_PARTITION: Final = "SHARDING_PARTITION"
    TRACE_ID: Final = "TRACE_ID"
    STREAM_KEY: Final = "STREAM_KEY"  # same key, same queue (the message group)
    REDELIVERED_NUMBER: Final = "REDELIVERED_NUMBER"
    REDELIVERED_REASON: Final = "REDELIVERED_REASON"
    TRANSACTION_ID: Final = "TRANSACTION_ID"
    QUEUE_ID: Final = "QUEUE_ID"
    QUEUE_OFFSET: Final = "QUEUE_OFFSET"


class OMSBuiltinKeys:
    """Names of access point and client attributes (OMS ``OMSBuiltinKeys``)."""

    DRIVER_IMPL: Final = "DRIVER_IMPL"
    ACCESS_POINTS: Final = "ACCESS_POINTS"
    ACCOUNT_ID: Final = "ACCOUNT_ID"
    ACCOUNT_KEY: Final = "ACCOUNT_KEY"
    ACCOUNT_SECRET: Final = "ACCOUNT_SECRET"
    REGION: Final = "REGION"
    PRODUCER_ID: Final = "PRODUCER_ID"
    CONSUMER_ID: Final = "CONSUMER_ID"
    OPERATION_TIMEOUT: Final = "OPERATION_TIMEOUT"  # ms
    ROUTING_SOURCE: Final = "ROUTING_SOURCE"
    ROUTING_DESTINATION: Final = "ROUTING_DESTINATION"
    ROUTING_EXPRESSION: Final = "ROUTING_EXPRESSION"
    TIMEOUT: Final = "TIMEOUT"  # ms, per call (send attributes)


class NonStandardKeys:
    """RocketMQ's ``rmq.*`` keys: client settings, plus message keys for tag, keys, delay level and sharding."""

    CONSUMER_GROUP: Final = "rmq.consumer.group"
    PRODUCER_GROUP: Final = "rmq.producer.group"
    MAX_REDELIVERY_TIMES: Final = "rmq.max.redelivery.times"
    MESSAGE_CONSUME_TIMEOUT: Final = "rmq.message.consume.timeout"
    MAX_CONSUME_THREAD_NUMS: Final = "rmq.max.consume.thread.nums"
    MIN_CONSUME_THREAD_NUMS: Final = "rmq.min.consume.thread.nums"
    MESSAGE_CONSUME_STATUS: Final = "rmq.message.consume.status"
    MESSAGE_DESTINATION: Final = "rmq.message.destination"
    PULL_MESSAGE_BATCH_NUMS: Final = "rmq.pull.message.batch.nums"
    PULL_MESSAGE_CACHE_CAPACITY: Final = "rmq.pull.message.cache.capacity"
    # producer settings (RocketMQ DefaultMQProducer field names, dotted)
    RETRY_TIMES_WHEN_SEND_FAILED: Final = "rmq.retry.times.when.send.failed"
    SEND_LATENCY_FAULT_ENABLE: Final = "rmq.send.latency.fault.enable"
    COMPRESS_MSG_BODY_OVER_HOWMUCH: Final = "rmq.compress.msg.body.over.howmuch"
    MAX_MESSAGE_SIZE: Final = "rmq.max.message.size"
    CALLBACK_THREAD_NUMS: Final = "rmq.callback.thread.nums"
    # TLS towards every server of the access point (docs/security.md); kwargs tls_enable=, tls_trust_cert_path=, ...
    TLS_ENABLE: Final = "rmq.tls.enable"
    TLS_TRUST_CERT_PATH: Final = "rmq.tls.trust.cert.path"  # PEM CA bundle; empty = the system roots
    TLS_CERT_PATH: Final = "rmq.tls.cert.path"  # PEM client certificate, for servers that require one
    TLS_KEY_PATH: Final = "rmq.tls.key.path"
    # unary calls to OrbitMQ brokers over the frame transport (docs/oms.md); "false" keeps every call on gRPC
    FRAMES_ENABLE: Final = "rmq.frames.enable"
    # message keys (sys or user headers)
    TAGS: Final = "rmq.tags"
    KEYS: Final = "rmq.keys"
    DELAY_TIME_LEVEL: Final = PROPERTY_CLIENT_DELAY_LEVEL  # the broker reads it too (orbitmq/message_const.py)
    SHARDING_KEY: Final = "rmq.sharding.key"


def _snake(key: str) -> str:
    """``rmq.retry.times.when.send.failed`` -> ``retry_times_when_send_failed``; ``PRODUCER_ID`` -> ``producer_id``."""
    name = key.lower().replace(".", "_")
    return name[len("rmq_") :] if name.startswith("rmq_") else name


def _attribute_keys() -> dict[str, str]:
    keys: dict[str, str] = {}
    for cls in (OMSBuiltinKeys, NonStandardKeys):
        for attr, value in vars(cls).items():
            if not attr.startswith("_") and isinstance(value, str):
                keys[_snake(value)] = value
    # short spellings people use in Python
    keys["access_key"] = OMSBuiltinKeys.ACCOUNT_KEY
    keys["secret_key"] = OMSBuiltinKeys.ACCOUNT_SECRET
    keys["namespace"] = OMSBuiltinKeys.REGION
    keys["group"] = NonStandardKeys.PRODUCER_GROUP
    return keys


KWARG_KEYS: Final[dict[str, str]] = _attribute_keys()


def attribute_key(name: str) -> str:
    """The attribute key for a keyword argument (``operation_timeout=`` -> ``OPERATION_TIMEOUT``)."""
    try:
        return KWARG_KEYS[name]
    except KeyError:
        known = ", ".join(sorted(KWARG_KEYS))
        raise TypeError(f"unknown attribute keyword {name!r}; known: {known}") from None
