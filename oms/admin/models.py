"""What the resource manager returns: frozen dataclasses for brokers, topics, routes, groups, offsets, messages.

Each row names the broker it came from (one topic or group lives on several brokers); mappings stay out of hashes.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from orbitmq import message_const as mc
from orbitmq.route import PermName
from orbitmq.topics import is_group_topic


def perm_string(perm: int) -> str:
    """RocketMQ's ``PermName.perm2String``: ``RW-`` for 6, ``R--`` for 4, ``-W-`` for 2."""
    return PermName.to_string(perm)


@dataclass(frozen=True)
class BrokerInfo:
    """One broker process of a cluster (``broker_id`` 0 is the master of its broker group)."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    runtime: Mapping[str, str] = field(default_factory=dict, hash=False)  # BrokerRuntimeInfo, when asked for

    @property
    def is_master(self) -> bool:
        return self.broker_id == 0


@dataclass(frozen=True)
class TopicInfo:
    """A topic's configuration on one broker."""

    topic: str
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: str
    order: bool = False
    attributes: Mapping[str, str] = field(default_factory=dict, hash=False)

    @property
    def perm_string(self) -> str:
        return perm_string(self.perm)


@dataclass(frozen=True)
class QueueData:
    """A topic's queues on one broker group, as the route lists them."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: str


@dataclass(frozen=True)
class BrokerData:
    """A broker group in a route: broker id -> address (0 = master)."""

    cluster: str
    broker_name: str
    addrs: Mapping[int, str] = field(hash=False)

    @property
    def master_addr(self) -> str | None:
        return self.addrs.get(0)


@dataclass(frozen=True)
class TopicRoute:
    """Where a topic lives (RocketMQ's ``TopicRouteData``)."""

    topic: str
    queue_datas: tuple[QueueData, ...]
    broker_datas: tuple[BrokerData, ...]


@dataclass(frozen=True)
class QueueStatus:
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int
    last_update_timestamp_ms: int  # store time of the queue's last message, 0 when empty


@dataclass(frozen=True)
class TopicStatus:
    topic: str
    queues: tuple[QueueStatus, ...]

    @property
    def total_messages(self) -> int:
        """Messages still stored (max - min offsets over every queue)."""
        return sum(q.max_offset - q.min_offset for q in self.queues)


@dataclass(frozen=True)
class GroupInfo:
    """A subscription group's configuration on one broker."""

    group: str
    broker_name: str
    consume_enable: bool
    retry_max_times: int
    orderly: bool
    broadcast: bool
    retry_queue_nums: int
    allocate_strategy: str  # "" = the broker's default strategy
    allocate_options: Mapping[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class QueueProgress:
    topic: str
    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int  # -1 when the group never committed this queue
    lag: int


@dataclass(frozen=True)
class ConsumerProgress:
    group: str
    queues: tuple[QueueProgress, ...]

    @property
    def total_lag(self) -> int:
        return sum(q.lag for q in self.queues)

    @property
    def broker_offset_total(self) -> int:
        return sum(q.broker_offset for q in self.queues)

    @property
    def consumer_offset_total(self) -> int:
        return sum(max(0, q.consumer_offset) for q in self.queues)


@dataclass(frozen=True)
class OffsetReset:
    """A queue's committed offset after ``reset_offset_by_time``."""

    topic: str
    broker_name: str
    queue_id: int
    offset: int


@dataclass(frozen=True)
class MessageView:
    """A stored message as the broker's admin service shows it (raw properties included)."""

    topic: str
    broker_name: str
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    msg_id: str  # the offset message id (store host + commitlog offset)
    unique_id: str  # the producer's message id (UNIQ_KEY)
    body: bytes  # as stored: a body sent compressed is still compressed here
    properties: Mapping[str, str] = field(hash=False)
    born_timestamp_ms: int
    store_timestamp_ms: int
    born_host: str
    store_host: str
    reconsume_times: int
    store_size: int

    @property
    def tags(self) -> str | None:
        return self.properties.get(mc.PROPERTY_TAGS)

    @property
    def keys(self) -> tuple[str, ...]:
        raw = self.properties.get(mc.PROPERTY_KEYS, "")
        return tuple(k for k in raw.split(mc.KEY_SEPARATOR) if k)

    @property
    def original_topic(self) -> str | None:
        """For a dead letter or a retry: the topic the message was first sent to (None if not recorded)."""
        for name in (mc.PROPERTY_RETRY_TOPIC, mc.PROPERTY_DLQ_ORIGIN_TOPIC, mc.PROPERTY_REAL_TOPIC):
            value = self.properties.get(name, "")
            # a message dead-lettered from its retry topic names %RETRY%group in DLQ_ORIGIN_TOPIC: skip that
            if value and not is_group_topic(value):
                return value
        return None


@dataclass(frozen=True)
class ResendResult:
    """A dead letter sent again to its original topic; the ``%DLQ%`` copy stays where it was."""

    message_id: str
    topic: str
    broker_name: str
    queue_offset: int
    dead_letter: MessageView


def to_jsonable(value: Any) -> Any:
    """Dataclasses, tuples and bytes as plain JSON values (bytes as UTF-8 text when they decode, else base64)."""
    if hasattr(value, "__dataclass_fields__"):
        out = {k: to_jsonable(v) for k, v in asdict(value).items()}
        if isinstance(value, MessageView):
            out["body"], out["body_encoding"] = _body_json(value.body)
            out["tags"], out["keys"] = value.tags, list(value.keys)
        if isinstance(value, ResendResult):
            out["dead_letter"] = to_jsonable(value.dead_letter)
        for name in ("total_lag", "broker_offset_total", "consumer_offset_total", "total_messages", "is_master"):
            if hasattr(type(value), name):
                out[name] = getattr(value, name)
        return out
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return _body_json(value)[0]
    return value


def _body_json(body: bytes) -> tuple[str, str]:
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


@dataclass(frozen=True)
class ClientConnection:
    """A producer or consumer a broker knows from its heartbeats and declared settings (gRPC clients included)."""

    broker_name: str
    client_id: str
    client_type: str  # PRODUCER, PUSH_CONSUMER, SIMPLE_CONSUMER, ...
    address: str
    language: str
    version: str
    group: str
    subscriptions: Mapping[str, str] = field(default_factory=dict, hash=False)  # topic -> filter expression
    topics: tuple[str, ...] = ()  # producers' declared topics
    last_heartbeat_ms_ago: int = 0
    connected: bool = False  # a Telemetry stream is open
    settings_json: str = ""


@dataclass(frozen=True)
class OffsetChange:
    """An offset committed for a group by cloneGroupOffset / skipAccumulatedMessage."""

    topic: str
    broker_name: str
    queue_id: int
    offset: int


@dataclass(frozen=True)
class TopicGroupStats:
    """statsAll's row: a topic's traffic and, with ``group``, one consumer group's (summed over brokers)."""

    topic: str
    group: str  # "" for the topic's own row (no consumer)
    in_tps: float
    out_tps: float
    in_24h: int
    out_24h: int
    accumulation: int


@dataclass(frozen=True)
class AclAccount:
    """An ACL account of a broker, as the ACL plugin shows it: never its secret."""

    broker_name: str
    access_key: str
    admin: bool
    white_remote_address: str
    default_topic_perm: str
    default_group_perm: str
    topic_perms: Mapping[str, str] = field(default_factory=dict, hash=False)
    group_perms: Mapping[str, str] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Broker:
    """A broker the resource manager talks to: its cluster, broker name and gRPC address."""

    cluster: str
    name: str
    addr: str
