"""Consumer settings: RocketMQ's ``DefaultMQPushConsumer`` fields as ``rmq.*`` attribute keys, with its defaults.

``consumer_attributes`` maps keyword sugar (``consume_thread_nums=8``) onto the keys; ``ConsumerConfig`` parses them.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Final

from oms.errors import OMSMessageFormatException, from_mq_error
from oms.keys import NonStandardKeys, OMSBuiltinKeys, attribute_key
from oms.keyvalue import KeyValue
from orbitmq.errors import Code, MQError
from orbitmq.limits import DEFAULT_OPERATION_TIMEOUT_MS
from orbitmq.validation import validate_group

MIB = 1024 * 1024


class MessageModel(StrEnum):
    """Who gets a message: one consumer of the group (CLUSTERING) or every consumer (BROADCASTING)."""

    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeMode(StrEnum):
    """How a CLUSTERING push consumer fetches: POP (receive/ack, the RocketMQ 5 push consumer) or PULL (offset-based
    pulls of allocated queues with broker-side offsets, the RocketMQ 4 ``DefaultMQPushConsumer``)."""

    POP = "POP"
    PULL = "PULL"

    @classmethod
    def parse(cls, value: str) -> ConsumeMode:
        text = value.strip().upper()
        if text == "OFFSET":  # the same thing, named after what it keeps
            return cls.PULL
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"{ConsumerKeys.CONSUME_MODE} must be POP or PULL, got {value!r}") from None


class ConsumeFromWhere(StrEnum):
    """Where a group starts on a queue it never consumed (an existing offset always wins)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"

    @classmethod
    def parse(cls, value: str) -> ConsumeFromWhere:
        """RocketMQ's names, or the short ``last``/``first``/``timestamp``."""
        text = value.strip().upper()
        short = {"LAST": cls.CONSUME_FROM_LAST_OFFSET, "FIRST": cls.CONSUME_FROM_FIRST_OFFSET}
        if text in short:
            return short[text]
        if text == "TIMESTAMP":
            return cls.CONSUME_FROM_TIMESTAMP
        try:
            return cls(text)
        except ValueError:
            raise ValueError(f"{ConsumerKeys.CONSUME_FROM_WHERE}: {value!r} is not last, first or timestamp") from None


class ConsumerKeys:
    """Attribute keys of consumers (RocketMQ ``DefaultMQPushConsumer`` field names, dotted)."""

    MESSAGE_MODEL: Final = "rmq.message.model"
    CONSUME_MODE: Final = "rmq.consume.mode"  # CLUSTERING: POP (default) or PULL (offset-based, queue leases)
    REBALANCE_LOCK_INTERVAL: Final = "rmq.rebalance.lock.interval"  # ms between lease renewals (orderly PULL)
    CONSUME_FROM_WHERE: Final = "rmq.consume.from.where"
    CONSUME_TIMESTAMP: Final = "rmq.consume.timestamp"  # yyyyMMddHHmmss (local time, as RocketMQ) or ms
    CONSUME_THREAD_NUMS: Final = "rmq.consume.thread.nums"
    CONSUME_MESSAGE_BATCH_MAX_SIZE: Final = "rmq.consume.message.batch.max.size"
    PULL_BATCH_SIZE: Final = "rmq.pull.batch.size"
    PULL_THRESHOLD_FOR_QUEUE: Final = "rmq.pull.threshold.for.queue"
    PULL_THRESHOLD_SIZE_FOR_QUEUE: Final = "rmq.pull.threshold.size.for.queue"  # MiB, as RocketMQ
    CONSUME_CONCURRENTLY_MAX_SPAN: Final = "rmq.consume.concurrently.max.span"
    MAX_RECONSUME_TIMES: Final = "rmq.max.reconsume.times"
    SUSPEND_CURRENT_QUEUE_TIME_MILLIS: Final = "rmq.suspend.current.queue.time.millis"
    PERSIST_CONSUMER_OFFSET_INTERVAL: Final = "rmq.persist.consumer.offset.interval"  # ms
    CONSUME_ORDERLY: Final = "rmq.consume.orderly"
    AUTO_ACK: Final = "rmq.auto.ack"
    OFFSET_STORE_DIR: Final = "rmq.offset.store.dir"
    INSTANCE_NAME: Final = "rmq.instance.name"
    RETRY_BACKOFF_MS: Final = "rmq.consume.retry.backoff.ms"  # comma-separated; overrides the broker's policy
    REBALANCE_INTERVAL: Final = "rmq.rebalance.interval"  # ms between QueryAssignment rounds
    LONG_POLLING_TIMEOUT: Final = "rmq.long.polling.timeout"  # ms; 0 = the broker's (receive) / 15 s (pull)
    INVISIBLE_TIME: Final = "rmq.invisible.time"  # ms; pull consumer receive()
    AWAIT_TERMINATION_MILLIS: Final = "rmq.await.termination.millis.when.shutdown"


DEFAULTS: Final[Mapping[str, Any]] = {
    ConsumerKeys.MESSAGE_MODEL: MessageModel.CLUSTERING,
    ConsumerKeys.CONSUME_FROM_WHERE: ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
    ConsumerKeys.CONSUME_THREAD_NUMS: 20,  # consumeThreadMin = consumeThreadMax = 20
    ConsumerKeys.CONSUME_MESSAGE_BATCH_MAX_SIZE: 1,
    ConsumerKeys.PULL_BATCH_SIZE: 32,
    ConsumerKeys.PULL_THRESHOLD_FOR_QUEUE: 1000,
    ConsumerKeys.PULL_THRESHOLD_SIZE_FOR_QUEUE: 100,
    ConsumerKeys.CONSUME_CONCURRENTLY_MAX_SPAN: 2000,
    ConsumerKeys.MAX_RECONSUME_TIMES: 16,
    ConsumerKeys.SUSPEND_CURRENT_QUEUE_TIME_MILLIS: 1000,
    ConsumerKeys.PERSIST_CONSUMER_OFFSET_INTERVAL: 5000,
    ConsumerKeys.REBALANCE_INTERVAL: 5000,  # the v5 clients' assignment scan period
    ConsumerKeys.REBALANCE_LOCK_INTERVAL: 20_000,  # rocketmq.client.rebalance.lockInterval
    ConsumerKeys.INVISIBLE_TIME: 30_000,
    ConsumerKeys.AWAIT_TERMINATION_MILLIS: 5000,
}
DEFAULT_CONSUME_TIMESTAMP_AGO = dt.timedelta(minutes=30)  # RocketMQ: half an hour before start
MAX_RECEIVE_BATCH = 32  # the broker caps a receive at 32 messages (maxPopBatchSize)
MAX_FRAMED_BODIES = 1024  # framed receive bodies a pull consumer keeps for reuse (queues x batch sizes x waits)
PULL_LONG_POLLING_MS = 15_000  # RocketMQ brokerSuspendMaxTimeMillis
# a subscribed topic the broker does not have yet is asked for again this soon, then twice as late each time (up
# to the rebalance interval): a consumer started before its topic gets its first messages promptly
TOPIC_PENDING_RETRY_S = 0.2

_ALIASES: Final[dict[str, str]] = {
    "orderly": ConsumerKeys.CONSUME_ORDERLY,
    "consume_mode": ConsumerKeys.CONSUME_MODE,
    "group": NonStandardKeys.CONSUMER_GROUP,
    "consumer_group": NonStandardKeys.CONSUMER_GROUP,
    "batch_size": ConsumerKeys.CONSUME_MESSAGE_BATCH_MAX_SIZE,
    "retry_backoff_ms": ConsumerKeys.RETRY_BACKOFF_MS,
    "await_termination_millis": ConsumerKeys.AWAIT_TERMINATION_MILLIS,
}


def _kwarg_keys() -> dict[str, str]:
    keys: dict[str, str] = {}
    for attr, value in vars(ConsumerKeys).items():
        if not attr.startswith("_") and isinstance(value, str):
            keys[value.removeprefix("rmq.").replace(".", "_")] = value
    keys.update(_ALIASES)
    return keys


CONSUMER_KWARG_KEYS: Final[dict[str, str]] = _kwarg_keys()


def consumer_key(name: str) -> str:
    """The attribute key of a keyword argument (``consume_thread_nums=`` -> ``rmq.consume.thread.nums``)."""
    key = CONSUMER_KWARG_KEYS.get(name)
    if key is not None:
        return key
    try:
        return attribute_key(name)
    except TypeError:
        known = ", ".join(sorted(CONSUMER_KWARG_KEYS))
        raise TypeError(f"unknown consumer keyword {name!r}; consumer keywords: {known}") from None


def _value(value: Any) -> Any:
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, dt.datetime):
        return int(value.timestamp() * 1000)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Sequence):
        return ",".join(str(v) for v in value)
    return value


def consumer_attributes(
    base: Mapping[str, Any] | None, attributes: Mapping[str, Any] | None, kwargs: Mapping[str, Any]
) -> KeyValue:
    """``base`` (the access point's attributes), then ``attributes``, then keyword sugar."""
    kv = KeyValue(base)
    kv.update(KeyValue({k: _value(v) for k, v in (attributes or {}).items()}))
    for name, value in kwargs.items():
        if value is not None:
            kv[consumer_key(name)] = _value(value)
    return kv


def parse_timestamp(value: str) -> int:
    """``yyyyMMddHHmmss`` (local time, RocketMQ's ``consumeTimestamp``) or ms since the epoch -> ms."""
    text = value.strip()
    if len(text) == 14 and text.isdigit():
        return int(dt.datetime.strptime(text, "%Y%m%d%H%M%S").timestamp() * 1000)
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{ConsumerKeys.CONSUME_TIMESTAMP}: {value!r} is neither yyyyMMddHHmmss nor ms") from None


def _ms_list(value: str | None) -> tuple[int, ...]:
    if not value:
        return ()
    try:
        out = tuple(int(float(v)) for v in value.split(",") if v.strip())
    except ValueError:
        raise ValueError(f"{ConsumerKeys.RETRY_BACKOFF_MS}: {value!r} is not a comma-separated list of ms") from None
    if any(v < 0 for v in out):
        raise ValueError(f"{ConsumerKeys.RETRY_BACKOFF_MS}: delays must not be negative")
    return out


@dataclass(frozen=True)
class ConsumerConfig:
    group: str
    message_model: MessageModel
    consume_mode: ConsumeMode
    lock_interval_s: float
    consume_from_where: ConsumeFromWhere
    consume_timestamp_ms: int
    consume_thread_nums: int
    consume_message_batch_max_size: int
    pull_batch_size: int
    pull_threshold_for_queue: int
    pull_threshold_size_for_queue: int  # bytes
    consume_concurrently_max_span: int
    max_reconsume_times: int
    suspend_ms: int
    persist_offset_interval_s: float
    orderly: bool
    auto_ack: bool
    offset_store_dir: Path
    instance_name: str
    retry_backoff_ms: tuple[int, ...]
    rebalance_interval_s: float
    long_polling_ms: int  # 0: the broker's value (receive) or PULL_LONG_POLLING_MS (PullBatch)
    invisible_ms: int
    await_termination_s: float
    timeout_s: float

    @classmethod
    def from_attributes(cls, kv: KeyValue, *, require_group: bool = True) -> ConsumerConfig:
        def num(key: str, minimum: int = 1) -> int:
            value = kv.get_int(key, int(DEFAULTS[key]))
            if value < minimum:
                raise ValueError(f"{key} must be >= {minimum}, got {value}")
            return value

        group = kv.get_string(NonStandardKeys.CONSUMER_GROUP) or kv.get_string(OMSBuiltinKeys.CONSUMER_ID) or ""
        if require_group and not group:
            raise OMSMessageFormatException(
                Code.ILLEGAL_CONSUMER_GROUP,
                f"a consumer needs a group: set {OMSBuiltinKeys.CONSUMER_ID} (consumer_id=...) or "
                f"{NonStandardKeys.CONSUMER_GROUP}",
            )
        if group:
            try:
                validate_group(group)
            except MQError as exc:
                raise from_mq_error(exc) from None
        try:
            model = MessageModel(
                (kv.get_string(ConsumerKeys.MESSAGE_MODEL) or MessageModel.CLUSTERING.value).strip().upper()
            )
        except ValueError:
            raise ValueError(
                f"{ConsumerKeys.MESSAGE_MODEL} must be CLUSTERING or BROADCASTING, "
                f"got {kv.get_string(ConsumerKeys.MESSAGE_MODEL)!r}"
            ) from None
        where = ConsumeFromWhere.parse(
            kv.get_string(ConsumerKeys.CONSUME_FROM_WHERE) or ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET.value
        )
        raw_ts = kv.get_string(ConsumerKeys.CONSUME_TIMESTAMP)
        if raw_ts:
            timestamp_ms = parse_timestamp(raw_ts)
        else:
            timestamp_ms = int((dt.datetime.now() - DEFAULT_CONSUME_TIMESTAMP_AGO).timestamp() * 1000)
        # RocketMQ's OMS key rmq.max.redelivery.times is the same setting under its older name
        if ConsumerKeys.MAX_RECONSUME_TIMES not in kv and NonStandardKeys.MAX_REDELIVERY_TIMES in kv:
            kv[ConsumerKeys.MAX_RECONSUME_TIMES] = kv[NonStandardKeys.MAX_REDELIVERY_TIMES]
        if ConsumerKeys.CONSUME_THREAD_NUMS not in kv and NonStandardKeys.MAX_CONSUME_THREAD_NUMS in kv:
            kv[ConsumerKeys.CONSUME_THREAD_NUMS] = kv[NonStandardKeys.MAX_CONSUME_THREAD_NUMS]
        if ConsumerKeys.PULL_BATCH_SIZE not in kv and NonStandardKeys.PULL_MESSAGE_BATCH_NUMS in kv:
            kv[ConsumerKeys.PULL_BATCH_SIZE] = kv[NonStandardKeys.PULL_MESSAGE_BATCH_NUMS]
        store_dir = kv.get_string(ConsumerKeys.OFFSET_STORE_DIR) or os.environ.get(
            "ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR", str(Path.home() / ".rocketmq_offsets")
        )
        timeout_ms = kv.get_int(OMSBuiltinKeys.OPERATION_TIMEOUT, DEFAULT_OPERATION_TIMEOUT_MS)
        if timeout_ms <= 0:
            raise ValueError(f"{OMSBuiltinKeys.OPERATION_TIMEOUT} must be positive, got {timeout_ms} ms")
        invisible_ms = num(ConsumerKeys.INVISIBLE_TIME)
        long_polling_ms = kv.get_int(ConsumerKeys.LONG_POLLING_TIMEOUT, 0)
        if long_polling_ms < 0:
            raise ValueError(f"{ConsumerKeys.LONG_POLLING_TIMEOUT} must not be negative")
        return cls(
            group=group,
            message_model=model,
            consume_mode=ConsumeMode.parse(kv.get_string(ConsumerKeys.CONSUME_MODE) or ConsumeMode.POP.value),
            lock_interval_s=num(ConsumerKeys.REBALANCE_LOCK_INTERVAL, 10) / 1000,
            consume_from_where=where,
            consume_timestamp_ms=timestamp_ms,
            consume_thread_nums=num(ConsumerKeys.CONSUME_THREAD_NUMS),
            consume_message_batch_max_size=num(ConsumerKeys.CONSUME_MESSAGE_BATCH_MAX_SIZE),
            pull_batch_size=num(ConsumerKeys.PULL_BATCH_SIZE),
            pull_threshold_for_queue=num(ConsumerKeys.PULL_THRESHOLD_FOR_QUEUE),
            pull_threshold_size_for_queue=num(ConsumerKeys.PULL_THRESHOLD_SIZE_FOR_QUEUE) * MIB,
            consume_concurrently_max_span=num(ConsumerKeys.CONSUME_CONCURRENTLY_MAX_SPAN),
            max_reconsume_times=num(ConsumerKeys.MAX_RECONSUME_TIMES, 0),
            suspend_ms=num(ConsumerKeys.SUSPEND_CURRENT_QUEUE_TIME_MILLIS, 0),
            persist_offset_interval_s=num(ConsumerKeys.PERSIST_CONSUMER_OFFSET_INTERVAL) / 1000,
            orderly=kv.get_boolean(ConsumerKeys.CONSUME_ORDERLY, False),
            auto_ack=kv.get_boolean(ConsumerKeys.AUTO_ACK, True),
            offset_store_dir=Path(store_dir).expanduser(),
            instance_name=kv.get_string(ConsumerKeys.INSTANCE_NAME) or "DEFAULT",
            retry_backoff_ms=_ms_list(kv.get_string(ConsumerKeys.RETRY_BACKOFF_MS)),
            rebalance_interval_s=num(ConsumerKeys.REBALANCE_INTERVAL, 100) / 1000,
            long_polling_ms=long_polling_ms,
            invisible_ms=invisible_ms,
            await_termination_s=num(ConsumerKeys.AWAIT_TERMINATION_MILLIS, 0) / 1000,
            timeout_s=timeout_ms / 1000,
        )
