"""The resource manager's async core: name server and broker admin calls, fan-out over brokers, dead-letter resend.

Runs on the access point's loop; ``oms.admin.manager.ResourceManager`` is the blocking facade over it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
import grpc.aio
from rocketmq.grpc_protocol import definition_pb2, service_pb2

from oms.admin import models as m
from oms.client.core import Runtime
from oms.client.endpoints import Endpoint
from oms.client.headers import HeaderBuilder
from oms.client.identity import new_client_id
from oms.client.routes import route_from_response
from oms.client.rpc import CHANNEL_OPTIONS, SUCCESS_CODES, Rpc
from oms.errors import (
    OMSException,
    OMSMessageFormatException,
    OMSResourceNotExistException,
    OMSRuntimeException,
    OMSSecurityException,
    exception_for,
    from_mq_error,
    from_rpc_error,
)
from oms.producer.result import STATUS_OF_CODE
from oms.url import parse_hosts
from orbitmq.errors import Code, MQError
from orbitmq.msgid import OFFSET_MSG_ID_LENGTH, decode_offset_message_id
from orbitmq.proto import admin_pb2, admin_pb2_grpc
from orbitmq.proto import namesrv_pb2 as ns_pb
from orbitmq.proto import namesrv_pb2_grpc as ns_grpc
from orbitmq.route import QUEUE_TYPE_ATTRIBUTE, CQType, TopicMessageType
from orbitmq.topics import dlq_topic
from orbitmq.validation import validate_group, validate_topic

log = logging.getLogger("oms.admin")

T = TypeVar("T")

# RocketMQ's mqadmin defaults (UpdateTopicSubCommand, SubscriptionGroupConfig)
DEFAULT_QUEUE_NUMS = 8
DEFAULT_PERM = 6
DEFAULT_RETRY_MAX_TIMES = 16
DEFAULT_RETRY_QUEUE_NUMS = 1
MAX_QUEUE_NUMS = 1024
MAX_QUERY_NUM = 64  # the broker's cap per query
VALID_PERMS = (2, 4, 6)  # -W-, R--, RW-
MESSAGE_TYPE_ATTRIBUTE = "message.type"  # RocketMQ 5 spells the topic type as this attribute


@dataclass(frozen=True)
class Broker:
    """A broker the resource manager talks to: its cluster, broker name and gRPC address."""

    cluster: str
    name: str
    addr: str


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


def admin_error(code: int, message: str) -> OMSException:
    """The OMS exception for an admin status; MESSAGE_NOT_FOUND is a missing resource like TOPIC_NOT_FOUND."""
    if code == Code.MESSAGE_NOT_FOUND:
        return OMSResourceNotExistException(code, message)
    return exception_for(code, message)


def check(code: int, message: str, what: str) -> None:
    if code in SUCCESS_CODES:
        return
    if code == 0:
        raise OMSRuntimeException(Code.INTERNAL_ERROR, f"{what}: the response carries no status")
    raise admin_error(code, f"{what}: {message or code}")


def validated(rule: Callable[..., None], *args: Any, **kwargs: Any) -> None:
    """Run a shared ``orbitmq.validation`` rule; its MQError becomes the OMS exception of the same code."""
    try:
        rule(*args, **kwargs)
    except MQError as exc:
        raise from_mq_error(exc) from None


def bad_request(message: str) -> OMSMessageFormatException:
    return OMSMessageFormatException(Code.BAD_REQUEST, message)


def _code_of(exc: BaseException) -> int:
    return int(exc.code) if isinstance(exc, OMSException) else -1


def _addr_target(addr: str) -> str:
    return Endpoint.of(parse_hosts(addr, addr)).target


def looks_like_addr(text: str) -> bool:
    return ":" in text


def _message_view(pb: Any, broker_name: str) -> m.MessageView:
    return m.MessageView(
        topic=pb.topic,
        broker_name=broker_name,
        queue_id=pb.queue_id,
        queue_offset=pb.queue_offset,
        commitlog_offset=pb.commitlog_offset,
        msg_id=pb.msg_id,
        unique_id=pb.unique_id,
        body=bytes(pb.body),
        properties=dict(pb.properties),
        born_timestamp_ms=pb.born_timestamp_ms,
        store_timestamp_ms=pb.store_timestamp_ms,
        born_host=pb.born_host,
        store_host=pb.store_host,
        reconsume_times=pb.reconsume_times,
        store_size=pb.store_size,
    )


def _topic_info(pb: Any, broker_name: str) -> m.TopicInfo:
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


def _group_info(pb: Any, broker_name: str) -> m.GroupInfo:
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


class AdminCore:
    """Loop-bound. Talks to the access point (name servers, or brokers directly) and to brokers' admin service."""

    def __init__(self, runtime: Runtime, timeout_s: float) -> None:
        self.runtime = runtime
        self.timeout_s = timeout_s
        self.headers = HeaderBuilder(new_client_id(), runtime.namespace, runtime.credentials)
        self.rpc = Rpc(runtime.pool, self.headers)
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._uses_namesrv: bool | None = None  # learnt on the first call

    # -- transport ----------------------------------------------------------------------------------------------

    def _channel(self, target: str) -> grpc.aio.Channel:
        channel = self._channels.get(target)
        if channel is None:
            channel = self._channels[target] = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        return channel

    async def close(self) -> None:
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close(0.5)

    async def _admin(self, addr: str, method: str, request: Any, what: str) -> Any:
        stub = admin_pb2_grpc.AdminStub(self._channel(_addr_target(addr)))
        try:
            response = await getattr(stub, method)(request, metadata=self.headers.build(), timeout=self.timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, what) from None
        check(response.status.code, response.status.message, what)
        return response

    async def _namesrv(self, method: str, request: Any) -> Any:
        stub = ns_grpc.NameServerStub(self._channel(self.runtime.access_point.target))
        what = f"{method} to name server {self.runtime.access_point}"
        try:
            response = await getattr(stub, method)(request, metadata=self.headers.build(), timeout=self.timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, what) from None
        check(response.code, response.message, what)
        return response

    async def uses_namesrv(self) -> bool:
        """True when the access point is a name server; False when it lists brokers (they lack that service)."""
        if self._uses_namesrv is None:
            try:
                await self._namesrv("GetBrokerClusterInfo", ns_pb.GetClusterInfoRequest())
                self._uses_namesrv = True
            except OMSException as exc:
                if exc.code != Code.NOT_IMPLEMENTED:
                    raise
                self._uses_namesrv = False
        return self._uses_namesrv

    # -- brokers ------------------------------------------------------------------------------------------------

    async def runtime_info(self, addr: str) -> dict[str, str]:
        response = await self._admin(
            addr, "BrokerRuntimeInfo", admin_pb2.BrokerRuntimeInfoRequest(), f"BrokerRuntimeInfo on {addr}"
        )
        return dict(response.info)

    async def brokers(self) -> list[m.BrokerInfo]:
        """Every broker: from the name server, or each address of the access point asked who it is."""
        if await self.uses_namesrv():
            info = await self._namesrv("GetBrokerClusterInfo", ns_pb.GetClusterInfoRequest())
            out = []
            for cluster, names in info.cluster_addr_table.items():
                for name in names.broker_names:
                    data = info.broker_addr_table.get(name)
                    for broker_id, addr in data.broker_addrs.items() if data else ():
                        out.append(m.BrokerInfo(cluster, name, int(broker_id), addr))
            return sorted(out, key=lambda b: (b.cluster, b.broker_name, b.broker_id))
        addrs = [f"{h}:{p}" for h, p in self.runtime.access_point.addresses]
        infos = await asyncio.gather(*(self.runtime_info(a) for a in addrs))
        # the address we reach it at, not the one it advertises (brokerIP1 may not be routable from here)
        return [
            m.BrokerInfo(i.get("clusterName", ""), i.get("brokerName", a), int(i.get("brokerId", "0")), a, i)
            for a, i in zip(addrs, infos, strict=True)
        ]

    async def masters(self) -> list[Broker]:
        return [Broker(b.cluster, b.broker_name, b.addr) for b in await self.brokers() if b.is_master]

    async def targets(self, cluster: str | None, broker: str | None) -> list[Broker]:
        """The master brokers a write goes to: one broker (name or address), a cluster's, or all of them."""
        if broker:
            if looks_like_addr(broker):
                for b in await self.brokers():
                    if b.addr == broker:
                        return [Broker(b.cluster, b.broker_name, b.addr)]
                # not registered under that address (or no name server): ask the broker itself
                info = await self.runtime_info(broker)
                return [Broker(info.get("clusterName", ""), info.get("brokerName", broker), broker)]
            masters = await self.masters()
            hits = [b for b in masters if b.name == broker]
            if not hits:
                known = ", ".join(sorted({b.name for b in masters})) or "none"
                raise OMSResourceNotExistException(Code.NOT_FOUND, f"no broker named {broker!r}; known: {known}")
            return hits
        masters = await self.masters()
        if cluster:
            hits = [b for b in masters if b.cluster == cluster]
            if not hits:
                known = ", ".join(sorted({b.cluster for b in masters})) or "none"
                raise OMSResourceNotExistException(Code.NOT_FOUND, f"no broker in cluster {cluster!r}; known: {known}")
            return hits
        if not masters:
            raise OMSResourceNotExistException(Code.NOT_FOUND, "no master broker is registered")
        return masters

    # -- fan-out ------------------------------------------------------------------------------------------------

    async def each(
        self, brokers: Sequence[Broker], fn: Callable[[Broker], Awaitable[T]]
    ) -> list[tuple[Broker, T | OMSException]]:
        results = await asyncio.gather(*(fn(b) for b in brokers), return_exceptions=True)
        out: list[tuple[Broker, T | OMSException]] = []
        for b, result in zip(brokers, results, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, OMSException):
                raise result  # a bug or a cancellation, not an answer from that broker
            out.append((b, result))
        return out

    @staticmethod
    def all_ok(results: list[tuple[Broker, T | OMSException]], action: str) -> list[tuple[Broker, T]]:
        """Every broker's result; one failure raises, naming the brokers where the action was already done."""
        ok = [(b, r) for b, r in results if not isinstance(r, OMSException)]
        failed = [(b, r) for b, r in results if isinstance(r, OMSException)]
        if failed:
            b, exc = failed[0]
            done = f"; done on {', '.join(x.name for x, _ in ok)}" if ok else ""
            others = f" (and {len(failed) - 1} more broker(s))" if len(failed) > 1 else ""
            raise admin_error(int(exc.code), f"{action} failed on broker {b.name}{others}: {exc.message}{done}")
        return ok

    @staticmethod
    def some_ok(
        results: list[tuple[Broker, T | OMSException]], action: str, absent: Iterable[int]
    ) -> list[tuple[Broker, T]]:
        """Answers of the brokers that have the resource; ``absent`` codes are skipped unless every broker said so."""
        skip = set(absent)
        ok = [(b, r) for b, r in results if not isinstance(r, OMSException)]
        errors = [(b, r) for b, r in results if isinstance(r, OMSException)]
        real = [(b, e) for b, e in errors if _code_of(e) not in skip]
        if real:
            b, exc = real[0]
            raise admin_error(int(exc.code), f"{action} failed on broker {b.name}: {exc.message}")
        if not ok and errors:
            b, exc = errors[0]
            raise admin_error(int(exc.code), exc.message)
        return ok

    # -- topics -------------------------------------------------------------------------------------------------

    async def topic_configs(self, brokers: Sequence[Broker], topic: str | None = None) -> list[m.TopicInfo]:
        async def one(b: Broker) -> list[m.TopicInfo]:
            response = await self._admin(b.addr, "ListTopics", admin_pb2.ListTopicsRequest(), f"ListTopics on {b.name}")
            return [_topic_info(t, b.name) for t in response.topics if topic is None or t.topic_name == topic]

        rows = [t for _, ts in self.all_ok(await self.each(brokers, one), "list topics") for t in ts]
        return sorted(rows, key=lambda t: (t.topic, t.broker_name))

    async def upsert_topic(
        self, topic: str, changes: TopicChanges, cluster: str | None, broker: str | None, *, merge: bool, create: bool
    ) -> list[m.TopicInfo]:
        validated(validate_topic, topic)
        merge_topic(topic, None, changes)  # bad values fail before any broker is touched
        targets = await self.targets(cluster, broker)
        current: dict[str, m.TopicInfo] = {}
        if merge:
            current = {t.broker_name: t for t in await self.topic_configs(targets, topic)}

        # every broker's config is checked (an immutable queue.type...) before the first one is written
        configs = {b.name: merge_topic(topic, current.get(b.name), changes) for b in targets}

        async def one(b: Broker) -> m.TopicInfo:
            base = current.get(b.name)
            if merge and base is None and not create:
                raise OMSResourceNotExistException(
                    Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist on broker {b.name}"
                )
            request = admin_pb2.CreateOrUpdateTopicRequest(config=configs[b.name])
            response = await self._admin(b.addr, "CreateOrUpdateTopic", request, f"CreateOrUpdateTopic on {b.name}")
            return _topic_info(response.config, b.name)

        done = self.all_ok(await self.each(targets, one), f"update topic {topic!r}")
        return sorted((t for _, t in done), key=lambda t: t.broker_name)

    async def delete_topic(self, topic: str, cluster: str | None, broker: str | None) -> list[str]:
        validated(validate_topic, topic, allow_system=True)
        targets = await self.targets(cluster, broker)

        async def one(b: Broker) -> str:
            what = f"DeleteTopic on {b.name}"
            await self._admin(b.addr, "DeleteTopic", admin_pb2.DeleteTopicRequest(topic=topic), what)
            return b.name

        done = self.some_ok(await self.each(targets, one), f"delete topic {topic!r}", [Code.TOPIC_NOT_FOUND])
        return sorted(name for _, name in done)

    async def list_topics(self, cluster: str | None) -> list[str]:
        if cluster is None and await self.uses_namesrv():
            response = await self._namesrv("GetAllTopicList", ns_pb.GetAllTopicListRequest())
            return sorted(set(response.topics))
        return sorted({t.topic for t in await self.topic_configs(await self.targets(cluster, None))})

    async def route(self, topic: str) -> m.TopicRoute:
        validated(validate_topic, topic, allow_system=True)
        if await self.uses_namesrv():
            r = await self._namesrv("GetRouteInfoByTopic", ns_pb.GetRouteInfoRequest(topic=topic))
            queue_datas = tuple(
                m.QueueData(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.message_type or "NORMAL")
                for q in r.queue_datas
            )
            broker_datas = tuple(
                m.BrokerData(b.cluster, b.broker_name, {int(k): v for k, v in b.broker_addrs.items()})
                for b in r.broker_datas
            )
        else:
            brokers = await self.brokers()
            configs = await self.topic_configs([Broker(b.cluster, b.broker_name, b.addr) for b in brokers], topic)
            if not configs:
                raise OMSResourceNotExistException(Code.TOPIC_NOT_FOUND, f"no broker has topic {topic!r}")
            on = {t.broker_name for t in configs}
            queue_datas = tuple(
                m.QueueData(t.broker_name, t.read_queue_nums, t.write_queue_nums, t.perm, t.message_type)
                for t in configs
            )
            broker_datas = tuple(
                m.BrokerData(b.cluster, b.broker_name, {b.broker_id: b.addr}) for b in brokers if b.broker_name in on
            )
        return m.TopicRoute(
            topic,
            tuple(sorted(queue_datas, key=lambda q: q.broker_name)),
            tuple(sorted(broker_datas, key=lambda b: b.broker_name)),
        )

    async def topic_brokers(self, topic: str, *, fallback: bool = False) -> list[Broker]:
        """The masters serving ``topic``; with ``fallback``, every master when no route exists (internal topics
        such as ``%DLQ%group`` reach the name server only at the broker's next registration)."""
        try:
            route = await self.route(topic)
        except OMSResourceNotExistException:
            if not fallback:
                raise
            return await self.masters()
        on = {q.broker_name for q in route.queue_datas}
        out = [
            Broker(b.cluster, b.broker_name, b.master_addr)
            for b in route.broker_datas
            if b.broker_name in on and b.master_addr
        ]
        if not out:
            raise OMSResourceNotExistException(Code.TOPIC_NOT_FOUND, f"topic {topic!r} has no master broker")
        return out

    async def topic_status(self, topic: str) -> m.TopicStatus:
        brokers = await self.topic_brokers(topic)

        async def one(b: Broker) -> list[m.QueueStatus]:
            request = admin_pb2.TopicStatusRequest(topic=topic)
            response = await self._admin(b.addr, "TopicStatus", request, f"TopicStatus on {b.name}")
            return [
                m.QueueStatus(b.name, q.queue_id, q.min_offset, q.max_offset, q.last_update_timestamp_ms)
                for q in response.queues
            ]

        done = self.some_ok(await self.each(brokers, one), f"status of {topic!r}", [Code.TOPIC_NOT_FOUND])
        rows = sorted((q for _, qs in done for q in qs), key=lambda q: (q.broker_name, q.queue_id))
        return m.TopicStatus(topic, tuple(rows))

    # -- groups -------------------------------------------------------------------------------------------------

    async def group_configs(self, brokers: Sequence[Broker], group: str | None = None) -> list[m.GroupInfo]:
        async def one(b: Broker) -> list[m.GroupInfo]:
            response = await self._admin(b.addr, "ListGroups", admin_pb2.ListGroupsRequest(), f"ListGroups on {b.name}")
            return [_group_info(g, b.name) for g in response.groups if group is None or g.group_name == group]

        rows = [g for _, gs in self.all_ok(await self.each(brokers, one), "list groups") for g in gs]
        return sorted(rows, key=lambda g: (g.group, g.broker_name))

    async def upsert_group(
        self, group: str, changes: GroupChanges, cluster: str | None, broker: str | None, *, merge: bool, create: bool
    ) -> list[m.GroupInfo]:
        validated(validate_group, group)
        merge_group(group, None, changes)
        targets = await self.targets(cluster, broker)
        current: dict[str, m.GroupInfo] = {}
        if merge:
            current = {g.broker_name: g for g in await self.group_configs(targets, group)}

        async def one(b: Broker) -> m.GroupInfo:
            base = current.get(b.name)
            if merge and base is None and not create:
                raise OMSResourceNotExistException(
                    Code.CONSUMER_GROUP_NOT_FOUND, f"group {group!r} does not exist on broker {b.name}"
                )
            request = admin_pb2.CreateOrUpdateGroupRequest(config=merge_group(group, base, changes))
            response = await self._admin(b.addr, "CreateOrUpdateGroup", request, f"CreateOrUpdateGroup on {b.name}")
            return _group_info(response.config, b.name)

        done = self.all_ok(await self.each(targets, one), f"update group {group!r}")
        return sorted((g for _, g in done), key=lambda g: g.broker_name)

    async def delete_group(self, group: str, cluster: str | None, broker: str | None) -> list[str]:
        validated(validate_group, group, allow_system=True)
        targets = await self.targets(cluster, broker)

        async def one(b: Broker) -> str:
            what = f"DeleteGroup on {b.name}"
            await self._admin(b.addr, "DeleteGroup", admin_pb2.DeleteGroupRequest(group=group), what)
            return b.name

        done = self.some_ok(await self.each(targets, one), f"delete group {group!r}", [Code.CONSUMER_GROUP_NOT_FOUND])
        return sorted(name for _, name in done)

    # -- offsets ------------------------------------------------------------------------------------------------

    async def consumer_progress(self, group: str, topic: str | None) -> m.ConsumerProgress:
        validated(validate_group, group)
        brokers = await self.topic_brokers(topic) if topic else await self.masters()

        async def one(b: Broker) -> list[m.QueueProgress]:
            request = admin_pb2.ConsumerProgressRequest(group=group, topic=topic or "")
            response = await self._admin(b.addr, "ConsumerProgress", request, f"ConsumerProgress on {b.name}")
            return [
                m.QueueProgress(q.topic, b.name, q.queue_id, q.broker_offset, q.consumer_offset, q.lag)
                for q in response.queues
            ]

        done = self.some_ok(await self.each(brokers, one), f"progress of {group!r}", [Code.TOPIC_NOT_FOUND])
        rows = sorted((q for _, qs in done for q in qs), key=lambda q: (q.topic, q.broker_name, q.queue_id))
        return m.ConsumerProgress(group, tuple(rows))

    async def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int) -> list[m.OffsetReset]:
        validated(validate_group, group)
        validated(validate_topic, topic, allow_system=True)
        if timestamp_ms < 0:
            raise bad_request(f"timestamp must be >= 0 ms, got {timestamp_ms}")
        brokers = await self.topic_brokers(topic)

        async def one(b: Broker) -> list[m.OffsetReset]:
            request = admin_pb2.ResetOffsetByTimeRequest(group=group, topic=topic, timestamp_ms=timestamp_ms)
            response = await self._admin(b.addr, "ResetOffsetByTime", request, f"ResetOffsetByTime on {b.name}")
            return [m.OffsetReset(topic, b.name, qid, offset) for qid, offset in response.offsets.items()]

        done = self.all_ok(await self.each(brokers, one), f"reset offsets of {group!r} on {topic!r}")
        return sorted((r for _, rs in done for r in rs), key=lambda r: (r.broker_name, r.queue_id))

    # -- messages -----------------------------------------------------------------------------------------------

    async def _by_name(self, brokers: Sequence[Broker], name: str) -> Broker:
        if looks_like_addr(name):
            return (await self.targets(None, name))[0]
        for b in brokers:
            if b.name == name:
                return b
        for b in await self.masters():
            if b.name == name:
                return b
        raise OMSResourceNotExistException(Code.NOT_FOUND, f"no broker named {name!r}")

    async def query_by_id(self, msg_id: str, topic: str | None, broker: str | None = None) -> list[m.MessageView]:
        msg_id = msg_id.strip()
        if not msg_id:
            raise OMSMessageFormatException(Code.ILLEGAL_MESSAGE_ID, "message id is blank")
        if topic:
            validated(validate_topic, topic, allow_system=True)
        offset_id = len(msg_id) == OFFSET_MSG_ID_LENGTH
        if not offset_id and not topic:
            raise OMSMessageFormatException(
                Code.ILLEGAL_MESSAGE_ID,
                f"{msg_id!r} is not an offset message id ({OFFSET_MSG_ID_LENGTH} hex characters); "
                "give the topic to look up a producer's (unique) message id",
            )
        brokers: list[Broker] = []
        if broker:
            brokers = [await self._by_name([], broker)]
        elif offset_id:
            try:
                decoded = decode_offset_message_id(msg_id)
                store = f"{decoded.host}:{decoded.port}"
                brokers = [Broker(b.cluster, b.broker_name, b.addr) for b in await self.brokers() if b.addr == store]
            except MQError:
                brokers = []  # 32 characters but not hex: it can still be a unique id of that length
        if not brokers:
            brokers = await self.topic_brokers(topic, fallback=True) if topic else await self.masters()

        async def one(b: Broker) -> list[m.MessageView]:
            request = admin_pb2.QueryMessageByIdRequest(msg_id=msg_id, topic=topic or "")
            response = await self._admin(b.addr, "QueryMessageById", request, f"QueryMessageById on {b.name}")
            return [_message_view(v, b.name) for v in response.messages]

        results = await self.each(brokers, one)
        done = self.some_ok(results, f"query {msg_id!r}", [Code.MESSAGE_NOT_FOUND, Code.TOPIC_NOT_FOUND])
        views = [v for _, vs in done for v in vs]
        if not views:
            where = f" in topic {topic!r}" if topic else ""
            raise OMSResourceNotExistException(Code.MESSAGE_NOT_FOUND, f"no message with id {msg_id!r}{where}")
        return sorted(views, key=lambda v: (v.store_timestamp_ms, v.broker_name))

    async def query_by_key(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int | None
    ) -> list[m.MessageView]:
        validated(validate_topic, topic, allow_system=True)
        if not key.strip():
            raise OMSMessageFormatException(Code.ILLEGAL_MESSAGE_KEY, "message key is blank")
        if not 0 < max_num <= MAX_QUERY_NUM:
            raise bad_request(f"max_num must be in 1..{MAX_QUERY_NUM}, got {max_num}")
        brokers = await self.topic_brokers(topic, fallback=True)

        async def one(b: Broker) -> list[m.MessageView]:
            request = admin_pb2.QueryMessageByKeyRequest(
                topic=topic, key=key, max_num=max_num, begin_timestamp_ms=begin_ms, end_timestamp_ms=end_ms or 0
            )
            response = await self._admin(b.addr, "QueryMessageByKey", request, f"QueryMessageByKey on {b.name}")
            return [_message_view(v, b.name) for v in response.messages]

        done = self.some_ok(await self.each(brokers, one), f"query key {key!r}", [Code.TOPIC_NOT_FOUND])
        views = sorted((v for _, vs in done for v in vs), key=lambda v: (v.store_timestamp_ms, v.broker_name))
        return views[-max_num:]  # brokers walk their index newest first: keep the newest overall

    async def query_by_offset(self, topic: str, queue_id: int, offset: int, broker: str | None) -> m.MessageView:
        validated(validate_topic, topic, allow_system=True)
        if queue_id < 0 or offset < 0:
            raise bad_request(f"queue id and offset must be >= 0, got {queue_id} and {offset}")
        brokers = await self.topic_brokers(topic, fallback=True)
        if broker:
            target = await self._by_name(brokers, broker)
        elif len(brokers) == 1:
            target = brokers[0]
        else:
            names = ", ".join(sorted(b.name for b in brokers))
            raise bad_request(f"topic {topic!r} is on brokers {names}: say which broker")
        request = admin_pb2.QueryMessageByOffsetRequest(topic=topic, queue_id=queue_id, offset=offset)
        what = f"QueryMessageByOffset on {target.name}"
        response = await self._admin(target.addr, "QueryMessageByOffset", request, what)
        return _message_view(response.messages[0], target.name)

    # -- dead letters -------------------------------------------------------------------------------------------

    async def resend_dead_letter(
        self, group: str, msg_id: str | None, broker: str | None, offset: int | None, queue_id: int
    ) -> m.ResendResult:
        validated(validate_group, group)
        dlq = dlq_topic(group)
        if msg_id:
            found = [v for v in await self.query_by_id(msg_id, dlq, broker) if v.topic == dlq]
            if not found:
                raise OMSResourceNotExistException(Code.MESSAGE_NOT_FOUND, f"no message {msg_id!r} in {dlq}")
            letter = found[-1]  # dead-lettered more than once (resent, failed again): the latest copy
        elif offset is not None:
            letter = await self.query_by_offset(dlq, queue_id, offset, broker)
        else:
            raise bad_request("give the dead letter's message id, or its broker and offset in the DLQ queue")
        topic = letter.original_topic
        if not topic:
            raise OMSRuntimeException(
                Code.BAD_REQUEST, f"{letter.msg_id} in {dlq} does not record its original topic (RETRY_TOPIC)"
            )
        source = await self._by_name([], letter.broker_name)
        message = await self._pull_one(source, group, letter)
        message.topic.name = topic
        message.topic.resource_namespace = self.runtime.namespace
        return await self._send(message, letter)

    async def _pull_one(self, b: Broker, group: str, letter: m.MessageView) -> definition_pb2.Message:
        """The stored message as v2 hands it out: the body with its encoding, tag, keys and user properties."""
        # the admin view has the raw properties but not the body's compression flag; v2 PullMessage has both
        endpoint = Endpoint.of(parse_hosts(b.addr, b.addr))
        request = service_pb2.PullMessageRequest(
            group=definition_pb2.Resource(name=group, resource_namespace=self.runtime.namespace),
            message_queue=definition_pb2.MessageQueue(
                topic=definition_pb2.Resource(name=letter.topic, resource_namespace=self.runtime.namespace),
                id=letter.queue_id,
            ),
            offset=letter.queue_offset,
            batch_size=1,
        )
        what = f"PullMessage of {letter.topic} on {b.name}"
        found: definition_pb2.Message | None = None
        try:
            call = self.runtime.pool.stub(endpoint).PullMessage(
                request, metadata=self.headers.build(), timeout=self.timeout_s
            )
            async for response in call:
                kind = response.WhichOneof("content")
                if kind == "status":
                    check(response.status.code, response.status.message, what)
                elif kind == "message" and found is None:
                    found = response.message
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, what) from None
        if found is None or found.system_properties.queue_offset != letter.queue_offset:
            raise OMSResourceNotExistException(
                Code.MESSAGE_NOT_FOUND, f"{what}: no message at offset {letter.queue_offset} any more"
            )
        out = definition_pb2.Message()
        out.CopyFrom(found)
        sp = out.system_properties
        for name in (
            "body_digest",
            "store_timestamp",
            "store_host",
            "delivery_timestamp",
            "receipt_handle",
            "queue_id",
            "queue_offset",
            "invisible_duration",
            "delivery_attempt",
            "orphaned_transaction_recovery_duration",
            "dead_letter_queue",
        ):
            sp.ClearField(name)
        sp.message_type = definition_pb2.FIFO if sp.HasField("message_group") else definition_pb2.NORMAL
        return out

    async def _send(self, message: definition_pb2.Message, letter: m.MessageView) -> m.ResendResult:
        """A plain v2 SendMessage to a writable queue of the original topic, trying each broker once."""
        topic = message.topic.name
        request = service_pb2.QueryRouteRequest(
            topic=definition_pb2.Resource(name=topic, resource_namespace=self.runtime.namespace),
            endpoints=self.runtime.access_point.to_pb(),
        )
        response = await self.rpc.call(self.runtime.access_point, "QueryRoute", request, self.timeout_s)
        route = route_from_response(topic, response)
        by_broker: dict[str, Endpoint] = {}
        for q in route.writable():
            by_broker.setdefault(q.broker_name, q.endpoint)
        if not by_broker:
            raise OMSRuntimeException(Code.FORBIDDEN, f"topic {topic!r} has no writable queue to resend to")
        order = list(by_broker.items())
        random.shuffle(order)
        last: OMSException | None = None
        for broker_name, endpoint in order:
            send = service_pb2.SendMessageRequest(messages=[message])
            what = f"SendMessage to {broker_name}"
            try:
                result = await self.rpc.call(endpoint, "SendMessage", send, self.timeout_s, check=False)
                top = int(result.status.code)
                if top not in SUCCESS_CODES and top not in STATUS_OF_CODE:
                    check(top, result.status.message, what)
                if not result.entries:
                    raise OMSRuntimeException(Code.INTERNAL_ERROR, f"{what}: no result entry")
                entry = result.entries[0]
                if int(entry.status.code) not in STATUS_OF_CODE:
                    check(int(entry.status.code), entry.status.message, what)
                return m.ResendResult(entry.message_id, topic, broker_name, int(entry.offset), letter)
            except (OMSMessageFormatException, OMSSecurityException):
                raise  # the message or the caller is refused: another broker would refuse it too
            except OMSException as exc:
                log.info("resending %s to %s failed: %s", letter.unique_id or letter.msg_id, broker_name, exc)
                last = exc
        assert last is not None
        raise last
