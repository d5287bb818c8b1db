"""The log appender's options (one dataclass for all three adapters), checked when the handler is configured.

Every bad value raises ``AppenderConfigError`` naming the option and its limit, so dictConfig fails at start-up.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from orbitmq.errors import MQError
from orbitmq.limits import MAX_BATCH_SIZE, MAX_SEND_BATCH_MESSAGES
from orbitmq.validation import validate_group, validate_tag, validate_topic

NAMESRV_ENV = "NAMESRV_ADDR"
DEFAULT_PRODUCER_GROUP = "log_appender"  # RocketMQ's Java appenders use rocketmq_appender; ours is Python's
# Records from these loggers never reach the broker through the appender: the client itself logs there, and a
# record sent because a send was logged is how shippers loop (logback-kafka-appender #36, watchtower #93).
DEFAULT_EXCLUDED_LOGGERS = ("oms", "grpc", "plugins.logappender")
MAX_KEYS_PER_MESSAGE = 32  # the keys of packed records share the 16 KiB properties budget with tag and properties
# A batch of more records than this packs (or than records_per_message, if smaller): below it, one record per
# message keeps a low rate simple for consumers; above it, one record per message would cost the client 50-75 us
# of CPU each. Messages then hold up to records_per_message records.
PACK_OVER = 64


class OverflowPolicy(StrEnum):
    """What ``offer`` does when the in-memory queue is full."""

    DROP_NEW = "drop_new"  # refuse the new record (logback AsyncAppender neverBlock)
    DROP_OLDEST = "drop_oldest"  # evict the oldest queued record (fluent-logger's queue_circular)
    BLOCK = "block"  # wait up to block_timeout for room, then drop the new record


class AppenderConfigError(ValueError):
    """A log appender option is invalid; ``option`` names it."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(f"log appender option {option!r}: {message}")
        self.option = option


def _positive(option: str, value: float, *, allow_zero: bool = False, limit: float | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AppenderConfigError(option, f"must be a number, got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise AppenderConfigError(option, f"must be {'>= 0' if allow_zero else '> 0'}, got {value}")
    if limit is not None and value > limit:
        raise AppenderConfigError(option, f"must be at most {limit}, got {value}")


@dataclass(frozen=True)
class AppenderConfig:
    """Options of a ``LogShipper``; keyword arguments of ``RocketMQHandler``, the loguru sink and the structlog
    factory. Times are in seconds, sizes in bytes."""

    topic: str
    namesrv_addr: str | None = None  # host:port[;host:port]; None: $NAMESRV_ADDR
    namespace: str = ""
    tag: str | None = None  # None: the record's level name
    access_key: str | None = None
    secret_key: str | None = None
    producer_group: str = DEFAULT_PRODUCER_GROUP
    service: str | None = None  # a "service" field and property on every record
    static_fields: Mapping[str, Any] = field(default_factory=dict)  # added to every JSON body
    key_fields: tuple[str, ...] = ("request_id", "trace_id")  # record fields that become message keys
    ordered: bool = True  # one message group per process: its records stay in order (FIFO/MIXED topic)
    queue_size: int = 10_000
    overflow: OverflowPolicy = OverflowPolicy.DROP_NEW
    block_timeout: float = 0.1
    batch_max_records: int = 8192  # records taken from the queue per send
    linger: float = 0.01  # how long a first record waits for company before it is sent
    # records per packed message when a backlog builds up (1: never pack): the client's cost per message (about
    # 100 us of CPU over the sender and the client's loop) then weighs 0.4 us per record, not 1.6 as at 64
    records_per_message: int = 256
    max_message_bytes: int = 256 * 1024  # a packed body stops growing here
    compress: bool = False  # zlib bodies over 4 KiB: less disk and network, more CPU in the application
    send_timeout: float = 3.0
    retry_backoff: float = 0.1  # first wait after a failed send; doubles up to retry_backoff_max
    retry_backoff_max: float = 5.0
    spool_dir: Path | None = None
    spool_max_bytes: int = 256 * 1024 * 1024
    spool_max_age: float = 7 * 24 * 3600.0
    flush_timeout: float = 5.0  # default deadline of flush() and of the flush at exit
    close_timeout: float = 5.0
    warn_interval: float = 60.0  # at most one stderr warning about drops per interval
    excluded_loggers: tuple[str, ...] = DEFAULT_EXCLUDED_LOGGERS
    host: str = field(default_factory=socket.gethostname)

    @classmethod
    def build(cls, topic: str, **options: Any) -> AppenderConfig:
        """The config from keyword options as dictConfig passes them (strings for paths, lists for tuples)."""
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(options) - known)
        if unknown:
            raise AppenderConfigError(unknown[0], f"unknown option; known options: {', '.join(sorted(known))}")
        values = {k: v for k, v in options.items() if v is not None or k in ("tag", "service", "spool_dir")}
        if "overflow" in values:
            values["overflow"] = _policy(values["overflow"])
        for name in ("key_fields", "excluded_loggers"):
            if name in values:
                values[name] = _names(name, values[name])
        if values.get("spool_dir") is not None:
            values["spool_dir"] = Path(values["spool_dir"])
        cfg = cls(topic=topic, **values)
        cfg.validate()
        return cfg

    @property
    def endpoints(self) -> str:
        addr = self.namesrv_addr or os.environ.get(NAMESRV_ENV, "")
        return addr.strip()

    @property
    def pack_over(self) -> int:
        """A batch of more records than this is packed (``PACK_OVER``, or ``records_per_message`` if smaller)."""
        return min(PACK_OVER, self.records_per_message)

    @property
    def url(self) -> str:
        return f"oms:rocketmq://{self.endpoints}/{self.namespace}"

    def validate(self) -> None:
        try:
            validate_topic(self.topic)
        except MQError as exc:
            raise AppenderConfigError("topic", exc.message) from None
        if not self.endpoints:
            raise AppenderConfigError("namesrv_addr", f"not given and ${NAMESRV_ENV} is not set")
        if self.tag is not None:
            try:
                validate_tag(self.tag)
            except MQError as exc:
                raise AppenderConfigError("tag", exc.message) from None
        try:
            validate_group(self.producer_group)
        except MQError as exc:
            raise AppenderConfigError("producer_group", exc.message) from None
        if bool(self.access_key) != bool(self.secret_key):
            raise AppenderConfigError("access_key", "give both access_key and secret_key, or neither")
        if not isinstance(self.overflow, OverflowPolicy):
            raise AppenderConfigError("overflow", f"must be an OverflowPolicy, got {self.overflow!r}")
        _positive("queue_size", self.queue_size)
        _positive("block_timeout", self.block_timeout, allow_zero=True)
        _positive("batch_max_records", self.batch_max_records)
        _positive("linger", self.linger, allow_zero=True, limit=60)
        _positive("records_per_message", self.records_per_message, limit=MAX_SEND_BATCH_MESSAGES)
        _positive("max_message_bytes", self.max_message_bytes, limit=MAX_BATCH_SIZE)
        _positive("send_timeout", self.send_timeout)
        _positive("retry_backoff", self.retry_backoff)
        _positive("retry_backoff_max", self.retry_backoff_max)
        if self.retry_backoff_max < self.retry_backoff:
            raise AppenderConfigError("retry_backoff_max", f"must be >= retry_backoff ({self.retry_backoff})")
        _positive("spool_max_bytes", self.spool_max_bytes)
        _positive("spool_max_age", self.spool_max_age)
        _positive("flush_timeout", self.flush_timeout, allow_zero=True)
        _positive("close_timeout", self.close_timeout, allow_zero=True)
        _positive("warn_interval", self.warn_interval, allow_zero=True)
        for name in ("queue_size", "batch_max_records", "records_per_message", "max_message_bytes", "spool_max_bytes"):
            if not isinstance(getattr(self, name), int):
                raise AppenderConfigError(name, f"must be an integer, got {getattr(self, name)!r}")


def _policy(value: object) -> OverflowPolicy:
    if isinstance(value, OverflowPolicy):
        return value
    try:
        return OverflowPolicy(str(value).strip().lower())
    except ValueError:
        allowed = ", ".join(p.value for p in OverflowPolicy)
        raise AppenderConfigError("overflow", f"unknown policy {value!r}; use one of {allowed}") from None


def _names(option: str, value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        items: Iterable[object] = [v for v in value.replace(",", " ").split() if v]
    elif isinstance(value, Iterable):
        items = value
    else:
        raise AppenderConfigError(option, f"must be a list of names, got {value!r}")
    names = tuple(str(v) for v in items)
    if any(not n.strip() for n in names):
        raise AppenderConfigError(option, "names must not be blank")
    return names
