"""SendMessage: validate every message, pick the queue (round robin, message-group hash for FIFO), store, reply.

Validation happens before anything is stored, so a refused request never changes the store (P14: the error
goes in the top-level status, one entry per message).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from rocketmq.grpc_protocol import definition_pb2, service_pb2

from broker.context import BrokerContext
from broker.grpc.convert import (
    body_sys_flag,
    declared_born_host,
    encode_v2_properties,
    from_v2_message,
    kind_of_v2,
    timestamp_to_ms,
)
from broker.store.message import MessageExtBrokerInner, java_string_hash, tags_hash_code
from broker.store.plain_batch import ColumnBatch
from broker.store.results import PutMessageResult, PutMessageStatus, PutResults
from broker.timer_service import deliver_ms_of, encode_recall_handle, to_delay_level, to_schedule
from broker.transaction_service import to_half
from orbitmq import message_const as mc
from orbitmq.delay import client_delay_level, parse_delay_levels
from orbitmq.errors import Code, MQError
from orbitmq.limits import MAX_BATCH_SIZE, MAX_SEND_BATCH_MESSAGES, MAX_TRANSACTION_RECOVERY_S
from orbitmq.route import PermName, TopicConfig, TopicMessageType
from orbitmq.v2.status import ok_status, status, status_from_error
from orbitmq.validation import (
    MessageKind,
    check_message_type,
    validate_body,
    validate_delivery_timestamp,
    validate_keys,
    validate_message_group,
    validate_properties_size,
    validate_tag,
    validate_topic,
    validate_user_properties,
)

_OK = ok_status()  # shared: protobuf copies it into each entry
# google.protobuf.Timestamp's valid range ends at 9999-12-31 (a ms value in .seconds lands far beyond it, P22).
MAX_TIMESTAMP_SECONDS = 253_402_300_799

_PUT_STATUS_CODES: dict[PutMessageStatus, int] = {
    PutMessageStatus.PUT_OK: Code.OK,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
    PutMessageStatus.SERVICE_NOT_AVAILABLE: Code.INTERNAL_SERVER_ERROR,
    PutMessageStatus.CREATE_MAPPED_FILE_FAILED: Code.INTERNAL_SERVER_ERROR,
    PutMessageStatus.MESSAGE_ILLEGAL: Code.BAD_REQUEST,
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: Code.MESSAGE_PROPERTIES_TOO_LARGE,
    PutMessageStatus.OS_PAGE_CACHE_BUSY: Code.TOO_MANY_REQUESTS,
    PutMessageStatus.UNKNOWN_ERROR: Code.INTERNAL_SERVER_ERROR,
}


def check_v2_fields(
    body: bytes, message_id: str, user: Mapping[str, str], tag: str | None, keys: Sequence[str], max_body_size: int
) -> None:
    """The checks of protocol-v2 §3.3 on a message's body, id, user properties, tag and keys (read once by the
    caller: protobuf field reads are what a batch of a thousand messages pays for)."""
    validate_body(body, max_body_size)
    if not message_id.strip():
        raise MQError(Code.ILLEGAL_MESSAGE_ID, "message_id is blank")
    size = validate_user_properties(user) if user else 0  # an empty protobuf map still costs a call and a loop
    if tag is not None:
        validate_tag(tag)
        size += len(tag.encode("utf-8"))
    if keys:
        validate_keys(keys)
        size += sum(len(k.encode("utf-8")) for k in keys)
    validate_properties_size(size)


def validate_v2_message(
    msg: definition_pb2.Message, max_body_size: int, max_delay_ms: int, now_ms: int, *, check_topic: bool = True
) -> None:
    """Every check of protocol-v2 §3.3 that needs only the message itself."""
    if check_topic:
        validate_topic(msg.topic.name)
    sp = msg.system_properties
    check_v2_fields(
        msg.body, sp.message_id, msg.user_properties, sp.tag if sp.HasField("tag") else None, sp.keys, max_body_size
    )
    if sp.HasField("message_group"):
        validate_message_group(sp.message_group)
    if sp.HasField("delivery_timestamp"):
        ts = sp.delivery_timestamp
        if ts.seconds < 0 or ts.seconds > MAX_TIMESTAMP_SECONDS:
            raise MQError(
                Code.ILLEGAL_DELIVERY_TIME,
                f"delivery_timestamp.seconds={ts.seconds} is not a valid timestamp (seconds since the epoch expected)",
            )
        validate_delivery_timestamp(timestamp_to_ms(ts), now_ms, max_delay_ms)
    if sp.HasField("orphaned_transaction_recovery_duration"):
        d = sp.orphaned_transaction_recovery_duration
        if d.seconds < 0 or d.nanos < 0 or d.seconds > MAX_TRANSACTION_RECOVERY_S:
            limit = MAX_TRANSACTION_RECOVERY_S
            raise MQError(
                Code.BAD_REQUEST, f"orphaned_transaction_recovery_duration is {d.seconds}s, the limit is {limit}s"
            )


class SendService:
    """Owns the per-topic round-robin counters (loop-only state)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._round_robin: dict[str, int] = {}
        self.levels = parse_delay_levels(ctx.config.messageDelayLevel)

    def _next_queue(self, tc: TopicConfig) -> int:
        n = max(1, tc.write_queue_nums)
        i = self._round_robin.get(tc.topic_name, -1) + 1
        self._round_robin[tc.topic_name] = i
        return i % n

    @staticmethod
    def _fifo_queue(tc: TopicConfig, message_group: str) -> int:
        return abs(java_string_hash(message_group) % max(1, tc.write_queue_nums))

    def _check(self, messages: Sequence[definition_pb2.Message]) -> TopicConfig:
        if not messages:
            raise MQError(Code.MESSAGE_CORRUPTED, "the request carries no message")
        if len(messages) > MAX_SEND_BATCH_MESSAGES:
            raise MQError(
                Code.MESSAGE_CORRUPTED, f"batch has {len(messages)} messages, the limit is {MAX_SEND_BATCH_MESSAGES}"
            )
        topic = messages[0].topic.name
        validate_topic(topic)  # once per batch: every message must carry this same topic
        total = 0
        now_ms = int(time.time() * 1000)
        cfg = self.ctx.config
        for m in messages:
            if m.topic.name != topic:
                raise MQError(Code.MESSAGE_CORRUPTED, "all messages of a batch must have the same topic")
            total += len(m.body)
            validate_v2_message(m, self.ctx.max_message_size, cfg.maxDelayTimeMills, now_ms, check_topic=False)
            raw_level = m.user_properties.get(mc.PROPERTY_CLIENT_DELAY_LEVEL)
            if raw_level is not None:
                client_delay_level(raw_level, len(self.levels))  # refuses a malformed level before anything is stored
        if len(messages) > 1 and total > MAX_BATCH_SIZE:
            raise MQError(
                Code.MESSAGE_BODY_TOO_LARGE, f"batch bodies take {total} bytes, the limit is {MAX_BATCH_SIZE} bytes"
            )
        kinds = {kind_of_v2(m) for m in messages}
        unsupported: set[MessageKind] = set()
        if MessageKind.DELAY in kinds and self.ctx.timer is None:
            unsupported.add(MessageKind.DELAY)
        if MessageKind.TRANSACTION in kinds and self.ctx.transactions is None:
            unsupported.add(MessageKind.TRANSACTION)
        if unsupported:
            # Stored as-is they would be consumable at once (no timer / half-message service yet): refuse clearly.
            names = ", ".join(sorted(k.value for k in unsupported))
            raise MQError(Code.NOT_IMPLEMENTED, f"{names} messages are not supported by this broker yet")
        tc = self.ctx.topics.get_or_auto_create(topic, _topic_type_for(kinds))
        if not PermName.is_writeable(tc.perm):
            raise MQError(Code.FORBIDDEN, f"topic {topic!r} is not writeable on broker {self.ctx.broker_name}")
        if cfg.enableTopicMessageTypeCheck:
            for kind in kinds:
                check_message_type(kind, tc.message_type.value, topic)
        return tc

    def _plain(self, messages: Sequence[definition_pb2.Message], born_host: tuple[str, int]) -> ColumnBatch | None:
        """The common request in one pass per message: normal messages only (no transaction, delivery time,
        message group or client delay level), checked by what ``_check`` and the general path use and read into
        the store's columns, without a message object, a properties dict or a result object per message. None
        when a message is anything else: the request then takes the general path from the start (its checks come
        first in the same order, so it raises what this would)."""
        if not messages or len(messages) > MAX_SEND_BATCH_MESSAGES:
            return None
        topic = messages[0].topic.name
        validate_topic(topic)
        max_body = self.ctx.max_message_size
        level_prop = mc.PROPERTY_CLIENT_DELAY_LEVEL
        transaction = definition_pb2.TRANSACTION
        bodies: list[bytes] = []
        propss: list[bytes] = []
        sys_flags: list[int] = []
        borns: list[int] = []
        hosts: list[tuple[str, int]] = []
        codes: list[int] = []
        ids: list[str] = []
        keys_col: list[str] = []
        now_ms = int(time.time() * 1000)  # the born time of messages that declare none
        declared, host = "", born_host
        total = 0
        for m in messages:
            sp = m.system_properties
            user = m.user_properties
            if (
                sp.message_type == transaction
                or sp.HasField("delivery_timestamp")
                or sp.HasField("message_group")
                or sp.HasField("orphaned_transaction_recovery_duration")
                or (user and level_prop in user)
            ):
                return None
            if m.topic.name != topic:
                raise MQError(Code.MESSAGE_CORRUPTED, "all messages of a batch must have the same topic")
            body, message_id, keys = m.body, sp.message_id, sp.keys
            tag = sp.tag if sp.HasField("tag") else None
            total += len(body)
            check_v2_fields(body, message_id, user, tag, keys, max_body)
            bodies.append(body)
            propss.append(encode_v2_properties(user, tag, keys, message_id))
            sys_flags.append(body_sys_flag(sp.body_encoding))
            borns.append(timestamp_to_ms(sp.born_timestamp) if sp.HasField("born_timestamp") else now_ms)
            if sp.born_host != declared:  # one client declares one host: one tuple for the whole request
                declared = sp.born_host
                host = declared_born_host(declared, born_host)
            hosts.append(host)
            codes.append(tags_hash_code(tag))
            ids.append(message_id)
            keys_col.append(mc.KEY_SEPARATOR.join(keys) if keys else "")
        if len(messages) > 1 and total > MAX_BATCH_SIZE:
            raise MQError(
                Code.MESSAGE_BODY_TOO_LARGE, f"batch bodies take {total} bytes, the limit is {MAX_BATCH_SIZE} bytes"
            )
        tc = self.ctx.topics.get_or_auto_create(topic, TopicMessageType.NORMAL)
        if not PermName.is_writeable(tc.perm):
            raise MQError(Code.FORBIDDEN, f"topic {topic!r} is not writeable on broker {self.ctx.broker_name}")
        if self.ctx.config.enableTopicMessageTypeCheck:
            check_message_type(MessageKind.NORMAL, tc.message_type.value, topic)
        queue_id = self._next_queue(tc)
        return ColumnBatch(
            topic, queue_id, bodies, propss, sys_flags, borns, hosts, codes, ids, keys_col, self.ctx.store_host
        )

    async def _send_plain(self, cols: ColumnBatch) -> service_pb2.SendMessageResponse:
        plugins = self.ctx.plugins
        results: Sequence[PutMessageResult]
        stored: Sequence[MessageExtBrokerInner] = cols
        if plugins.has_before_store:
            # a hook may change a message: the store, and the after-store hooks, take the objects the hooks saw
            inners = list(cols)
            for inner in inners:
                plugins.before_store(inner)  # an MQError refuses the request: nothing of it is stored
            results = await self.ctx.store.put_messages_aio(inners)
            stored = inners
        else:
            results = await self.ctx.store.put_plain_batch_aio(cols)
        ids = cols.unique_keys
        if plugins.has_after_store:
            for inner, result in zip(stored, results, strict=True):
                plugins.after_store(inner, result)
        if isinstance(results, PutResults) and _PUT_STATUS_CODES.get(results.status) == Code.OK:
            response = service_pb2.SendMessageResponse(status=_OK)
            add = response.entries.add
            for message_id, offset in zip(ids, results.queue_offsets, strict=True):
                add(status=_OK, message_id=message_id, offset=offset)
            return response
        return _response_for_ids(ids, [definition_pb2.NORMAL] * len(ids), results)

    async def send(
        self, request: service_pb2.SendMessageRequest, born_host: tuple[str, int] = ("127.0.0.1", 0)
    ) -> service_pb2.SendMessageResponse:
        messages = request.messages
        try:
            plain = self._plain(messages, born_host)
            if plain is not None:
                return await self._send_plain(plain)
            tc = self._check(messages)
        except MQError as exc:
            st = status_from_error(exc)
            entries = [
                service_pb2.SendResultEntry(status=st, message_id=m.system_properties.message_id) for m in messages
            ]
            return service_pb2.SendMessageResponse(status=st, entries=entries)
        shared_queue = self._next_queue(tc)
        inners = []
        scheduled: list[tuple[int, int]] = []  # (index, deliver_ms) of messages parked for the timer
        halves: list[int] = []  # indexes of half (transactional) messages
        leveled: list[tuple[int, int]] = []  # (index, deliver_ms) of messages parked by delay level
        now_ms = int(time.time() * 1000)
        for i, m in enumerate(messages):
            sp = m.system_properties
            qid = self._fifo_queue(tc, sp.message_group) if sp.HasField("message_group") else shared_queue
            inner = from_v2_message(m, born_host=born_host, store_host=self.ctx.store_host, queue_id=qid)
            deliver_ms = deliver_ms_of(inner.properties)
            raw_level = inner.properties.pop(mc.PROPERTY_CLIENT_DELAY_LEVEL, None)
            level = client_delay_level(raw_level, len(self.levels)) if raw_level is not None else 0
            if sp.message_type == definition_pb2.TRANSACTION:
                inner = to_half(inner)
                halves.append(i)
            elif level > 0:
                # A producer's delay level: parked in SCHEDULE_TOPIC_XXXX queue level-1 by this broker's ladder.
                leveled.append((i, to_delay_level(inner, level, self.levels, now_ms)))
            elif deliver_ms > now_ms:
                inner = to_schedule(inner)
                scheduled.append((i, deliver_ms))
            inners.append(inner)
        plugins = self.ctx.plugins
        if plugins.has_before_store:
            try:
                for inner in inners:
                    plugins.before_store(inner)
            except MQError as exc:  # a plugin refused the request: nothing of it is stored
                st = status_from_error(exc)
                entries = [
                    service_pb2.SendResultEntry(status=st, message_id=m.system_properties.message_id) for m in messages
                ]
                return service_pb2.SendMessageResponse(status=st, entries=entries)
        results: Sequence[PutMessageResult] = await self.ctx.store.put_messages_aio(inners)
        if plugins.has_after_store:
            for inner, result in zip(inners, results, strict=True):
                plugins.after_store(inner, result)
        timer, transactions = self.ctx.timer, self.ctx.transactions
        handles: dict[int, str] = {}
        for i, deliver_ms in scheduled:
            ar = results[i].append_result
            if timer is not None and ar is not None:
                timer.add(deliver_ms, ar.logics_offset, ar.wrote_offset, ar.wrote_bytes)
                handles[i] = encode_recall_handle(
                    tc.topic_name, self.ctx.broker_name, deliver_ms, messages[i].system_properties.message_id,
                    ar.logics_offset,
                )  # fmt: skip
        for i, deliver_ms in leveled:
            ar = results[i].append_result
            if timer is not None and ar is not None:
                timer.add(deliver_ms, ar.logics_offset, ar.wrote_offset, ar.wrote_bytes, queue_id=inners[i].queue_id)
        for i in halves:
            ar = results[i].append_result
            if transactions is not None and ar is not None:
                transactions.added(ar.wrote_offset, ar.wrote_bytes, tc.topic_name, ar.store_timestamp)
        response = _response(messages, results)
        for i, handle in handles.items():
            response.entries[i].recall_handle = handle
        return response


def _topic_type_for(kinds: set[MessageKind]) -> TopicMessageType:
    if len(kinds) == 1:
        return TopicMessageType(next(iter(kinds)).value)
    return TopicMessageType.MIXED


def _response(
    messages: Sequence[definition_pb2.Message], results: Sequence[PutMessageResult]
) -> service_pb2.SendMessageResponse:
    sps = [m.system_properties for m in messages]
    return _response_for_ids([sp.message_id for sp in sps], [sp.message_type for sp in sps], results)


def _response_for_ids(
    ids: Sequence[str], message_types: Sequence[int], results: Sequence[PutMessageResult]
) -> service_pb2.SendMessageResponse:
    response = service_pb2.SendMessageResponse()
    add = response.entries.add  # in-place adds: no temporary entry objects on the batch hot path
    codes: set[int] = set()
    for message_id, message_type, r in zip(ids, message_types, results, strict=True):
        code = _PUT_STATUS_CODES.get(r.status, Code.INTERNAL_SERVER_ERROR)
        codes.add(int(code))
        st = _OK if code == Code.OK else status(code, r.error or r.status.value)
        entry = add(status=st, message_id=message_id)
        if r.append_result is not None:
            entry.offset = r.append_result.logics_offset
            if message_type == definition_pb2.TRANSACTION:
                entry.transaction_id = r.append_result.msg_id
    if len(codes) == 1:
        response.status.CopyFrom(response.entries[0].status)
    else:
        response.status.CopyFrom(status(Code.MULTIPLE_RESULTS, "messages of the batch have different results"))
    return response
