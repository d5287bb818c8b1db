"""The ``orbitmq.admin.Admin`` service: topics, groups, offsets, message queries, runtime info.

Served on the broker's gRPC port; topic changes re-register with the name servers right away.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from typing import Any

import grpc
from google.protobuf import json_format
from rocketmq.grpc_protocol import definition_pb2

from broker import access
from broker.config import RUNTIME_UPDATABLE_KEYS
from broker.context import BrokerContext
from broker.grpc.errors import guarded
from broker.runtime_info import runtime_info
from broker.store.message import MessageExt
from broker.subscription_group_manager import SubscriptionGroupConfig
from orbitmq.config import ConfigError, apply_runtime_updates, config_strings
from orbitmq.errors import Code, MQError
from orbitmq.logging import get_logger
from orbitmq.msgid import OFFSET_MSG_ID_LENGTH, decode_offset_message_id, is_hex_id
from orbitmq.proto import admin_pb2, admin_pb2_grpc
from orbitmq.route import TopicConfig, TopicMessageType
from orbitmq.topics import is_system_topic
from orbitmq.v2.telemetry import ClientInfo
from orbitmq.validation import validate_group, validate_topic

log = get_logger("broker.admin")

MAX_QUERY_MESSAGES = 64


def _status(code: int, message: str) -> admin_pb2.Status:
    return admin_pb2.Status(code=code, message=message)


def _ok() -> admin_pb2.Status:
    return _status(int(Code.OK), "OK")


def _ok_status(response: Any) -> bool:
    return bool(response.status.code == Code.OK)


def _topic_to_pb(tc: TopicConfig) -> admin_pb2.TopicConfig:
    return admin_pb2.TopicConfig(
        topic_name=tc.topic_name,
        read_queue_nums=tc.read_queue_nums,
        write_queue_nums=tc.write_queue_nums,
        perm=int(tc.perm),
        message_type=tc.message_type.value,
        order=tc.order,
        attributes=tc.attributes,
    )


def _group_to_pb(g: SubscriptionGroupConfig) -> admin_pb2.GroupConfig:
    return admin_pb2.GroupConfig(
        group_name=g.group_name,
        consume_enable=g.consume_enable,
        retry_max_times=g.retry_max_times,
        consume_message_orderly=g.consume_message_orderly,
        retry_queue_nums=g.retry_queue_nums,
        consume_broadcast_enable=g.consume_broadcast_enable,
        allocate_strategy=g.allocate_strategy,
        allocate_options=g.allocate_options,
    )


def _view(m: MessageExt) -> admin_pb2.MessageView:
    return admin_pb2.MessageView(
        topic=m.topic,
        queue_id=m.queue_id,
        queue_offset=m.queue_offset,
        commitlog_offset=m.commitlog_offset,
        msg_id=m.msg_id,
        unique_id=m.unique_id or "",
        body=m.body,
        properties=m.properties,
        born_timestamp_ms=m.born_timestamp,
        store_timestamp_ms=m.store_timestamp,
        born_host=f"{m.born_host[0]}:{m.born_host[1]}",
        store_host=f"{m.store_host[0]}:{m.store_host[1]}",
        reconsume_times=m.reconsume_times,
        store_size=m.store_size,
        sys_flag=m.sys_flag,
    )


class AdminServicer(admin_pb2_grpc.AdminServicer):
    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    async def _registered(self) -> None:
        if self.ctx.registrar is not None:
            await self.ctx.registrar.register_now()

    def _topic(self, name: str) -> TopicConfig:
        tc = self.ctx.topics.get(name)
        if tc is None:
            raise MQError(Code.TOPIC_NOT_FOUND, f"topic {name!r} does not exist on broker {self.ctx.broker_name}")
        return tc

    # ------------------------------------------------------------------ topics
    async def CreateOrUpdateTopic(self, request: Any, context: Any) -> admin_pb2.TopicResponse:
        async def run() -> admin_pb2.TopicResponse:
            access.check_admin(self.ctx.plugins, context, "CreateOrUpdateTopic", self.ctx.broker_name)
            c = request.config
            validate_topic(c.topic_name)
            if not (0 < c.read_queue_nums <= 1024 and 0 < c.write_queue_nums <= 1024):
                raise MQError(Code.BAD_REQUEST, "read/write queue numbers must be in 1..1024")
            if c.perm not in (0, 2, 4, 6):  # 0 = unset in proto3: read-write
                raise MQError(Code.BAD_REQUEST, f"perm {c.perm} must be 2 (write), 4 (read) or 6 (read-write)")
            try:
                message_type = TopicMessageType.parse(c.message_type)
            except ValueError as exc:
                raise MQError(Code.BAD_REQUEST, f"unknown message type {c.message_type!r}") from exc
            tc = TopicConfig(
                c.topic_name,
                c.read_queue_nums,
                c.write_queue_nums,
                c.perm or 6,
                c.order,
                message_type,
                dict(c.attributes),
            )
            tc = self.ctx.topics.create_or_update(tc)  # queue.type: checked, normalised, kept on update
            await self._registered()
            return admin_pb2.TopicResponse(status=_ok(), config=_topic_to_pb(tc))

        started = time.perf_counter()
        response = await guarded("CreateOrUpdateTopic", admin_pb2.TopicResponse, run, _status)
        if self.ctx.metrics is not None:  # rocketmq_topic_create_execution_time, as RocketMQ's admin processor
            system = is_system_topic(request.config.topic_name)
            self.ctx.metrics.on_create("topic", started, _ok_status(response), system)
        return response

    async def DeleteTopic(self, request: Any, context: Any) -> admin_pb2.StatusResponse:
        async def run() -> admin_pb2.StatusResponse:
            access.check_admin(self.ctx.plugins, context, "DeleteTopic", self.ctx.broker_name)
            if is_system_topic(request.topic):  # TBW102 gone silently disabled auto-creation
                raise MQError(Code.ILLEGAL_TOPIC, f"topic {request.topic!r} is a system topic: it cannot be deleted")
            self._topic(request.topic)
            self.ctx.topics.delete(request.topic)
            self.ctx.offsets.remove_topic(request.topic)
            self.ctx.store.delete_topics([request.topic])
            await self._registered()
            return admin_pb2.StatusResponse(status=_ok())

        return await guarded("DeleteTopic", admin_pb2.StatusResponse, run, _status)

    async def ListTopics(self, request: Any, context: Any) -> admin_pb2.ListTopicsResponse:
        async def run() -> admin_pb2.ListTopicsResponse:
            access.check_admin(self.ctx.plugins, context, "ListTopics", self.ctx.broker_name)
            topics = sorted(self.ctx.topics.user_topics(), key=lambda t: t.topic_name)
            return admin_pb2.ListTopicsResponse(status=_ok(), topics=[_topic_to_pb(t) for t in topics])

        return await guarded("ListTopics", admin_pb2.ListTopicsResponse, run, _status)

    async def TopicStatus(self, request: Any, context: Any) -> admin_pb2.TopicStatusResponse:
        async def run() -> admin_pb2.TopicStatusResponse:
            access.check_admin(self.ctx.plugins, context, "TopicStatus", self.ctx.broker_name)
            tc = self._topic(request.topic)
            store = self.ctx.store
            queues = []
            for qid in range(max(tc.read_queue_nums, tc.write_queue_nums)):
                lo = store.get_min_offset_in_queue(tc.topic_name, qid)
                hi = store.get_max_offset_in_queue(tc.topic_name, qid)
                last = store.get_message_store_timestamp(tc.topic_name, qid, hi - 1) if hi > lo else 0
                queues.append(
                    admin_pb2.QueueStatus(
                        queue_id=qid, min_offset=lo, max_offset=hi, last_update_timestamp_ms=max(0, last)
                    )
                )
            return admin_pb2.TopicStatusResponse(status=_ok(), queues=queues)

        return await guarded("TopicStatus", admin_pb2.TopicStatusResponse, run, _status)

    # ------------------------------------------------------------------ groups
    async def CreateOrUpdateGroup(self, request: Any, context: Any) -> admin_pb2.GroupResponse:
        async def run() -> admin_pb2.GroupResponse:
            access.check_admin(self.ctx.plugins, context, "CreateOrUpdateGroup", self.ctx.broker_name)
            c = request.config
            validate_group(c.group_name)
            if c.retry_max_times < 0:
                raise MQError(Code.BAD_REQUEST, "retry_max_times must be >= 0")
            g = SubscriptionGroupConfig(
                c.group_name,
                consume_enable=c.consume_enable,
                consume_broadcast_enable=c.consume_broadcast_enable,
                retry_queue_nums=c.retry_queue_nums or 1,
                retry_max_times=c.retry_max_times,
                consume_message_orderly=c.consume_message_orderly,
                allocate_strategy=c.allocate_strategy.strip(),
                allocate_options=dict(c.allocate_options),
            )
            if g.allocate_strategy:
                try:  # unknown names and bad options are refused now, not at the first QueryAssignment
                    self.ctx.plugins.allocate(g.allocate_strategy, g.allocate_options, g.group_name, "-", [], ["-"])
                except ValueError as exc:
                    raise MQError(Code.BAD_REQUEST, f"allocate_strategy {g.allocate_strategy!r}: {exc}") from exc
            self.ctx.groups.create_or_update(g)
            return admin_pb2.GroupResponse(status=_ok(), config=_group_to_pb(g))

        started = time.perf_counter()
        response = await guarded("CreateOrUpdateGroup", admin_pb2.GroupResponse, run, _status)
        if self.ctx.metrics is not None:  # rocketmq_consumer_group_create_execution_time
            self.ctx.metrics.on_create("group", started, _ok_status(response))
        return response

    async def DeleteGroup(self, request: Any, context: Any) -> admin_pb2.StatusResponse:
        async def run() -> admin_pb2.StatusResponse:
            access.check_admin(self.ctx.plugins, context, "DeleteGroup", self.ctx.broker_name)
            if not self.ctx.groups.delete(request.group):
                raise MQError(Code.CONSUMER_GROUP_NOT_FOUND, f"group {request.group!r} does not exist")
            self.ctx.offsets.remove_group(request.group)
            return admin_pb2.StatusResponse(status=_ok())

        return await guarded("DeleteGroup", admin_pb2.StatusResponse, run, _status)

    async def ListGroups(self, request: Any, context: Any) -> admin_pb2.ListGroupsResponse:
        async def run() -> admin_pb2.ListGroupsResponse:
            access.check_admin(self.ctx.plugins, context, "ListGroups", self.ctx.broker_name)
            groups = sorted(self.ctx.groups.all(), key=lambda g: g.group_name)
            return admin_pb2.ListGroupsResponse(status=_ok(), groups=[_group_to_pb(g) for g in groups])

        return await guarded("ListGroups", admin_pb2.ListGroupsResponse, run, _status)

    # ------------------------------------------------------------------ offsets
    async def ConsumerProgress(self, request: Any, context: Any) -> admin_pb2.ConsumerProgressResponse:
        async def run() -> admin_pb2.ConsumerProgressResponse:
            access.check_admin(self.ctx.plugins, context, "ConsumerProgress", self.ctx.broker_name)
            group = request.group
            validate_group(group)
            topics = [request.topic] if request.topic else sorted(self.ctx.offsets.topics_of_group(group))
            rows, total = [], 0
            for topic in topics:
                tc = self._topic(topic)
                committed = self.ctx.offsets.offsets_of(group, topic)
                for qid in range(tc.read_queue_nums):
                    broker_offset = self.ctx.store.get_max_offset_in_queue(topic, qid)
                    consumer_offset = committed.get(qid, -1)
                    lag = broker_offset - max(0, consumer_offset)
                    total += lag
                    rows.append(
                        admin_pb2.QueueProgress(
                            topic=topic,
                            queue_id=qid,
                            broker_offset=broker_offset,
                            consumer_offset=consumer_offset,
                            lag=lag,
                        )
                    )
            return admin_pb2.ConsumerProgressResponse(status=_ok(), queues=rows, total_lag=total)

        return await guarded("ConsumerProgress", admin_pb2.ConsumerProgressResponse, run, _status)

    async def ResetOffsetByTime(self, request: Any, context: Any) -> admin_pb2.ResetOffsetByTimeResponse:
        async def run() -> admin_pb2.ResetOffsetByTimeResponse:
            access.check_admin(self.ctx.plugins, context, "ResetOffsetByTime", self.ctx.broker_name)
            validate_group(request.group)
            tc = self._topic(request.topic)
            new: dict[int, int] = {}
            for qid in range(tc.read_queue_nums):
                offset = self.ctx.store.get_offset_in_queue_by_time(tc.topic_name, qid, request.timestamp_ms)
                # running offset consumers pick the reset up on their next pull (they would overwrite a plain commit)
                self.ctx.offsets.set_reset_offset(request.group, tc.topic_name, qid, offset)
                new[qid] = offset
            self.ctx.offsets.persist()
            return admin_pb2.ResetOffsetByTimeResponse(status=_ok(), offsets=new)

        return await guarded("ResetOffsetByTime", admin_pb2.ResetOffsetByTimeResponse, run, _status)

    # ------------------------------------------------------------------ message queries
    async def QueryMessageById(self, request: Any, context: Any) -> admin_pb2.QueryMessageResponse:
        async def run() -> admin_pb2.QueryMessageResponse:
            access.check_admin(self.ctx.plugins, context, "QueryMessageById", self.ctx.broker_name)
            msg_id = request.msg_id.strip()
            found: list[MessageExt] = []
            if len(msg_id) == OFFSET_MSG_ID_LENGTH:
                decoded = decode_offset_message_id(msg_id)
                m = self.ctx.store.look_message_by_offset(decoded.commitlog_offset)
                if m is not None and m.msg_id == msg_id:
                    found.append(m)
            if not found:
                # a producer's id is indexed under topic#id: without a topic, every topic of this broker is asked
                # (a hash-slot read each), so the id a producer printed is enough, as users expect
                topics = [request.topic] if request.topic else self.ctx.store.topics()
                store = self.ctx.store
                for topic in topics:
                    found = [
                        m
                        for m in await asyncio.to_thread(
                            store.query_message, topic, msg_id, MAX_QUERY_MESSAGES, 0, _now_ms()
                        )
                        if m.unique_id == msg_id
                    ]
                    if found:
                        break
            if not found and not is_hex_id(msg_id):
                # ids our producers and RocketMQ's make are hex: a typo gets told so rather than "not found"
                raise MQError(
                    Code.ILLEGAL_MESSAGE_ID,
                    f"message id {msg_id!r} is neither an offset id nor a unique id (both are hexadecimal)",
                )
            if not found:
                raise MQError(Code.MESSAGE_NOT_FOUND, f"no message with id {msg_id!r}")
            return admin_pb2.QueryMessageResponse(status=_ok(), messages=[_view(m) for m in found])

        return await guarded("QueryMessageById", admin_pb2.QueryMessageResponse, run, _status)

    async def QueryMessageByKey(self, request: Any, context: Any) -> admin_pb2.QueryMessageResponse:
        async def run() -> admin_pb2.QueryMessageResponse:
            access.check_admin(self.ctx.plugins, context, "QueryMessageByKey", self.ctx.broker_name)
            self._topic(request.topic)
            max_num = min(request.max_num or MAX_QUERY_MESSAGES, MAX_QUERY_MESSAGES)
            end = request.end_timestamp_ms or _now_ms()
            found = self.ctx.store.query_message(request.topic, request.key, max_num, request.begin_timestamp_ms, end)
            return admin_pb2.QueryMessageResponse(status=_ok(), messages=[_view(m) for m in found])

        return await guarded("QueryMessageByKey", admin_pb2.QueryMessageResponse, run, _status)

    async def QueryMessageByOffset(self, request: Any, context: Any) -> admin_pb2.QueryMessageResponse:
        async def run() -> admin_pb2.QueryMessageResponse:
            access.check_admin(self.ctx.plugins, context, "QueryMessageByOffset", self.ctx.broker_name)
            if self.ctx.topics.get(request.topic) is None and not self.ctx.store.queue_ids(request.topic):
                self._topic(request.topic)  # unknown: TOPIC_NOT_FOUND (system topics such as
                # SCHEDULE_TOPIC_XXXX have queues but no config, and can be inspected like in RocketMQ)
            result = self.ctx.store.get_message("", request.topic, request.queue_id, request.offset, 1)
            if not result.messages or result.messages[0].queue_offset != request.offset:
                raise MQError(
                    Code.MESSAGE_NOT_FOUND,
                    f"no message at offset {request.offset} of {request.topic!r} queue {request.queue_id} "
                    f"(valid: [{result.min_offset}, {result.max_offset}))",
                )
            return admin_pb2.QueryMessageResponse(status=_ok(), messages=[_view(result.messages[0])])

        return await guarded("QueryMessageByOffset", admin_pb2.QueryMessageResponse, run, _status)

    async def BrokerRuntimeInfo(self, request: Any, context: Any) -> admin_pb2.BrokerRuntimeInfoResponse:
        async def run() -> admin_pb2.BrokerRuntimeInfoResponse:
            access.check_admin(self.ctx.plugins, context, "BrokerRuntimeInfo", self.ctx.broker_name)
            info = runtime_info(self.ctx)
            return admin_pb2.BrokerRuntimeInfoResponse(status=_ok(), info=info)

        return await guarded("BrokerRuntimeInfo", admin_pb2.BrokerRuntimeInfoResponse, run, _status)

    # ------------------------------------------------------------------ clients, offsets, config
    async def ClientConnections(self, request: Any, context: Any) -> admin_pb2.ClientConnectionsResponse:
        async def run() -> admin_pb2.ClientConnectionsResponse:
            access.check_admin(self.ctx.plugins, context, "ClientConnections", self.ctx.broker_name)
            hub = self.ctx.telemetry
            rows = [
                _connection(c, hub.idle_ms(c))
                for c in hub.clients(group=request.group or None)
                if c.client_type and c.is_producer == request.producers and _declares(c, request.topic)
            ]
            rows.sort(key=lambda r: (r.group, r.client_id))
            return admin_pb2.ClientConnectionsResponse(status=_ok(), connections=rows)

        return await guarded("ClientConnections", admin_pb2.ClientConnectionsResponse, run, _status)

    async def UpdateConsumerOffsets(self, request: Any, context: Any) -> admin_pb2.StatusResponse:
        async def run() -> admin_pb2.StatusResponse:
            access.check_admin(self.ctx.plugins, context, "UpdateConsumerOffsets", self.ctx.broker_name)
            validate_group(request.group)
            tc = self._topic(request.topic)
            store = self.ctx.store
            for qid, offset in request.offsets.items():  # every offset is checked before any is written
                if not 0 <= qid < tc.read_queue_nums:
                    raise MQError(
                        Code.BAD_REQUEST, f"queue id {qid} of {tc.topic_name!r}: must be in [0, {tc.read_queue_nums})"
                    )
                high = store.get_max_offset_in_queue(tc.topic_name, qid)
                if not 0 <= offset <= high:
                    raise MQError(
                        Code.BAD_REQUEST, f"offset {offset} of {tc.topic_name!r} queue {qid}: must be in [0, {high}]"
                    )
            for qid, offset in request.offsets.items():
                self.ctx.offsets.set_reset_offset(request.group, tc.topic_name, qid, offset)
            self.ctx.offsets.persist()
            return admin_pb2.StatusResponse(status=_ok())

        return await guarded("UpdateConsumerOffsets", admin_pb2.StatusResponse, run, _status)

    async def GetBrokerConfig(self, request: Any, context: Any) -> admin_pb2.BrokerConfigResponse:
        async def run() -> admin_pb2.BrokerConfigResponse:
            access.check_admin(self.ctx.plugins, context, "GetBrokerConfig", self.ctx.broker_name)
            return admin_pb2.BrokerConfigResponse(status=_ok(), config=self._config_strings())

        return await guarded("GetBrokerConfig", admin_pb2.BrokerConfigResponse, run, _status)

    async def UpdateBrokerConfig(self, request: Any, context: Any) -> admin_pb2.BrokerConfigResponse:
        async def run() -> admin_pb2.BrokerConfigResponse:
            access.check_admin(self.ctx.plugins, context, "UpdateBrokerConfig", self.ctx.broker_name)
            if not request.updates:
                raise MQError(Code.BAD_REQUEST, "updates is empty: name at least one key")
            try:
                apply_runtime_updates(self.ctx.config, dict(request.updates), RUNTIME_UPDATABLE_KEYS)
            except ConfigError as exc:
                raise MQError(Code.BAD_REQUEST, str(exc)) from exc
            log.info("broker config updated at runtime", updates=dict(request.updates))
            return admin_pb2.BrokerConfigResponse(status=_ok(), config=self._config_strings())

        return await guarded("UpdateBrokerConfig", admin_pb2.BrokerConfigResponse, run, _status)

    async def BrokerStats(self, request: Any, context: Any) -> admin_pb2.BrokerStatsResponse:
        async def run() -> admin_pb2.BrokerStatsResponse:
            access.check_admin(self.ctx.plugins, context, "BrokerStats", self.ctx.broker_name)
            if self.ctx.stats is None:
                raise MQError(Code.INTERNAL_SERVER_ERROR, "stats are not running on this broker yet")
            if request.topic:
                self._topic(request.topic)  # TOPIC_NOT_FOUND names it
            rows = [
                admin_pb2.TopicStats(
                    topic=t.topic,
                    in_tps=t.in_tps,
                    in_24h=t.in_24h,
                    groups=[admin_pb2.GroupStats(**dataclasses.asdict(g)) for g in t.groups],
                )
                for t in self.ctx.stats.stats(request.topic or None)
            ]
            return admin_pb2.BrokerStatsResponse(status=_ok(), topics=rows)

        return await guarded("BrokerStats", admin_pb2.BrokerStatsResponse, run, _status)

    async def ListAclAccounts(self, request: Any, context: Any) -> admin_pb2.AclAccountsResponse:
        async def run() -> admin_pb2.AclAccountsResponse:
            access.check_admin(self.ctx.plugins, context, "ListAclAccounts", self.ctx.broker_name)
            accounts = [
                admin_pb2.AclAccount(
                    access_key=a.access_key,
                    admin=a.admin,
                    white_remote_address=a.white_remote_address,
                    default_topic_perm=a.default_topic_perm,
                    default_group_perm=a.default_group_perm,
                    topic_perms=dict(a.topic_perms),
                    group_perms=dict(a.group_perms),
                )
                for a in self.ctx.plugins.acl_accounts()
            ]
            return admin_pb2.AclAccountsResponse(status=_ok(), acl_enabled=self.ctx.config.aclEnable, accounts=accounts)

        return await guarded("ListAclAccounts", admin_pb2.AclAccountsResponse, run, _status)

    def _config_strings(self) -> dict[str, str]:
        return config_strings(self.ctx.config, self.ctx.store.config)


def _declares(client: ClientInfo, topic: str) -> bool:
    if not topic:
        return True
    settings = client.settings
    if settings is None:
        return topic in client.topics
    if settings.HasField("subscription"):
        return any(s.topic.name == topic for s in settings.subscription.subscriptions)
    return any(t.name == topic for t in settings.publishing.topics)


def _connection(client: ClientInfo, idle_ms: int) -> admin_pb2.ClientConnection:
    meta, settings = client.meta, client.settings
    row = admin_pb2.ClientConnection(
        client_id=client.client_id,
        client_type=definition_pb2.ClientType.Name(client.client_type),
        address=meta.peer_address if meta else "",
        language=meta.language if meta else "",
        version=meta.client_version if meta else "",
        group=client.group,
        last_heartbeat_ms_ago=idle_ms,
        connected=client.connected,
    )
    if settings is not None:
        row.settings_json = json_format.MessageToJson(settings, indent=None)
        if settings.HasField("subscription"):
            for sub in settings.subscription.subscriptions:
                row.subscriptions[sub.topic.name] = sub.expression.expression or "*"
        else:
            row.topics.extend(t.name for t in settings.publishing.topics)
    return row


def _now_ms() -> int:
    return int(time.time() * 1000)


def add_admin_service(server: grpc.aio.Server, ctx: BrokerContext) -> None:
    admin_pb2_grpc.add_AdminServicer_to_server(AdminServicer(ctx), server)
