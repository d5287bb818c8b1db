"""``BytesMessage`` <-> v2 ``Message``: the explicit header mappings (tag, keys, delay, message group, TTL...).

Outbound validation reuses ``orbitmq.validation`` so the client refuses what the broker would, before sending.
"""

from __future__ import annotations

import functools
import gzip
import time
import zlib
from collections.abc import Callable, Mapping, Sequence

from google.protobuf import timestamp_pb2
from rocketmq.grpc_protocol import definition_pb2

from oms.client.identity import new_message_id
from oms.errors import OMSMessageFormatException, OMSNotSupportedException, from_mq_error
from oms.keys import BuiltinKeys, NonStandardKeys
from oms.message import BytesMessage
from orbitmq import message_const as mc
from orbitmq.delay import delay_ms
from orbitmq.errors import Code, MQError
from orbitmq.limits import MAX_DELAY_TIME_MS
from orbitmq.validation import (
    validate_body,
    validate_keys,
    validate_message_group,
    validate_properties_size,
    validate_tag,
    validate_topic,
    validate_user_properties,
)

COMPRESS_LEVEL = 5  # RocketMQ's default compressMsgBodyLevel (zlib)

# Sys headers a received message carries; sending such a message again ignores them.
_RECEIVED_ONLY = frozenset(
    {
        BuiltinKeys.MESSAGE_ID,
        BuiltinKeys.RECEIPT_HANDLE,
        BuiltinKeys.BORN_TIMESTAMP,
        BuiltinKeys.BORN_HOST,
        BuiltinKeys.STORE_TIMESTAMP,
        BuiltinKeys.STORE_HOST,
        BuiltinKeys.REDELIVERED_NUMBER,
        BuiltinKeys.REDELIVERED_REASON,
        BuiltinKeys.TRANSACTION_ID,
        BuiltinKeys.QUEUE_ID,
        BuiltinKeys.QUEUE_OFFSET,
    }
)
_UNSUPPORTED = {
    BuiltinKeys.STOP_TIME: "a delivery window end is not supported by RocketMQ",
    BuiltinKeys.TIMEOUT: "per-message TTL is not supported by the v2 protocol (TIMEOUT in send attributes is "
    "the send timeout)",
    BuiltinKeys.PRIORITY: "message priority is not supported by this broker",
    BuiltinKeys.SCHEDULE_EXPRESSION: "cron delivery is not supported; use START_TIME or a delay level",
    BuiltinKeys.SHARDING_PARTITION: "choose a queue with a selector instead",
}
_TAG_KEYS = (NonStandardKeys.TAGS, mc.PROPERTY_TAGS)
_KEY_KEYS = (NonStandardKeys.KEYS, mc.PROPERTY_KEYS)
_GROUP_KEYS = (BuiltinKeys.STREAM_KEY, BuiltinKeys.SHARDING_KEY, NonStandardKeys.SHARDING_KEY, mc.PROPERTY_SHARDING_KEY)
_DELAY_KEYS = (NonStandardKeys.DELAY_TIME_LEVEL, mc.PROPERTY_DELAY_TIME_LEVEL)
# Headers to_wire reads as message fields (topic, tag, keys, group, delivery time, trace), never as properties.
MAPPED_HEADERS = frozenset(
    {BuiltinKeys.DESTINATION, BuiltinKeys.SEARCH_KEYS, BuiltinKeys.START_TIME, BuiltinKeys.TRACE_ID}
    | set(_TAG_KEYS)
    | set(_KEY_KEYS)
    | set(_GROUP_KEYS)
    | set(_DELAY_KEYS)
)


class WireMessage:
    """A validated message ready for sending; ``body`` is the body on the wire (after compression).

    The v2 protobuf ``pb`` is built on first use: ``Produce/SendBatch`` sends plain messages without it.
    ``source`` is None for the rows of ``Producer.send_columns`` (no message object exists for them).
    """

    __slots__ = ("_make", "_pb", "batch_properties", "body", "message_id", "message_type", "source", "topic")

    def __init__(
        self,
        source: BytesMessage | None,
        topic: str,
        message_type: int,
        body: bytes,
        message_id: str,
        make: Callable[[WireMessage], definition_pb2.Message],
        batch_properties: dict[str, str] | None = None,
    ) -> None:
        self.source = source
        self.topic = topic
        self.message_type = message_type
        self.body = body
        self.message_id = message_id
        # A plain message (normal, uncompressed, no namespace) as ``Produce/SendBatch`` stores it: the properties
        # the broker's v2 conversion would store, so either path stores the same record. None: v2 SendMessage only.
        self.batch_properties = batch_properties
        self._make: Callable[[WireMessage], definition_pb2.Message] | None = make
        self._pb: definition_pb2.Message | None = None

    @property
    def body_size(self) -> int:
        return len(self.body)

    @property
    def pb(self) -> definition_pb2.Message:
        """The v2 message (built once; ordered sends change its system properties in place)."""
        if self._pb is None:
            assert self._make is not None
            self._pb, self._make = self._make(self), None
        return self._pb


def _format_error(key: str, why: str, code: int = Code.BAD_REQUEST) -> OMSMessageFormatException:
    return OMSMessageFormatException(code, f"header {key}: {why}")


def _first(message: BytesMessage, keys: tuple[str, ...], present: set[str]) -> tuple[str, str] | None:
    """The first of ``keys`` set in the sys headers, then the user headers; ``present``: every header name set."""
    if present.isdisjoint(keys):  # the usual case, without a lookup per name and map
        return None
    for headers in (message.sys_headers(), message.user_headers()):
        for key in keys:
            value = headers.get(key)
            if value is not None:
                return key, value
    return None


def _timestamp_ms(ms: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def _delivery_ms(message: BytesMessage, now_ms: int, present: set[str]) -> tuple[int | None, int | None]:
    """The delivery time to send, and the delay level it came from (None for a START_TIME or no delay)."""
    start = message.sys_headers().get(BuiltinKeys.START_TIME)
    if start:
        try:
            deliver = int(start)
        except ValueError:
            raise _format_error(BuiltinKeys.START_TIME, f"{start!r} is not ms since the epoch") from None
        if deliver - now_ms > MAX_DELAY_TIME_MS:
            raise _format_error(
                BuiltinKeys.START_TIME,
                f"delivery is {(deliver - now_ms) // 1000}s ahead, the limit is {MAX_DELAY_TIME_MS // 1000}s",
                Code.ILLEGAL_DELIVERY_TIME,
            )
        return (deliver if deliver > now_ms else None), None
    found = _first(message, _DELAY_KEYS, present)
    if found is None:
        return None, None
    key, raw = found
    try:
        level = int(raw)
    except ValueError:
        raise _format_error(key, f"delay level {raw!r} is not an integer") from None
    if level <= 0:
        return None, None
    # The timestamp uses RocketMQ's default ladder (what a RocketMQ 5 proxy honours); OrbitMQ brokers use the level
    # with their own messageDelayLevel. Levels above the table mean its last one, as in RocketMQ.
    return now_ms + delay_ms(level), level


def v2_message(
    *,
    topic: str,
    namespace: str,
    body: bytes,
    message_id: str,
    born_host: str,
    message_type: int,
    encoding: int,
    born_ms: int,
    tag: str | None,
    keys: Sequence[str],
    properties: Mapping[str, str],
    group: str | None = None,
    deliver_ms: int | None = None,
    trace: str | None = None,
) -> definition_pb2.Message:
    """A validated message as v2 ``SendMessage`` carries it."""
    sp = definition_pb2.SystemProperties(
        message_id=message_id,
        born_host=born_host,
        message_type=message_type,
        body_encoding=encoding,
    )
    sp.born_timestamp.CopyFrom(_timestamp_ms(born_ms))
    if tag is not None:
        sp.tag = tag
    if keys:
        sp.keys.extend(keys)
    if group is not None:
        sp.message_group = group
    if deliver_ms is not None:
        sp.delivery_timestamp.CopyFrom(_timestamp_ms(deliver_ms))
    if trace:
        sp.trace_context = trace
    return definition_pb2.Message(
        topic=definition_pb2.Resource(name=topic, resource_namespace=namespace),
        user_properties=properties,
        system_properties=sp,
        body=body,
    )


def validate_producer_body(body: bytes, max_message_size: int) -> None:
    """``validate_body`` against the producer's own limit, which the error names."""
    try:
        validate_body(body, max_message_size)
    except MQError as exc:
        raise MQError(exc.code, f"{exc.message} (producer max_message_size)") from None


def to_wire(
    message: BytesMessage,
    *,
    namespace: str = "",
    born_host: str = "127.0.0.1",
    max_message_size: int,
    compress_over: int,
    transactional: bool = False,
    message_id: str | None = None,
) -> WireMessage:
    """Validate and convert; sets ``MESSAGE_ID`` on ``message`` (``message_id`` or a new one).

    Raises ``OMSMessageFormatException`` & co.
    """
    if not isinstance(message, BytesMessage):
        raise TypeError(f"expected an oms.BytesMessage, got {type(message).__name__}")
    sys_h, user_h = message.sys_headers(), message.user_headers()
    present = {*sys_h, *user_h}
    for key, why in _UNSUPPORTED.items():
        if key in sys_h:
            raise OMSNotSupportedException(Code.NOT_IMPLEMENTED, f"header {key}: {why}")
    reliability = sys_h.get(BuiltinKeys.RELIABILITY)
    if reliability is not None and reliability.upper() != "PERSISTENT":
        raise OMSNotSupportedException(Code.NOT_IMPLEMENTED, "header RELIABILITY: only PERSISTENT messages exist")
    topic = message.destination
    if not topic:
        raise OMSMessageFormatException(Code.ILLEGAL_TOPIC, f"the message has no {BuiltinKeys.DESTINATION} (topic)")
    body = message.body
    now_ms = int(time.time() * 1000)
    try:
        validate_topic(topic)
        validate_producer_body(body, max_message_size)
        mid = message_id or new_message_id()
        size = 0
        tag = _first(message, _TAG_KEYS, present)
        if tag is not None:
            validate_tag(tag[1])
            size += len(tag[1].encode("utf-8"))
        keys = message.keys
        if keys:
            validate_keys(keys)
            size += sum(len(k.encode("utf-8")) for k in keys)
        group = _first(message, _GROUP_KEYS, present)
        if group is not None:
            validate_message_group(group[1])
        deliver_ms, level = _delivery_ms(message, now_ms, present)
        trace = sys_h.get(BuiltinKeys.TRACE_ID)
        props: dict[str, str] = {}
        # Unknown sys headers travel as properties, as RocketMQ's OMS did; user headers override them.
        for key, value in sys_h.items():
            if key not in MAPPED_HEADERS and key not in _RECEIVED_ONLY:
                props[key] = value
        for key, value in user_h.items():
            if key not in MAPPED_HEADERS:
                props[key] = value
        size += validate_user_properties(props)
        if level is not None:
            props[mc.PROPERTY_CLIENT_DELAY_LEVEL] = str(level)  # OrbitMQ applies its own ladder to the level
        validate_properties_size(size)
    except MQError as exc:
        raise from_mq_error(exc) from None
    if transactional:
        if group is not None or deliver_ms is not None:
            raise OMSMessageFormatException(
                Code.BAD_REQUEST, "a transactional message cannot have a message group (sharding key) or a delay"
            )
        message_type = definition_pb2.TRANSACTION
    elif deliver_ms is not None:
        if group is not None:
            raise OMSMessageFormatException(
                Code.BAD_REQUEST, "a delayed message cannot have a message group (sharding key)"
            )
        message_type = definition_pb2.DELAY
    elif group is not None:
        message_type = definition_pb2.FIFO
    else:
        message_type = definition_pb2.NORMAL
    encoding = definition_pb2.IDENTITY
    if 0 < compress_over < len(body):
        packed = zlib.compress(body, COMPRESS_LEVEL)
        if len(packed) < len(body):  # incompressible bodies travel as they are
            body = packed
            # v2 has no ZLIB value: GZIP means "compressed", and readers accept zlib and gzip streams
            encoding = definition_pb2.GZIP

    build = functools.partial(
        v2_message,
        topic=topic,
        namespace=namespace,
        body=body,
        message_id=mid,
        born_host=born_host,
        message_type=message_type,
        encoding=encoding,
        born_ms=now_ms,
        tag=tag[1] if tag is not None else None,
        keys=keys,
        properties=props,
        group=group[1] if group is not None else None,
        deliver_ms=deliver_ms,
        trace=trace,
    )
    sys_h[BuiltinKeys.MESSAGE_ID] = mid
    batch_properties = None
    if message_type == definition_pb2.NORMAL and encoding == definition_pb2.IDENTITY and not namespace:
        # the order of the broker's from_v2_message: user properties, tag, keys, id
        batch_properties = dict(props)
        if tag is not None:
            batch_properties[mc.PROPERTY_TAGS] = tag[1]
        if keys:
            batch_properties[mc.PROPERTY_KEYS] = mc.KEY_SEPARATOR.join(keys)
        batch_properties[mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = mid
    return WireMessage(message, topic, int(message_type), body, mid, lambda _wire: build(), batch_properties)


def decode_body(body: bytes, encoding: int) -> bytes:
    """A delivered body as the producer sent it (GZIP covers zlib streams too, as RocketMQ compresses)."""
    if encoding != definition_pb2.GZIP:
        return body
    if body[:2] == b"\x1f\x8b":
        return gzip.decompress(body)
    return zlib.decompress(body)


def _ms(ts: timestamp_pb2.Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def from_wire(pb: definition_pb2.Message) -> BytesMessage:
    """A delivered v2 message as a ``BytesMessage`` with its sys headers filled (consumers, check-backs)."""
    sp = pb.system_properties
    message = BytesMessage(decode_body(pb.body, sp.body_encoding), pb.topic.name, user_headers=dict(pb.user_properties))
    sys_h = message.sys_headers()
    sys_h[BuiltinKeys.MESSAGE_ID] = sp.message_id
    if sp.HasField("tag"):
        sys_h[NonStandardKeys.TAGS] = sp.tag
    if sp.keys:
        sys_h[BuiltinKeys.SEARCH_KEYS] = ",".join(sp.keys)
    if sp.HasField("message_group"):
        sys_h[BuiltinKeys.STREAM_KEY] = sp.message_group
    if sp.HasField("delivery_timestamp"):
        sys_h[BuiltinKeys.START_TIME] = _ms(sp.delivery_timestamp)
    if sp.HasField("born_timestamp"):
        sys_h[BuiltinKeys.BORN_TIMESTAMP] = _ms(sp.born_timestamp)
    if sp.born_host:
        sys_h[BuiltinKeys.BORN_HOST] = sp.born_host
    if sp.HasField("store_timestamp"):
        sys_h[BuiltinKeys.STORE_TIMESTAMP] = _ms(sp.store_timestamp)
    if sp.store_host:
        sys_h[BuiltinKeys.STORE_HOST] = sp.store_host
    if sp.HasField("receipt_handle"):
        sys_h[BuiltinKeys.RECEIPT_HANDLE] = sp.receipt_handle
    if sp.HasField("queue_offset"):
        sys_h[BuiltinKeys.QUEUE_ID] = sp.queue_id
        sys_h[BuiltinKeys.QUEUE_OFFSET] = sp.queue_offset
    if sp.HasField("delivery_attempt"):
        sys_h[BuiltinKeys.REDELIVERED_NUMBER] = max(0, sp.delivery_attempt - 1)
    if sp.HasField("trace_context"):
        sys_h[BuiltinKeys.TRACE_ID] = sp.trace_context
    return message
