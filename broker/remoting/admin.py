"""The broker's admin requests of RocketMQ 4's ``mqadmin`` (MQClientAPIImpl): topics and subscription groups
(create/update/delete/list), broker config and runtime info, topic stats, consume stats and consumer connections,
answered from the same managers as the gRPC admin service.

Bodies are RocketMQ's JSON (fastjson): a map keyed by a MessageQueue is written as fastjson writes it, with the
queue's JSON object as the key, which the Java client reads back.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from broker.config import RUNTIME_UPDATABLE_KEYS
from broker.remoting.clients import RemotingClients
from broker.runtime_info import runtime_info
from broker.subscription_group_manager import SubscriptionGroupConfig
from orbitmq.config import ConfigError, apply_runtime_updates, config_strings
from orbitmq.errors import Code, MQError
from orbitmq.logging import get_logger
from orbitmq.remoting.codec import OUR_VERSION, FrameError, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.route import TopicConfig, TopicMessageType
from orbitmq.topics import is_system_topic
from orbitmq.validation import validate_group, validate_topic

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from orbitmq.v2.telemetry import ClientInfo

log = get_logger("broker.remoting.admin")

MAX_QUEUE_NUMS = 1024
MESSAGE_TYPE_ATTRIBUTE = "message.type"  # RocketMQ 5's topic attribute, "+message.type=FIFO" in the header
Handler = Callable[[RemotingCommand, str], Awaitable[RemotingCommand]]
_ERRORS = {
    Code.TOPIC_NOT_FOUND: ResponseCode.TOPIC_NOT_EXIST,
    Code.CONSUMER_GROUP_NOT_FOUND: ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
}


def fastjson(value: Any) -> str:
    """JSON as RocketMQ's RemotingSerializable writes it: keys sorted, and a map key that is an object (a
    MessageQueue) written as that object (fastjson's non-standard form; ``_MQKey`` marks such keys)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_key(k)}:{fastjson(v)}" for k, v in sorted(value.items(), key=_sort_key)) + "}"
    if isinstance(value, list | tuple | set):
        return "[" + ",".join(fastjson(v) for v in value) + "]"
    return json.dumps(value)


class _MQKey(tuple[str, int, str]):
    """A MessageQueue used as a map key: (brokerName, queueId, topic)."""


def _key(k: object) -> str:
    if isinstance(k, _MQKey):
        return fastjson({"brokerName": k[0], "queueId": k[1], "topic": k[2]})
    return json.dumps(str(k))


def _sort_key(item: tuple[object, object]) -> tuple[str, ...]:
    k = item[0]
    return (k[2], f"{k[1]:08d}") if isinstance(k, _MQKey) else (str(k),)


def _properties_text(values: Mapping[str, str]) -> str:
    """MixAll.properties2String: ``key=value`` lines."""
    return "".join(f"{k}={v}\n" for k, v in sorted(values.items()))


def _parse_properties(body: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in body.decode().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise FrameError(f"UPDATE_BROKER_CONFIG: body line {line!r} is not key=value")
        out[key.strip()] = value.strip()
    return out


class RemotingAdmin:
    def __init__(self, ctx: BrokerContext, clients: RemotingClients) -> None:
        self.ctx = ctx
        self.clients = clients

    def handlers(self) -> dict[int, Handler]:
        plain: dict[int, Handler] = {
            RequestCode.UPDATE_AND_CREATE_TOPIC: self.create_topic,
            RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
            RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topic_config,
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.create_group,
            RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_group,
            RequestCode.GET_BROKER_CONFIG: self.broker_config,
            RequestCode.UPDATE_BROKER_CONFIG: self.update_broker_config,
            RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
            RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
            RequestCode.GET_CONSUME_STATS: self.consume_stats,
            RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connections,
            RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.all_group_config,
            RequestCode.GET_PRODUCER_CONNECTION_LIST: self.producer_connections,
            RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
        }
        return {code: self._guarded(handler) for code, handler in plain.items()}

    def _guarded(self, handler: Handler) -> Handler:
        async def run(cmd: RemotingCommand, peer: str) -> RemotingCommand:
            try:
                return await handler(cmd, peer)
            except MQError as exc:
                return self.refused(cmd, exc)

        return run

    @staticmethod
    def refused(cmd: RemotingCommand, exc: MQError) -> RemotingCommand:
        """RocketMQ's admin processor answers a refusal with SYSTEM_ERROR and the reason (a missing topic or group
        with its own code)."""
        return cmd.response(_ERRORS.get(exc.code, ResponseCode.SYSTEM_ERROR), exc.message)

    async def _registered(self) -> None:
        if self.ctx.registrar is not None:  # the name servers see the change before the answer
            await self.ctx.registrar.register_now()

    def _ok(self, cmd: RemotingCommand, body: str | None = None, **ext: object) -> RemotingCommand:
        response = cmd.response(ResponseCode.SUCCESS, None, **ext)
        if body is not None:
            response.body = body.encode()
        return response

    # -- topics --------------------------------------------------------------------------------------------------

    async def create_topic(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        topic = cmd.field("topic")
        validate_topic(topic)
        if is_system_topic(topic):
            raise MQError(Code.ILLEGAL_TOPIC, f"topic {topic!r} is a system topic: it cannot be created or updated")
        read, write = cmd.int_field("readQueueNums"), cmd.int_field("writeQueueNums")
        for name, n in (("readQueueNums", read), ("writeQueueNums", write)):
            if not 0 < n <= MAX_QUEUE_NUMS:
                raise FrameError(f"UPDATE_AND_CREATE_TOPIC: header field {name!r} is {n}, allowed 1..{MAX_QUEUE_NUMS}")
        perm = cmd.int_field("perm", 6)
        if perm not in (2, 4, 6):
            raise FrameError(f"UPDATE_AND_CREATE_TOPIC: header field 'perm' is {perm}: 2 (write), 4 (read), 6 (both)")
        attributes = _parse_attributes(cmd.ext_fields.get("attributes") or "")
        raw_type = attributes.pop(MESSAGE_TYPE_ATTRIBUTE, "")
        existing = self.ctx.topics.get(topic)
        try:
            message_type = TopicMessageType.parse(raw_type) if raw_type else None
        except ValueError:
            raise FrameError(f"UPDATE_AND_CREATE_TOPIC: attribute 'message.type' {raw_type!r} is not known") from None
        if message_type is None:
            message_type = existing.message_type if existing is not None else TopicMessageType.NORMAL
        merged = {**(existing.attributes if existing is not None else {}), **attributes}
        order = cmd.ext_fields.get("order", "false").lower() == "true"
        self.ctx.topics.create_or_update(TopicConfig(topic, read, write, perm, order, message_type, merged))
        await self._registered()
        log.info("topic created or updated over remoting", topic=topic, read=read, write=write, perm=perm)
        return self._ok(cmd)

    async def delete_topic(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        topic = cmd.field("topic")
        if is_system_topic(topic):
            raise MQError(Code.ILLEGAL_TOPIC, f"topic {topic!r} is a system topic: it cannot be deleted")
        if self.ctx.topics.get(topic) is None:
            raise MQError(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist on broker {self.ctx.broker_name}")
        self.ctx.topics.delete(topic)
        self.ctx.offsets.remove_topic(topic)
        self.ctx.store.delete_topics([topic])
        await self._registered()
        return self._ok(cmd)

    async def all_topic_config(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        table = {tc.topic_name: _topic_json(tc) for tc in self.ctx.topics.all()}
        version = {"counter": len(table), "timestamp": int(time.time() * 1000)}
        return self._ok(cmd, fastjson({"dataVersion": version, "topicConfigTable": table}))

    # -- groups --------------------------------------------------------------------------------------------------

    async def create_group(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        try:
            body = json.loads(cmd.body or b"{}")
        except ValueError as exc:
            raise FrameError(f"UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the body is not JSON: {exc}") from None
        if not isinstance(body, dict) or not body.get("groupName"):
            raise FrameError("UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: body field 'groupName' is missing")
        group = str(body["groupName"])
        validate_group(group)
        retry_max = int(body.get("retryMaxTimes", 16))
        if retry_max < 0:
            raise FrameError(f"UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: body field 'retryMaxTimes' is {retry_max}")
        existing = self.ctx.groups.get(group)
        config = SubscriptionGroupConfig(
            group,
            consume_enable=bool(body.get("consumeEnable", True)),
            consume_broadcast_enable=bool(body.get("consumeBroadcastEnable", True)),
            retry_queue_nums=max(1, int(body.get("retryQueueNums", 1))),
            retry_max_times=retry_max,
            consume_message_orderly=bool(body.get("consumeMessageOrderly", False)),
            # RocketMQ's SubscriptionGroupConfig has no allocation strategy: an update keeps the one set over gRPC
            allocate_strategy=existing.allocate_strategy if existing is not None else "",
            allocate_options=dict(existing.allocate_options) if existing is not None else {},
        )
        self.ctx.groups.create_or_update(config)
        return self._ok(cmd)

    async def all_group_config(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        table = {g.group_name: _group_json(g) for g in self.ctx.groups.all()}
        version = {"counter": len(table), "timestamp": int(time.time() * 1000)}
        return self._ok(cmd, fastjson({"dataVersion": version, "subscriptionGroupTable": table}))

    async def delete_group(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        group = cmd.field("groupName")
        if not self.ctx.groups.delete(group):
            raise MQError(Code.CONSUMER_GROUP_NOT_FOUND, f"group {group!r} does not exist")
        if cmd.ext_fields.get("cleanOffset", "false").lower() == "true":
            self.ctx.offsets.remove_group(group)
        return self._ok(cmd)

    # -- broker --------------------------------------------------------------------------------------------------

    async def broker_config(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        version = fastjson({"counter": 0, "timestamp": int(time.time() * 1000)})
        return self._ok(cmd, _properties_text(config_strings(self.ctx.config, self.ctx.store.config)), version=version)

    async def update_broker_config(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        updates = _parse_properties(cmd.body)
        if not updates:
            raise FrameError("UPDATE_BROKER_CONFIG: the body names no key=value")
        try:
            apply_runtime_updates(self.ctx.config, updates, RUNTIME_UPDATABLE_KEYS)
        except ConfigError as exc:
            return cmd.response(ResponseCode.INVALID_PARAMETER, str(exc))
        log.info("broker config updated over remoting", updates=updates)
        return self._ok(cmd)

    async def runtime_info(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        table = {
            "brokerVersion": str(OUR_VERSION),
            "brokerVersionDesc": f"OrbitMQ (remoting version {OUR_VERSION})",
            "brokerActive": str(not self.ctx.config.is_slave).lower(),
            **runtime_info(self.ctx),
        }
        return self._ok(cmd, fastjson({"table": table}))

    # -- stats and connections -----------------------------------------------------------------------------------

    async def topic_stats(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        topic = cmd.field("topic")
        tc = self.ctx.topics.get(topic)
        if tc is None:
            raise MQError(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist on broker {self.ctx.broker_name}")
        store = self.ctx.store
        table: dict[object, object] = {}
        for qid in range(tc.write_queue_nums):
            lo, hi = store.get_min_offset_in_queue(topic, qid), store.get_max_offset_in_queue(topic, qid)
            last = store.get_message_store_timestamp(topic, qid, hi - 1) if hi > lo else 0
            table[_MQKey((self.ctx.broker_name, qid, topic))] = {
                "lastUpdateTimestamp": max(0, last),
                "maxOffset": hi,
                "minOffset": lo,
            }
        return self._ok(cmd, fastjson({"offsetTable": table}))

    async def consume_stats(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        group = cmd.field("consumerGroup")
        known = self.ctx.groups.get(group) is not None or self.ctx.offsets.topics_of_group(group)
        if not known and not self.clients.consumers(group):
            # RocketMQ answers from the offset table: a group with no config, offsets or consumers has no stats
            raise MQError(Code.CONSUMER_GROUP_NOT_FOUND, f"subscription group {group!r} does not exist")
        topic = cmd.ext_fields.get("topic") or ""
        topics = [topic] if topic else sorted(set(self.ctx.offsets.topics_of_group(group)) | self._subscribed(group))
        store, table = self.ctx.store, {}
        for name in topics:
            tc = self.ctx.topics.get(name)
            if tc is None:
                if topic:
                    raise MQError(
                        Code.TOPIC_NOT_FOUND, f"topic {name!r} does not exist on broker {self.ctx.broker_name}"
                    )
                continue
            committed = self.ctx.offsets.offsets_of(group, name)
            for qid in range(tc.read_queue_nums):
                broker_offset = store.get_max_offset_in_queue(name, qid)
                consumer_offset = max(0, committed.get(qid, 0))
                last = store.get_message_store_timestamp(name, qid, consumer_offset - 1) if consumer_offset > 0 else 0
                table[_MQKey((self.ctx.broker_name, qid, name))] = {
                    "brokerOffset": broker_offset,
                    "consumerOffset": consumer_offset,
                    "lastTimestamp": max(0, last),
                    "pullOffset": consumer_offset,
                }
        return self._ok(cmd, fastjson({"consumeTps": 0.0, "offsetTable": table}))

    async def producer_connections(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        group = cmd.field("producerGroup")
        rows = [_connection(c.client_id, c.peer, c.language, c.version) for c in self.clients.producers(group)]
        rows += [_v2_connection(c) for c in self.ctx.telemetry.clients(group=group) if c.is_producer]
        if not rows:
            # RocketMQ's answer for a group with no connected producer
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"the producer group [{group}] not exist")
        return self._ok(cmd, fastjson({"connectionSet": rows}))

    async def reset_offset(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        """mqadmin resetOffsetByTime, server side (RocketMQ 5's useServerSideResetOffset): each queue's offset moves
        to the first message stored at or after ``timestamp`` (-1: the queue's end), backwards only unless
        ``isForce``; running consumers get it as PULL_OFFSET_MOVED on their next pull of the queue."""
        topic, group = cmd.field("topic"), cmd.field("group")
        timestamp = cmd.int_field("timestamp")
        force = cmd.field("isForce").lower() == "true"
        only_queue = cmd.int_field("queueId", -1)
        explicit = cmd.ext_fields.get("offset")
        tc = self.ctx.topics.get(topic)
        if tc is None:
            raise MQError(Code.TOPIC_NOT_FOUND, f"reset offset: topic {topic!r} does not exist on this broker")
        committed = self.ctx.offsets.offsets_of(group, topic)
        if not committed:
            # RocketMQ's answer: the group never consumed this topic here
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"the consumer group <{group}> has no offset of {topic!r}")
        store, table = self.ctx.store, {}
        queues = range(tc.read_queue_nums) if only_queue < 0 else [only_queue]
        for qid in queues:
            if explicit not in (None, "") and only_queue >= 0:
                target = cmd.int_field("offset")
            elif timestamp == -1:
                target = store.get_max_offset_in_queue(topic, qid)
            else:
                target = max(0, store.get_offset_in_queue_by_time(topic, qid, timestamp))
            current = committed.get(qid, -1)
            offset = target if force or current < 0 or target < current else current
            self.ctx.offsets.set_reset_offset(group, topic, qid, offset)
            table[_MQKey((self.ctx.broker_name, qid, topic))] = offset
        self.ctx.offsets.persist()
        log.info("offsets reset over remoting", topic=topic, group=group, timestamp=timestamp, force=force)
        return self._ok(cmd, fastjson({"offsetTable": table}))

    def _subscribed(self, group: str) -> set[str]:
        return {t for c in self.clients.consumers(group) for (g, t) in c.subscriptions if g == group}

    async def consumer_connections(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        group = cmd.field("consumerGroup")
        members = self.clients.consumers(group)
        # the group's v2 consumers too (Telemetry clients), as GET_CONSUMER_LIST_BY_GROUP lists them
        v2 = [c for c in self.ctx.telemetry.clients(group=group) if not c.is_producer]
        if not members and not v2:
            return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group {group!r} is not online")
        data = members[0].consumer_data.get(group, {})
        subscriptions: dict[str, Any] = {}
        for c in members:
            for sub in c.consumer_data.get(group, {}).get("subscriptionDataSet") or []:
                subscriptions.setdefault(str(sub.get("topic", "")), sub)
        body = {
            "connectionSet": [_connection(c.client_id, c.peer, c.language, c.version) for c in members]
            + [
                _connection(c.client_id, c.meta.peer if c.meta else "", c.meta.language if c.meta else "", 0)
                for c in v2
            ],
            "consumeFromWhere": data.get("consumeFromWhere", "CONSUME_FROM_LAST_OFFSET"),
            "consumeType": data.get("consumeType", "CONSUME_PASSIVELY"),
            "messageModel": data.get("messageModel", "CLUSTERING"),
            "subscriptionTable": subscriptions,
        }
        return self._ok(cmd, fastjson(body))


def _group_json(g: SubscriptionGroupConfig) -> dict[str, Any]:
    """RocketMQ's SubscriptionGroupConfig fields (the ones OrbitMQ keeps; the rest at RocketMQ's defaults)."""
    return {
        "brokerId": 0,
        "consumeBroadcastEnable": g.consume_broadcast_enable,
        "consumeEnable": g.consume_enable,
        "consumeFromMinEnable": True,
        "consumeMessageOrderly": g.consume_message_orderly,
        "groupName": g.group_name,
        "groupSysFlag": 0,
        "notifyConsumerIdsChangedEnable": True,
        "retryMaxTimes": g.retry_max_times,
        "retryQueueNums": g.retry_queue_nums,
        "whichBrokerWhenConsumeSlowly": 1,
    }


def _connection(client_id: str, addr: str, language: str, version: int) -> dict[str, Any]:
    return {"clientAddr": addr, "clientId": client_id, "language": language or "OTHER", "version": version}


def _v2_connection(c: ClientInfo) -> dict[str, Any]:
    return _connection(c.client_id, c.meta.peer if c.meta else "", c.meta.language if c.meta else "", 0)


def _topic_json(tc: TopicConfig) -> dict[str, Any]:
    attributes = dict(tc.attributes)
    if tc.message_type is not TopicMessageType.NORMAL:
        attributes[MESSAGE_TYPE_ATTRIBUTE] = tc.message_type.value
    return {
        "attributes": attributes,
        "order": tc.order,
        "perm": int(tc.perm),
        "readQueueNums": tc.read_queue_nums,
        "topicFilterType": "SINGLE_TAG",
        "topicName": tc.topic_name,
        "topicSysFlag": 0,
        "writeQueueNums": tc.write_queue_nums,
    }


def _parse_attributes(text: str) -> dict[str, str]:
    """RocketMQ 5's attributes header: ``+key=value`` entries, comma-separated (``-key`` deletions are ignored)."""
    out: dict[str, str] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        if not item.startswith("+"):
            continue
        key, sep, value = item[1:].partition("=")
        if not sep or not key:
            raise FrameError(f"UPDATE_AND_CREATE_TOPIC: attribute {item!r} is not +key=value")
        out[key] = value
    return out
