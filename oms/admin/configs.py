"""Topic and subscription-group configs: the changes a call asks for, RocketMQ's defaults, the merge into the config
a broker is sent (checked before any broker is touched), and ``TOPICS``/``GROUPS``, what the core's one path needs."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from google.protobuf.message import Message

from oms.admin import models as m
from oms.admin.models import Broker
from oms.errors import OMSMessageFormatException, from_mq_error
from orbitmq.errors import Code, MQError
from orbitmq.proto import admin_pb2, admin_pb2_grpc
from orbitmq.route import QUEUE_TYPE_ATTRIBUTE, CQType, TopicMessageType
from orbitmq.validation import validate_group, validate_topic

T = TypeVar("T")
R = TypeVar("R")
InfoT = TypeVar("InfoT", m.TopicInfo, m.GroupInfo)
ChangesT = TypeVar("ChangesT", "TopicChanges", "GroupChanges")
ConfigT = TypeVar("ConfigT", admin_pb2.TopicConfig, admin_pb2.GroupConfig)

# RocketMQ's mqadmin defaults (UpdateTopicSubCommand, SubscriptionGroupConfig)
DEFAULT_QUEUE_NUMS = 8
DEFAULT_PERM = 6
DEFAULT_RETRY_MAX_TIMES = 16
DEFAULT_RETRY_QUEUE_NUMS = 1
MAX_QUEUE_NUMS = 1024
VALID_PERMS = (2, 4, 6)  # -W-, R--, RW-
MESSAGE_TYPE_ATTRIBUTE = "message.type"  # RocketMQ 5 spells the topic type as this attribute


@dataclass(frozen=True)
class TopicChanges:
    """Fields to set on a topic; None keeps the current value (or RocketMQ's default for a new topic)."""

    read_queue_nums: int | None = None
    write_queue_nums: int | None = None
    perm: int | None = None
    message_type: str | None = None
    order: bool | None = None
    attributes: Mapping[str, str | None] | None = None  # a None value removes the attribute


@dataclass(frozen=True)
class GroupChanges:
    """Fields to set on a subscription group; None keeps the current value (or the default for a new group)."""

    consume_enable: bool | None = None
    retry_max_times: int | None = None
    orderly: bool | None = None
    broadcast: bool | None = None
    retry_queue_nums: int | None = None
    allocate_strategy: str | None = None
    allocate_options: Mapping[str, str] | None = None


def validated(rule: Callable[..., None], *args: Any, **kwargs: Any) -> None:
    """Run a shared ``orbitmq.validation`` rule; its MQError becomes the OMS exception of the same code."""
    try:
        rule(*args, **kwargs)
    except MQError as exc:
        raise from_mq_error(exc) from None


def bad_request(message: str) -> OMSMessageFormatException:
    return OMSMessageFormatException(Code.BAD_REQUEST, message)


def topic_info(pb: admin_pb2.TopicConfig, broker_name: str) -> m.TopicInfo:
    return m.TopicInfo(
        topic=pb.topic_name,
        broker_name=broker_name,
        read_queue_nums=pb.read_queue_nums,
        write_queue_nums=pb.write_queue_nums,
        perm=pb.perm,
        message_type=pb.message_type or TopicMessageType.NORMAL.value,
        order=pb.order,
        attributes=dict(pb.attributes),
    )


def group_info(pb: admin_pb2.GroupConfig, broker_name: str) -> m.GroupInfo:
    return m.GroupInfo(
        group=pb.group_name,
        broker_name=broker_name,
        consume_enable=pb.consume_enable,
        retry_max_times=pb.retry_max_times,
        orderly=pb.consume_message_orderly,
        broadcast=pb.consume_broadcast_enable,
        retry_queue_nums=pb.retry_queue_nums,
        allocate_strategy=pb.allocate_strategy,
        allocate_options=dict(pb.allocate_options),
    )


def pick(value: T | None, current: T | None, default: T) -> T:
    """The given value, else the current one, else the default."""
    if value is not None:
        return value
    return current if current is not None else default


def merge_topic(topic: str, base: m.TopicInfo | None, changes: TopicChanges) -> admin_pb2.TopicConfig:
    """The config to write: ``changes`` over ``base`` (or over RocketMQ's defaults), checked before it is sent."""
    attributes = dict(base.attributes) if base else {}
    message_type = changes.message_type
    for raw_key, value in (changes.attributes or {}).items():
        key = raw_key[1:] if raw_key[:1] in ("+", "-") else raw_key  # RocketMQ's +key=value / -key
        if raw_key.startswith("-"):
            value = None
        if key == MESSAGE_TYPE_ATTRIBUTE:  # RocketMQ 5's spelling of the type
            message_type = message_type or value
        elif key == QUEUE_TYPE_ATTRIBUTE:
            attributes[key] = _queue_type(topic, base, value)
        elif value is None:
            attributes.pop(key, None)
        else:
            attributes[key] = value

    read = pick(changes.read_queue_nums, base.read_queue_nums if base else None, DEFAULT_QUEUE_NUMS)
    write = pick(changes.write_queue_nums, base.write_queue_nums if base else None, DEFAULT_QUEUE_NUMS)
    perm = pick(changes.perm, base.perm if base else None, DEFAULT_PERM)
    kind = pick(message_type, base.message_type if base else None, TopicMessageType.NORMAL.value)
    order = pick(changes.order, base.order if base else None, False)
    for name, nums in (("read_queue_nums", read), ("write_queue_nums", write)):
        if not 0 < nums <= MAX_QUEUE_NUMS:
            raise bad_request(f"{name} must be in 1..{MAX_QUEUE_NUMS}, got {nums}")
    if perm not in VALID_PERMS:
        raise bad_request(f"perm must be 2 (write), 4 (read) or 6 (read-write), got {perm}")
    try:
        parsed = TopicMessageType.parse(kind)
    except ValueError:
        known = ", ".join(t.value for t in TopicMessageType if t is not TopicMessageType.UNSPECIFIED)
        raise bad_request(f"unknown message type {kind!r}; use one of {known}") from None
    return admin_pb2.TopicConfig(
        topic_name=topic,
        read_queue_nums=read,
        write_queue_nums=write,
        perm=perm,
        message_type=parsed.value,
        order=order,
        attributes=attributes,
    )


def _queue_type(topic: str, base: m.TopicInfo | None, value: str | None) -> str:
    """The canonical ``queue.type`` to send; unknown values, removal and a change of an existing topic's type are
    refused here, before any broker is touched (the broker checks the same)."""
    if value is None:
        raise bad_request(f"attribute {QUEUE_TYPE_ATTRIBUTE} cannot be removed: it is fixed when the topic is created")
    try:
        requested = CQType.parse(value)
    except ValueError as exc:
        raise bad_request(str(exc)) from None
    if base is not None:
        current = CQType.parse(base.attributes.get(QUEUE_TYPE_ATTRIBUTE))
        if requested is not current:
            raise bad_request(
                f"attribute {QUEUE_TYPE_ATTRIBUTE} of topic {topic!r} on {base.broker_name} is {current.value} and "
                f"cannot change to {requested.value} (it is fixed when the topic is created)"
            )
    return requested.value


def merge_group(group: str, base: m.GroupInfo | None, changes: GroupChanges) -> admin_pb2.GroupConfig:
    retry_max = pick(changes.retry_max_times, base.retry_max_times if base else None, DEFAULT_RETRY_MAX_TIMES)
    retry_queues = pick(changes.retry_queue_nums, base.retry_queue_nums if base else None, DEFAULT_RETRY_QUEUE_NUMS)
    if retry_max < 0:
        raise bad_request(f"retry_max_times must be >= 0, got {retry_max}")
    if retry_queues < 1:
        raise bad_request(f"retry_queue_nums must be >= 1, got {retry_queues}")
    options = changes.allocate_options
    return admin_pb2.GroupConfig(
        group_name=group,
        consume_enable=pick(changes.consume_enable, base.consume_enable if base else None, True),
        retry_max_times=retry_max,
        consume_message_orderly=pick(changes.orderly, base.orderly if base else None, False),
        retry_queue_nums=retry_queues,
        consume_broadcast_enable=pick(changes.broadcast, base.broadcast if base else None, False),
        allocate_strategy=pick(changes.allocate_strategy, base.allocate_strategy if base else None, ""),
        allocate_options=dict(options) if options is not None else dict(base.allocate_options if base else {}),
    )


class AdminCalls(Protocol):
    """What a config kind uses of ``oms.admin.core.AdminCore`` (which imports this module): one checked call to
    a broker's admin service."""

    def admin_stub(self, addr: str) -> admin_pb2_grpc.AdminStub: ...

    async def admin(self, call: Callable[..., Awaitable[R]], request: Message, what: str) -> R: ...


class ConfigKind(ABC, Generic[InfoT, ChangesT, ConfigT]):
    """What differs between a topic and a subscription group on the brokers: their names' rule, the merge and the
    three admin calls. ``AdminCore.configs``/``upsert``/``delete`` are the one path both take."""

    noun: ClassVar[str]  # as messages name it
    not_found: ClassVar[Code]  # a broker's answer when it has no such name

    @abstractmethod
    def validate(self, name: str, *, allow_system: bool = False) -> None: ...

    @abstractmethod
    def name_of(self, info: InfoT) -> str: ...

    @abstractmethod
    def merge(self, name: str, base: InfoT | None, changes: ChangesT) -> ConfigT: ...

    @abstractmethod
    async def read(self, core: AdminCalls, b: Broker) -> list[InfoT]:
        """Every config of this kind on broker ``b``."""

    @abstractmethod
    async def write(self, core: AdminCalls, b: Broker, config: ConfigT) -> InfoT:
        """Create or replace one config on ``b``; returns it as the broker stored it."""

    @abstractmethod
    async def remove(self, core: AdminCalls, b: Broker, name: str) -> None: ...


class TopicConfigs(ConfigKind[m.TopicInfo, TopicChanges, admin_pb2.TopicConfig]):
    noun = "topic"
    not_found = Code.TOPIC_NOT_FOUND

    def validate(self, name: str, *, allow_system: bool = False) -> None:
        validated(validate_topic, name, allow_system=allow_system)

    def name_of(self, info: m.TopicInfo) -> str:
        return info.topic

    def merge(self, name: str, base: m.TopicInfo | None, changes: TopicChanges) -> admin_pb2.TopicConfig:
        return merge_topic(name, base, changes)

    async def read(self, core: AdminCalls, b: Broker) -> list[m.TopicInfo]:
        stub = core.admin_stub(b.addr)
        response = await core.admin(stub.ListTopics, admin_pb2.ListTopicsRequest(), f"ListTopics on {b.name}")
        return [topic_info(t, b.name) for t in response.topics]

    async def write(self, core: AdminCalls, b: Broker, config: admin_pb2.TopicConfig) -> m.TopicInfo:
        request = admin_pb2.CreateOrUpdateTopicRequest(config=config)
        stub = core.admin_stub(b.addr)
        response = await core.admin(stub.CreateOrUpdateTopic, request, f"CreateOrUpdateTopic on {b.name}")
        return topic_info(response.config, b.name)

    async def remove(self, core: AdminCalls, b: Broker, name: str) -> None:
        stub = core.admin_stub(b.addr)
        await core.admin(stub.DeleteTopic, admin_pb2.DeleteTopicRequest(topic=name), f"DeleteTopic on {b.name}")


class GroupConfigs(ConfigKind[m.GroupInfo, GroupChanges, admin_pb2.GroupConfig]):
    noun = "group"
    not_found = Code.CONSUMER_GROUP_NOT_FOUND

    def validate(self, name: str, *, allow_system: bool = False) -> None:
        validated(validate_group, name, allow_system=allow_system)

    def name_of(self, info: m.GroupInfo) -> str:
        return info.group

    def merge(self, name: str, base: m.GroupInfo | None, changes: GroupChanges) -> admin_pb2.GroupConfig:
        return merge_group(name, base, changes)

    async def read(self, core: AdminCalls, b: Broker) -> list[m.GroupInfo]:
        stub = core.admin_stub(b.addr)
        response = await core.admin(stub.ListGroups, admin_pb2.ListGroupsRequest(), f"ListGroups on {b.name}")
        return [group_info(g, b.name) for g in response.groups]

    async def write(self, core: AdminCalls, b: Broker, config: admin_pb2.GroupConfig) -> m.GroupInfo:
        request = admin_pb2.CreateOrUpdateGroupRequest(config=config)
        stub = core.admin_stub(b.addr)
        response = await core.admin(stub.CreateOrUpdateGroup, request, f"CreateOrUpdateGroup on {b.name}")
        return group_info(response.config, b.name)

    async def remove(self, core: AdminCalls, b: Broker, name: str) -> None:
        stub = core.admin_stub(b.addr)
        await core.admin(stub.DeleteGroup, admin_pb2.DeleteGroupRequest(group=name), f"DeleteGroup on {b.name}")


TOPICS = TopicConfigs()
GROUPS = GroupConfigs()
