"""Answers to 4.x clients' requests on the broker: each request code maps onto the store and the services the gRPC
protocol uses (topics, offsets, long polling, the retry service, the timer); business errors become RocketMQ's
response codes with a remark naming the field or the limit."""

from __future__ import annotations

import asyncio
import json
import os
import struct
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from broker.remoting import acl as remoting_acl
from broker.remoting.admin import RemotingAdmin
from broker.remoting.clients import RemotingClients
from broker.remoting.message_codec import decode_properties_string, encode_message
from broker.remoting.pop import RemotingPop
from broker.remoting.transaction import RemotingTransactions, is_half
from broker.retry_service import RetryService
from broker.store.message import MessageExtBrokerInner
from broker.store.results import GetMessageStatus, PutMessageStatus
from broker.timer_service import to_delay_level
from broker.transaction_service import to_half
from orbitmq import message_const as mc
from orbitmq.delay import client_delay_level, parse_delay_levels
from orbitmq.errors import Code, MQError
from orbitmq.limits import MAX_BATCH_SIZE, MAX_SEND_BATCH_MESSAGES
from orbitmq.logging import get_logger
from orbitmq.message_batch import decode_message_batch
from orbitmq.remoting.codec import FrameError, RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from orbitmq.route import READ_WRITE, PermName, TopicMessageType
from orbitmq.topics import is_retry_topic, retry_topic
from orbitmq.validation import validate_body, validate_group, validate_topic

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from broker.pop.service import PopService
    from orbitmq.remoting.server import RemotingServer

log = get_logger("broker.remoting")

PULL_FLAG_COMMIT_OFFSET = 0x1
PULL_FLAG_SUSPEND = 0x2
PULL_FLAG_SUBSCRIPTION = 0x4
MAX_PULL_MESSAGES = 32  # RocketMQ's default maxMsgNums
MAX_QUERY_MESSAGES = 64  # RocketMQ's defaultQueryMaxNum
# SendMessageRequestHeaderV2's one-letter names
_V2_HEADER_NAMES = {
    "a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums", "e": "queueId",
    "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties", "j": "reconsumeTimes", "k": "unitMode",
    "l": "maxReconsumeTimes", "m": "batch",
}  # fmt: skip
_PUT_CODES = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutMessageStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutMessageStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
}
_ERROR_CODES = {
    Code.TOPIC_NOT_FOUND: ResponseCode.TOPIC_NOT_EXIST,
    Code.FORBIDDEN: ResponseCode.NO_PERMISSION,
    Code.UNAUTHORIZED: ResponseCode.NO_PERMISSION,
    Code.CONSUMER_GROUP_NOT_FOUND: ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
    Code.MESSAGE_NOT_FOUND: ResponseCode.QUERY_NOT_FOUND,
}


def _peer_tuple(peer: str) -> tuple[str, int]:
    host, _, port = peer.rpartition(":")
    return (host or "127.0.0.1", int(port) if port.isdigit() else 0)


RequestHandler = Callable[[RemotingCommand, str], Awaitable[RemotingCommand | None]]
HOUSEKEEPING_INTERVAL_S = 10.0  # RocketMQ's ClientHousekeepingService scans every 10 s


class BrokerRemotingHandler:
    def __init__(self, ctx: BrokerContext, pop: PopService | None = None) -> None:
        self.ctx = ctx
        self.clients = RemotingClients(ctx.config.clientExpireMs / 1000)
        self.retry = RetryService(ctx)
        self.levels = parse_delay_levels(ctx.config.messageDelayLevel)
        self.server: RemotingServer | None = None  # set by attach(): the broker's own requests go out through it
        self._notifications: set[asyncio.Task[None]] = set()
        self.transactions = RemotingTransactions(ctx, self.clients, self._send_oneway)
        ctx.transaction_checkers.append(self.transactions.check)
        self._handlers: dict[int, RequestHandler] = {
            RequestCode.SEND_MESSAGE: self._send,
            RequestCode.SEND_MESSAGE_V2: self._send,
            RequestCode.PULL_MESSAGE: self._pull,
            RequestCode.HEART_BEAT: self._heartbeat,
            RequestCode.UNREGISTER_CLIENT: self._unregister,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self._consumer_list,
            RequestCode.QUERY_CONSUMER_OFFSET: self._query_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self._update_offset,
            RequestCode.GET_MAX_OFFSET: self._max_offset,
            RequestCode.GET_MIN_OFFSET: self._min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self._search_offset,
            RequestCode.CONSUMER_SEND_MSG_BACK: self._send_back,
            RequestCode.QUERY_MESSAGE: self._query_message,
            RequestCode.VIEW_MESSAGE_BY_ID: self._view_message,
            RequestCode.LOCK_BATCH_MQ: self._lock,
            RequestCode.UNLOCK_BATCH_MQ: self._unlock,
            RequestCode.END_TRANSACTION: self.transactions.end,
        }
        self._handlers.update(RemotingAdmin(ctx, self.clients).handlers())  # 4.x mqadmin's requests
        if pop is not None:  # RocketMQ 5's pop consumers, on the pop service v2 receivers use
            self.pop = RemotingPop(ctx, pop)
            self._handlers[RequestCode.POP_MESSAGE] = self.pop.pop_message
            self._handlers[RequestCode.ACK_MESSAGE] = self.pop.ack_message
            self._handlers[RequestCode.CHANGE_MESSAGE_INVISIBLETIME] = self.pop.change_invisible_time

    def attach(self, server: RemotingServer) -> None:
        """The listener this handler answers for: its connections carry check-backs and notifications, and a closed
        connection takes its clients with it (RocketMQ's channel close event)."""
        self.server = server
        server.on_disconnect = self._disconnected

    async def _send_oneway(self, peer: str, request: RemotingCommand) -> bool:
        return self.server is not None and await self.server.send_oneway(peer, request)

    async def housekeeping(self) -> None:
        """Expire clients not heard from within clientExpireMs, telling their groups' remaining consumers."""
        # a short clientExpireMs (tests) is honoured within a quarter of it
        interval = min(HOUSEKEEPING_INTERVAL_S, self.clients.expire_s / 4)
        while True:
            await asyncio.sleep(interval)
            gone = self.clients.expire()
            if gone:
                log.info("remoting clients expired", groups=sorted(gone))
                await self._notify_consumer_ids_changed(gone)

    def _disconnected(self, peer: str) -> None:
        gone = self.clients.disconnected(peer)
        if gone:
            self._notify_later(gone)

    def _notify_later(self, groups: set[str]) -> None:
        """Notify in the background: the request that changed the group is answered without waiting on the
        other members' connections."""
        task = asyncio.get_running_loop().create_task(self._notify_consumer_ids_changed(groups))
        self._notifications.add(task)
        task.add_done_callback(self._notifications.discard)

    async def _notify_consumer_ids_changed(self, groups: set[str]) -> None:
        """NOTIFY_CONSUMER_IDS_CHANGED, oneway, to every remoting consumer of each group (RocketMQ's
        DefaultConsumerIdsChangeListener): they rebalance now instead of at their next interval."""
        if not self.ctx.config.notifyConsumerIdsChangedEnable:
            return
        for group in sorted(groups):
            for client in self.clients.consumers(group):
                request = RemotingCommand(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ext_fields={"consumerGroup": group})
                await self._send_oneway(client.peer, request)

    async def __call__(self, cmd: RemotingCommand, peer: str) -> RemotingCommand | None:
        handler = self._handlers.get(cmd.code)
        if handler is None:
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {cmd.code} is not supported")
        try:
            if self.ctx.plugins.has_acl:
                remoting_acl.check(self.ctx.plugins, cmd, peer, self.ctx.broker_name)
            response: RemotingCommand | None = await handler(cmd, peer)
            return response
        except MQError as exc:  # a refusal: the closest RocketMQ code, the reason in the remark
            fallback = ResponseCode.MESSAGE_ILLEGAL if 40000 <= int(exc.code) < 50000 else ResponseCode.SYSTEM_ERROR
            return cmd.response(_ERROR_CODES.get(exc.code, fallback), exc.message)

    # -- produce -------------------------------------------------------------------------------------------------

    async def _send(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        h = cmd.ext_fields
        if cmd.code == RequestCode.SEND_MESSAGE_V2:
            h = {_V2_HEADER_NAMES.get(k, k): v for k, v in h.items()}
        topic = h.get("topic") or ""
        if not topic:
            raise FrameError("send: header field 'topic' is missing")
        validate_topic(topic)
        ctx = self.ctx
        tc = ctx.topics.get_or_auto_create(topic, TopicMessageType.NORMAL)
        if not PermName.is_writeable(tc.perm):
            return cmd.response(ResponseCode.NO_PERMISSION, f"topic {topic!r} is not writeable on this broker")
        qid = _int(h, "queueId", 0)
        n = max(1, tc.write_queue_nums)
        qid = qid % n if qid >= 0 else 0
        if h.get("batch") == "true":
            return await self._send_batch(cmd, h, topic, qid, peer)
        validate_body(cmd.body, ctx.max_message_size)
        props = decode_properties_string(h.get("properties", ""))
        # 4.x clients set the unique id themselves; one is made for those that do not (v2 consumers need one)
        props.setdefault(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, os.urandom(16).hex().upper())
        sys_flag = _int(h, "sysFlag", 0)
        half = is_half(props, sys_flag)
        if half:
            if ctx.transactions is None:
                # stored as a plain message it would be consumable before its producer commits: refuse it clearly
                return cmd.response(
                    ResponseCode.MESSAGE_ILLEGAL, "transactional messages are refused: this broker has no transactions"
                )
            if props.get(mc.PROPERTY_DELAY_TIME_LEVEL, "0") != "0":
                # RocketMQ 4's producer clears it for transactions; a commit is delivered at once
                return cmd.response(
                    ResponseCode.MESSAGE_ILLEGAL, "property 'DELAY': a transactional message cannot carry a delay level"
                )
            if h.get("producerGroup"):
                props.setdefault(mc.PROPERTY_PRODUCER_GROUP, h["producerGroup"])  # whom the check-back asks
        inner = MessageExtBrokerInner(
            topic=topic,
            body=cmd.body,
            queue_id=qid,
            properties=props,
            flag=_int(h, "flag", 0),
            sys_flag=sys_flag,
            born_timestamp=_int(h, "bornTimestamp", int(time.time() * 1000)),
            born_host=_peer_tuple(peer),
            store_host=ctx.store_host,
            reconsume_times=_int(h, "reconsumeTimes", 0),
        )
        deliver_ms = 0
        raw_level = props.pop(mc.PROPERTY_DELAY_TIME_LEVEL, None)
        if half:
            inner = to_half(inner)
        elif raw_level and raw_level != "0":
            level = client_delay_level(raw_level, len(self.levels))
            if ctx.timer is None:
                return cmd.response(ResponseCode.SERVICE_NOT_AVAILABLE, "this broker has no timer for delay levels")
            deliver_ms = to_delay_level(inner, level, self.levels, int(time.time() * 1000))
        plugins = ctx.plugins
        if plugins.has_before_store:  # the same message hooks as v2 sends: a plugin may stamp or refuse it
            plugins.before_store(inner)
        (result,) = await ctx.store.put_messages_aio([inner])
        if plugins.has_after_store:
            plugins.after_store(inner, result)
        ar = result.append_result
        if deliver_ms and ar is not None and ctx.timer is not None:
            ctx.timer.add(deliver_ms, ar.logics_offset, ar.wrote_offset, ar.wrote_bytes, queue_id=inner.queue_id)
        if half and ar is not None and ctx.transactions is not None:  # stored (even if a flush timed out): pending
            ctx.transactions.added(ar.wrote_offset, ar.wrote_bytes, topic, ar.store_timestamp)
        code = _PUT_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
        if ar is None:
            return cmd.response(code, result.error or result.status.value)
        return cmd.response(
            code,
            None if code == ResponseCode.SUCCESS else (result.error or result.status.value),
            msgId=ar.msg_id,
            queueId=qid,
            # a half message: its offset in the half topic, what END_TRANSACTION's tranStateTableOffset names
            queueOffset=ar.logics_offset,
            transactionId=props[mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] if half else None,
        )

    async def _send_batch(
        self, cmd: RemotingCommand, h: dict[str, str], topic: str, qid: int, peer: str
    ) -> RemotingCommand:
        """A 4.x batch (MessageDecoder.encodeMessages: the MessageBatch layout) into one queue; one id per message."""
        ctx = self.ctx
        entries = decode_message_batch(cmd.body, _count_entries(cmd.body), MAX_SEND_BATCH_MESSAGES, crc_optional=True)
        total = 0
        inners = []
        for i, e in enumerate(entries):
            validate_body(e.body, ctx.max_message_size)
            total += len(e.body)
            props = dict(e.properties)
            if mc.PROPERTY_DELAY_TIME_LEVEL in props:
                raise MQError(Code.BAD_REQUEST, f"message {i} of the batch: batches cannot carry a delay level")
            if is_half(props, _int(h, "sysFlag", 0)):
                # stored plain it would be consumable before its commit; RocketMQ's producer never batches them
                raise MQError(Code.BAD_REQUEST, f"message {i} of the batch: transactional messages cannot be batched")
            props.setdefault(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, os.urandom(16).hex().upper())
            inners.append(
                MessageExtBrokerInner(
                    topic=topic,
                    body=e.body,
                    queue_id=qid,
                    properties=props,
                    flag=e.flag,
                    born_timestamp=_int(h, "bornTimestamp", int(time.time() * 1000)),
                    born_host=_peer_tuple(peer),
                    store_host=ctx.store_host,
                )
            )
        if total > MAX_BATCH_SIZE:
            raise MQError(
                Code.MESSAGE_BODY_TOO_LARGE, f"batch bodies take {total} bytes, the limit is {MAX_BATCH_SIZE}"
            )
        plugins = ctx.plugins
        if plugins.has_before_store:  # a refusal of one message refuses the batch: nothing of it is stored
            for inner in inners:
                plugins.before_store(inner)
        results = await ctx.store.put_messages_aio(inners)
        if plugins.has_after_store:
            for inner, result in zip(inners, results, strict=True):
                plugins.after_store(inner, result)
        bad = next((r for r in results if not r.ok), None)
        if bad is not None:
            return cmd.response(_PUT_CODES.get(bad.status, ResponseCode.SYSTEM_ERROR), bad.error or bad.status.value)
        first = results[0].append_result
        assert first is not None
        ids = ",".join(r.append_result.msg_id for r in results if r.append_result is not None)
        return cmd.response(ResponseCode.SUCCESS, None, msgId=ids, queueId=qid, queueOffset=first.logics_offset)

    # -- consume -------------------------------------------------------------------------------------------------

    async def _pull(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        ctx = self.ctx
        group, topic = cmd.field("consumerGroup"), cmd.field("topic")
        validate_group(group)
        validate_topic(topic, allow_system=is_retry_topic(topic))
        qid, offset = cmd.int_field("queueId"), cmd.int_field("queueOffset")
        flags = cmd.int_field("sysFlag", 0)
        batch = max(1, min(cmd.int_field("maxMsgNums", MAX_PULL_MESSAGES), MAX_PULL_MESSAGES))
        if ctx.topics.get(topic) is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic!r} does not exist on this broker")
        reset = ctx.offsets.query_then_erase_reset_offset(group, topic, qid)
        if reset is not None and reset != offset:
            # an admin reset the group's offset: the consumer moves there, and its stale commit is not taken
            return cmd.response(
                ResponseCode.PULL_OFFSET_MOVED,
                f"the offset of queue {qid} was reset to {reset}",
                nextBeginOffset=reset,
                minOffset=ctx.store.get_min_offset_in_queue(topic, qid),
                maxOffset=ctx.store.get_max_offset_in_queue(topic, qid),
                suggestWhichBrokerId=0,
            )
        committing = flags & PULL_FLAG_COMMIT_OFFSET and cmd.int_field("commitOffset", 0) > 0
        if committing and reset is None and not ctx.config.is_slave:  # a reset to here wins over the commit
            ctx.offsets.commit_offset(group, topic, qid, cmd.int_field("commitOffset"))
        expression = cmd.ext_fields.get("subscription") if flags & PULL_FLAG_SUBSCRIPTION else None
        if expression is None:
            expression = self.clients.subscription(group, topic)
        msg_filter = None
        if expression and expression.strip() != "*":
            expr_type = cmd.ext_fields.get("expressionType") or "TAG"
            msg_filter = ctx.compiled_filter(group, topic, expr_type, expression)
        suspend_s = cmd.int_field("suspendTimeoutMillis", 0) / 1000 if flags & PULL_FLAG_SUSPEND else 0.0
        deadline = time.monotonic() + min(suspend_s, ctx.config.longPollingMaxMs / 1000)
        while True:
            result = ctx.store.get_message(group, topic, qid, offset, batch, msg_filter)
            header = {"minOffset": result.min_offset, "maxOffset": result.max_offset, "suggestWhichBrokerId": 0}
            status = result.status
            if status is GetMessageStatus.FOUND:
                response = cmd.response(ResponseCode.SUCCESS, nextBeginOffset=result.next_begin_offset, **header)
                response.body = b"".join(encode_message(m) for m in result.messages)
                return response
            if status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY):
                return cmd.response(
                    ResponseCode.PULL_OFFSET_MOVED,
                    f"offset {offset} is outside [{result.min_offset}, {result.max_offset}] of queue {qid}",
                    nextBeginOffset=result.next_begin_offset,
                    **header,
                )
            if status in (GetMessageStatus.NO_MATCHED_MESSAGE, GetMessageStatus.MESSAGE_CORRUPTED):
                return cmd.response(
                    ResponseCode.PULL_RETRY_IMMEDIATELY,
                    status.value,
                    nextBeginOffset=result.next_begin_offset,
                    **header,
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                next_offset = offset if status is not GetMessageStatus.NO_MATCHED_LOGIC_QUEUE else 0
                return cmd.response(ResponseCode.PULL_NOT_FOUND, status.value, nextBeginOffset=next_offset, **header)
            await ctx.long_polling.wait(topic, qid, offset, remaining)

    async def _heartbeat(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        try:
            data = json.loads(cmd.body or b"{}")
        except ValueError as exc:
            raise FrameError(f"HEART_BEAT body is not JSON: {exc}") from None
        ctx = self.ctx
        for consumer in data.get("consumerDataSet") or []:
            group = str(consumer.get("groupName", ""))
            validate_group(group)
            gc = ctx.groups.get_or_auto_create(group)
            # 4.x consumers pull their group's retry topic from the start, as RocketMQ's heartbeat creates it
            if ctx.topics.get(retry_topic(group)) is None:
                ctx.topics.create_internal(retry_topic(group), max(1, gc.retry_queue_nums), READ_WRITE)
        creds = remoting_acl.credentials(cmd) if ctx.plugins.has_acl else None  # checked in __call__ already
        changed = self.clients.heartbeat(data, peer, cmd.language, cmd.version, creds)
        if changed:
            log.info("remoting consumers changed", groups=sorted(changed), client=data.get("clientID"))
            self._notify_later(changed)
        return cmd.response(ResponseCode.SUCCESS)

    async def _unregister(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        h = cmd.ext_fields
        gone = self.clients.unregister(cmd.field("clientID"), h.get("consumerGroup", ""), h.get("producerGroup", ""))
        if gone:
            self._notify_later(gone)
        return cmd.response(ResponseCode.SUCCESS)

    async def _consumer_list(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        group = cmd.field("consumerGroup")
        ids = set(self.clients.consumer_ids(group))
        ids |= {c.client_id for c in self.ctx.telemetry.clients(group=group) if not c.is_producer}
        if not ids:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no consumer of group {group!r} is online")
        response = cmd.response(ResponseCode.SUCCESS)
        response.body = json.dumps({"consumerIdList": sorted(ids)}).encode()
        return response

    async def _query_offset(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        group, topic, qid = cmd.field("consumerGroup"), cmd.field("topic"), cmd.int_field("queueId")
        offset = self.ctx.offsets.query_offset(group, topic, qid)
        if offset < 0:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"group {group!r} has no offset on {topic}:{qid}")
        return cmd.response(ResponseCode.SUCCESS, offset=offset)

    async def _update_offset(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        group, topic = cmd.field("consumerGroup"), cmd.field("topic")
        validate_group(group)
        self.ctx.offsets.commit_offset(group, topic, cmd.int_field("queueId"), cmd.int_field("commitOffset"))
        return cmd.response(ResponseCode.SUCCESS)

    async def _max_offset(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        offset = self.ctx.store.get_max_offset_in_queue(cmd.field("topic"), cmd.int_field("queueId"))
        return cmd.response(ResponseCode.SUCCESS, offset=offset)

    async def _min_offset(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        offset = self.ctx.store.get_min_offset_in_queue(cmd.field("topic"), cmd.int_field("queueId"))
        return cmd.response(ResponseCode.SUCCESS, offset=offset)

    async def _search_offset(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        store = self.ctx.store
        offset = store.get_offset_in_queue_by_time(
            cmd.field("topic"), cmd.int_field("queueId"), cmd.int_field("timestamp")
        )
        return cmd.response(ResponseCode.SUCCESS, offset=offset)

    async def _query_message(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        """Messages of a topic by key (or unique id) in a time range, through the index (mqadmin queryMsgByKey)."""
        topic, key = cmd.field("topic"), cmd.field("key")
        max_num = max(1, min(cmd.int_field("maxNum", 32), MAX_QUERY_MESSAGES))
        begin, end = cmd.int_field("beginTimestamp", 0), cmd.int_field("endTimestamp", int(time.time() * 1000))
        store = self.ctx.store
        found = await asyncio.to_thread(store.query_message, topic, key, max_num, begin, end)
        if not found:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"no message of {topic!r} with key {key!r}")
        response = cmd.response(
            ResponseCode.SUCCESS,
            None,
            indexLastUpdateTimestamp=max(m.store_timestamp for m in found),
            indexLastUpdatePhyoffset=max(m.commitlog_offset for m in found),
        )
        response.body = b"".join(encode_message(m) for m in found)
        return response

    async def _view_message(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        """The message at a commitlog offset (what an offset message id names)."""
        found = self.ctx.store.look_message_by_offset(cmd.int_field("offset"))
        if found is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no message at commitlog offset {cmd.field('offset')}")
        response = cmd.response(ResponseCode.SUCCESS)
        response.body = encode_message(found)
        return response

    async def _lock(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        """Orderly consumers' queue leases (the same ones gRPC LockQueues takes): the set actually locked."""
        body = _json_body(cmd)
        group, client = str(body.get("consumerGroup", "")), str(body.get("clientId", ""))
        validate_group(group)
        lease_s = self.ctx.config.rebalanceLockMaxLiveTime / 1000
        locked = []
        for topic, mqs in _by_topic(body.get("mqSet") or []).items():
            held = set(self.ctx.queue_locks.try_lock(group, topic, client, [int(q["queueId"]) for q in mqs], lease_s))
            locked += [q for q in mqs if int(q["queueId"]) in held]
        response = cmd.response(ResponseCode.SUCCESS)
        response.body = json.dumps({"lockOKMQSet": locked}).encode()
        return response

    async def _unlock(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        body = _json_body(cmd)
        group, client = str(body.get("consumerGroup", "")), str(body.get("clientId", ""))
        for topic, mqs in _by_topic(body.get("mqSet") or []).items():
            self.ctx.queue_locks.unlock(group, topic, client, [int(q["queueId"]) for q in mqs])
        return cmd.response(ResponseCode.SUCCESS)

    async def _send_back(self, cmd: RemotingCommand, peer: str) -> RemotingCommand:
        group = cmd.field("group")
        commitlog_offset = cmd.int_field("offset")
        stored = self.ctx.store.look_message_by_offset(commitlog_offset)
        topic = stored.topic if stored is not None else cmd.field("originTopic")
        await self.retry.send_back(
            group,
            topic,
            commitlog_offset,
            cmd.int_field("delayLevel", 0),
            cmd.int_field("maxReconsumeTimes", 0),
        )
        return cmd.response(ResponseCode.SUCCESS)


def _int(header: dict[str, str], name: str, default: int) -> int:
    raw = header.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise FrameError(f"send: header field {name!r} is not a number: {raw!r}") from None


def _json_body(cmd: RemotingCommand) -> dict[str, Any]:
    try:
        body = json.loads(cmd.body or b"{}")
    except ValueError as exc:
        raise FrameError(f"request code {cmd.code}: the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise FrameError(f"request code {cmd.code}: the body is not a JSON object")
    return body


def _by_topic(mqs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for mq in mqs:
        out.setdefault(str(mq.get("topic", "")), []).append(mq)
    return out


def _count_entries(payload: bytes) -> int:
    """How many messages a batch body holds, by walking their total sizes (decode_message_batch checks the rest)."""
    pos = n = 0
    while pos + 4 <= len(payload):
        (total,) = struct.unpack_from(">i", payload, pos)
        if total <= 0:
            break
        pos += total
        n += 1
    return max(n, 1)
