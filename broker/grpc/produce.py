"""``orbitmq.produce.Produce/SendBatch``: RocketMQ's batch send over gRPC (one MessageBatch payload per request).

Same rules as v2 SendMessage for a batch of normal messages (topic, body, tag, keys, user properties, 4 MiB of
bodies, topic type and permission, ACL, store hooks); the batch goes to one queue, contiguously, or not at all.
Delay, transaction and FIFO properties are refused: those go through v2 SendMessage (RocketMQ's batches refuse them
too).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from broker import access
from broker.context import BrokerContext
from broker.grpc.errors import guarded
from broker.grpc.send import _PUT_STATUS_CODES
from broker.grpc.servicer import _peer
from broker.hookspecs import Action
from broker.store.message import MessageExtBrokerInner, inner_batch_message, tags_hash_code
from broker.store.plain_batch import PlainBatch
from broker.store.results import PutMessageResult, PutResults
from orbitmq import message_const as mc
from orbitmq.errors import Code, MQError
from orbitmq.limits import MAX_BATCH_SIZE, MAX_SEND_BATCH_MESSAGES
from orbitmq.message_batch import (
    BatchEntry,
    ScannedBatch,
    decode_message_batch,
    encode_message_batch,
    scan_message_batch,
)
from orbitmq.proto import produce_pb2, produce_pb2_grpc
from orbitmq.route import CQType, PermName, TopicConfig, TopicMessageType
from orbitmq.validation import (
    PLAIN_BATCH_PROPERTIES,
    MessageKind,
    check_message_type,
    validate_body,
    validate_keys,
    validate_properties_size,
    validate_tag,
    validate_topic,
    validate_user_properties,
)

_TAGS, _KEYS, _UNIQ = mc.PROPERTY_TAGS, mc.PROPERTY_KEYS, mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX


def _tags_codes(tags: list[bytes | None]) -> list[int]:
    """Tag hash codes of a scanned batch; a batch mostly repeats a few tags, each hashed once."""
    known: dict[bytes | None, int] = {None: 0}
    out: list[int] = []
    add = out.append
    for tag in tags:
        code = known.get(tag)
        if code is None:
            code = known[tag] = tags_hash_code(tag.decode("ascii")) if tag is not None else 0
        add(code)
    return out


def _status(code: int, message: str = "") -> produce_pb2.Status:
    return produce_pb2.Status(code=int(code), message=message)


def validate_batch_message(entry: BatchEntry, index: int, max_body_size: int) -> None:
    """The v2 checks of one message, on its stored properties; errors name the message's index in the batch."""
    try:
        validate_body(entry.body, max_body_size)
        props = entry.properties
        uniq = props.get(_UNIQ)
        if uniq is None or not uniq.strip():
            raise MQError(Code.ILLEGAL_MESSAGE_ID, f"property {_UNIQ} (the message id) is missing or blank")
        size = 0
        tag = props.get(_TAGS)
        if tag is not None:
            validate_tag(tag)
            size += len(tag.encode("utf-8"))
        keys = props.get(_KEYS)
        if keys is not None:
            split = keys.split(mc.KEY_SEPARATOR)
            validate_keys(split)
            size += sum(len(k.encode("utf-8")) for k in split)
        n_system = 1 + (tag is not None) + (keys is not None)
        if len(props) > n_system:
            # what a batch message may carry besides user properties; anything else reserved the user check refuses
            size += validate_user_properties({k: v for k, v in props.items() if k not in mc.BATCH_SYSTEM_PROPERTIES})
        validate_properties_size(size)
    except MQError as exc:
        raise MQError(exc.code, f"message {index} of the batch: {exc.message}") from exc


class ProduceServicer(produce_pb2_grpc.ProduceServicer):
    """Owns its round-robin counters (loop-only state), like v2 SendMessage's ``SendService``."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx
        self._round_robin: dict[str, int] = {}

    def _queue_for(self, tc: TopicConfig, requested: int) -> int:
        n = max(1, tc.write_queue_nums)
        if requested < 0:
            i = self._round_robin.get(tc.topic_name, -1) + 1
            self._round_robin[tc.topic_name] = i
            return i % n
        if requested >= n:
            raise MQError(Code.BAD_REQUEST, f"queue_id {requested} is outside [0, {n}) of topic {tc.topic_name!r}")
        return requested

    def _topic(self, topic: str) -> TopicConfig:
        tc = self.ctx.topics.get_or_auto_create(topic, TopicMessageType.NORMAL)
        if not PermName.is_writeable(tc.perm):
            raise MQError(Code.FORBIDDEN, f"topic {topic!r} is not writeable on broker {self.ctx.broker_name}")
        if self.ctx.config.enableTopicMessageTypeCheck:
            check_message_type(MessageKind.NORMAL, tc.message_type.value, topic)
        return tc

    async def SendBatch(self, request: produce_pb2.SendBatchRequest, context: Any) -> produce_pb2.SendBatchResponse:
        async def run() -> produce_pb2.SendBatchResponse:
            topic = request.topic
            access.check(self.ctx.plugins, context, "SendBatch", access.topic(topic, Action.PUB))
            validate_topic(topic)
            max_body = self.ctx.max_message_size
            plain = self._scan_plain(request, max_body)
            if plain is not None:
                tc = self._topic(topic)
                queue_id = self._queue_for(tc, request.queue_id)
                born = request.born_timestamp_ms or int(time.time() * 1000)
                codes = _tags_codes(plain.tags)
                if tc.cq_type is CQType.BATCH:
                    response, _ = await self._put_inner_batch(
                        topic, queue_id, request.messages, codes, born, _peer(context)
                    )
                    return response
                batch = PlainBatch(
                    topic, queue_id, request.messages, plain, codes, born, _peer(context), self.ctx.store_host
                )
                return self._answer(queue_id, await self.ctx.store.put_plain_batch_aio(batch))
            entries = decode_message_batch(request.messages, request.count, MAX_SEND_BATCH_MESSAGES)
            total = 0
            for i, entry in enumerate(entries):
                validate_batch_message(entry, i, max_body)
                total += len(entry.body)
            if total > MAX_BATCH_SIZE:
                raise MQError(
                    Code.MESSAGE_BODY_TOO_LARGE, f"batch bodies take {total} bytes, the limit is {MAX_BATCH_SIZE} bytes"
                )
            tc = self._topic(topic)
            queue_id = self._queue_for(tc, request.queue_id)
            return await self._store(request, tc, queue_id, entries, _peer(context))

        return await guarded("SendBatch", produce_pb2.SendBatchResponse, run, _status)

    def _scan_plain(self, request: produce_pb2.SendBatchRequest, max_body: int) -> ScannedBatch | None:
        """The fast check of a batch whose every message is plain (an id, maybe a tag, keys, user properties:
        ``PLAIN_BATCH_PROPERTIES``) when no store hook may look at the messages: stored without per-message objects
        (one inner-batch record on a BatchCQ topic, records straight from the payload otherwise). None sends the
        batch through the full decode and checks, which name what is wrong."""
        plugins = self.ctx.plugins
        if plugins.has_before_store or plugins.has_after_store:
            return None
        scanned = scan_message_batch(
            request.messages, request.count, MAX_SEND_BATCH_MESSAGES, max_body, PLAIN_BATCH_PROPERTIES
        )
        if scanned is None or scanned.body_bytes > MAX_BATCH_SIZE:
            return None
        return scanned

    async def _store(
        self,
        request: produce_pb2.SendBatchRequest,
        tc: TopicConfig,
        queue_id: int,
        entries: list[BatchEntry],
        born_host: tuple[str, int],
    ) -> produce_pb2.SendBatchResponse:
        born = request.born_timestamp_ms or int(time.time() * 1000)
        store_host = self.ctx.store_host
        topic = tc.topic_name
        if tc.cq_type is CQType.BATCH:
            return await self._store_inner_batch(request, topic, queue_id, entries, born, born_host)
        inners = [
            MessageExtBrokerInner(
                topic,
                e.body,
                queue_id,
                e.properties,
                flag=e.flag,
                born_timestamp=born,
                born_host=born_host,
                store_host=store_host,
            )
            for e in entries
        ]
        plugins = self.ctx.plugins
        if plugins.has_before_store:
            for inner in inners:
                plugins.before_store(inner)  # an MQError refuses the whole batch before anything is stored
        # The wire bytes of the properties are stored as they came unless a plugin may have changed the messages.
        raws = None if plugins.has_before_store else [e.raw_properties for e in entries]
        results = await self.ctx.store.put_messages_aio(inners, raws)
        if plugins.has_after_store:
            for inner, result in zip(inners, results, strict=True):
                plugins.after_store(inner, result)
        return self._answer(queue_id, results)

    async def _store_inner_batch(
        self,
        request: produce_pb2.SendBatchRequest,
        topic: str,
        queue_id: int,
        entries: list[BatchEntry],
        born: int,
        born_host: tuple[str, int],
    ) -> produce_pb2.SendBatchResponse:
        """A BatchCQ topic: the batch as one inner-batch record (RocketMQ 5), its messages at consecutive offsets."""
        plugins = self.ctx.plugins
        payload = request.messages
        if plugins.has_before_store or plugins.has_after_store:
            inners = [
                MessageExtBrokerInner(
                    topic, e.body, queue_id, e.properties, flag=e.flag, born_timestamp=born, born_host=born_host
                )
                for e in entries
            ]
            if plugins.has_before_store:
                for inner in inners:
                    plugins.before_store(inner)  # an MQError refuses the whole batch before anything is stored
                # A plugin may have changed the messages: store what it left.
                entries = [BatchEntry(m.flag, m.body, m.properties) for m in inners]
                payload = encode_message_batch(entries)
        codes = [tags_hash_code(e.properties.get(_TAGS)) for e in entries]
        response, results = await self._put_inner_batch(topic, queue_id, payload, codes, born, born_host)
        if not plugins.has_after_store:
            return response
        result = results[0]
        stored = result.append_result
        for i, inner in enumerate(inners):
            share = result
            if stored is not None:
                share = replace(result, append_result=replace(stored, logics_offset=stored.logics_offset + i))
            plugins.after_store(inner, share)
        return response

    async def _put_inner_batch(
        self,
        topic: str,
        queue_id: int,
        payload: bytes,
        tags_codes: list[int],
        born: int,
        born_host: tuple[str, int],
    ) -> tuple[produce_pb2.SendBatchResponse, Sequence[PutMessageResult]]:
        """Store ``payload`` as one inner-batch record; the response and the record's put result."""
        max_size = self.ctx.max_message_size
        if len(payload) > max_size:
            raise MQError(
                Code.MESSAGE_BODY_TOO_LARGE,
                f"batch is {len(payload)} bytes encoded, maxMessageSize is {max_size} bytes "
                f"(topic {topic!r} is {CQType.BATCH.value}: a batch is stored as one record)",
            )
        record = inner_batch_message(
            topic,
            queue_id,
            payload,
            tags_codes,
            born_timestamp=born,
            born_host=born_host,
            store_host=self.ctx.store_host,
        )
        results = await self.ctx.store.put_messages_aio([record])
        response = self._answer(queue_id, results)
        if response.commitlog_offsets:  # every message of the batch lives in the one record
            response.commitlog_offsets.extend([response.commitlog_offsets[0]] * (len(tags_codes) - 1))
        return response, results

    @staticmethod
    def _answer(queue_id: int, results: Sequence[PutMessageResult]) -> produce_pb2.SendBatchResponse:
        response = produce_pb2.SendBatchResponse(queue_id=queue_id)
        codes = _PUT_STATUS_CODES
        if isinstance(results, PutResults):  # one status for all: no result object per message
            bad = results[0] if results and codes.get(results.status) != Code.OK else None
        else:
            bad = next((r for r in results if codes.get(r.status) != Code.OK), None)
        if bad is None:
            response.status.code = Code.OK
        else:  # e.g. a flush timeout: the records are stored, the status says they may not be durable
            code = codes.get(bad.status, Code.INTERNAL_SERVER_ERROR)
            response.status.CopyFrom(_status(code, bad.error or bad.status.value))
        if isinstance(results, PutResults):
            if results.queue_offsets:
                response.first_queue_offset = results.queue_offsets[0]
                response.commitlog_offsets.extend(results.commitlog_offsets)
            return response
        stored = [r.append_result for r in results if r.append_result is not None]
        if stored:
            response.first_queue_offset = stored[0].logics_offset
            response.commitlog_offsets.extend([ar.wrote_offset for ar in stored])
        return response
