"""Conversion between v2 protobuf messages and the store's message model (protocol-v2 §5).

Delivered messages carry every SystemProperty the official clients rely on (encoding, MD5 digest, attempt).
"""

from __future__ import annotations

import functools
import hashlib
import ipaddress
import time
from collections.abc import Mapping, Sequence

from google.protobuf import timestamp_pb2
from rocketmq.grpc_protocol import definition_pb2

from broker.store.message import COMPRESSED_FLAG, TRANSACTION_PREPARED_TYPE, MessageExt, MessageExtBrokerInner
from orbitmq import message_const as mc
from orbitmq.record import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR
from orbitmq.validation import MessageKind

# Never echoed into user_properties on delivery.
_HIDDEN_PROPERTIES = mc.SYSTEM_PROPERTY_KEYS | {mc.PROPERTY_DLQ_ORIGIN_TOPIC, mc.PROPERTY_DLQ_ORIGIN_MESSAGE_ID}

_KIND_TO_V2 = {
    MessageKind.NORMAL: definition_pb2.NORMAL,
    MessageKind.FIFO: definition_pb2.FIFO,
    MessageKind.DELAY: definition_pb2.DELAY,
    MessageKind.TRANSACTION: definition_pb2.TRANSACTION,
}


def timestamp_from_ms(ms: int) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=ms // 1000, nanos=(ms % 1000) * 1_000_000)


def timestamp_to_ms(ts: timestamp_pb2.Timestamp) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def kind_of_v2(msg: definition_pb2.Message) -> MessageKind:
    """The reference's derivation: transaction flag, then delay, then message group, else normal."""
    sp = msg.system_properties
    if sp.message_type == definition_pb2.TRANSACTION:
        return MessageKind.TRANSACTION
    if sp.HasField("delivery_timestamp"):
        return MessageKind.DELAY
    if sp.HasField("message_group"):
        return MessageKind.FIFO
    return MessageKind.NORMAL


def kind_of_stored(properties: dict[str, str], sys_flag: int = 0) -> MessageKind:
    if properties.get(mc.PROPERTY_TRANSACTION_PREPARED) == "true" or sys_flag & TRANSACTION_PREPARED_TYPE:
        return MessageKind.TRANSACTION
    if mc.PROPERTY_TIMER_DELIVER_MS in properties:
        return MessageKind.DELAY
    if mc.PROPERTY_MESSAGE_GROUP in properties:
        return MessageKind.FIFO
    return MessageKind.NORMAL


@functools.lru_cache(maxsize=4096)
def _ipv4(host: str) -> str | None:
    """The normalised IPv4 literal, else None; cached: a client sends the same born_host every time."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    return str(ip) if ip.version == 4 else None


def _host_tuple(host: str, peer: tuple[str, int]) -> tuple[str, int]:
    """The address the client declares, with the port of its connection (v2 declares no port: ``ip:0`` told
    ``queryMsgById`` readers nothing); the connection's address when the declaration is no IPv4 literal."""
    ip = _ipv4(host)
    return (ip, peer[1]) if ip is not None else peer


def from_v2_message(
    msg: definition_pb2.Message,
    *,
    born_host: tuple[str, int],
    store_host: tuple[str, int],
    queue_id: int = 0,
) -> MessageExtBrokerInner:
    """A validated v2 message as the store's inner message (the broker picks ``queue_id``)."""
    sp = msg.system_properties
    props = v2_properties(msg.user_properties, sp.tag if sp.HasField("tag") else None, sp.keys, sp.message_id)
    if sp.HasField("message_group"):
        props[mc.PROPERTY_MESSAGE_GROUP] = sp.message_group
    if sp.HasField("delivery_timestamp"):
        props[mc.PROPERTY_TIMER_DELIVER_MS] = str(timestamp_to_ms(sp.delivery_timestamp))
    sys_flag = 0
    if sp.message_type == definition_pb2.TRANSACTION:
        props[mc.PROPERTY_TRANSACTION_PREPARED] = "true"
        sys_flag = TRANSACTION_PREPARED_TYPE
    return inner_from_v2(msg, sp, props, sys_flag, born_host=born_host, store_host=store_host, queue_id=queue_id)


def v2_properties(user: Mapping[str, str], tag: str | None, keys: Sequence[str], message_id: str) -> dict[str, str]:
    """The stored properties of a v2 message's user properties, tag, keys and id, in the reference's order."""
    props: dict[str, str] = dict(user) if user else {}  # dict() of an empty protobuf map costs a microsecond
    if tag is not None:
        props[mc.PROPERTY_TAGS] = tag
    if keys:
        props[mc.PROPERTY_KEYS] = mc.KEY_SEPARATOR.join(keys)
    if message_id:
        props[mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = message_id
    return props


_TAGS = mc.PROPERTY_TAGS + NAME_VALUE_SEPARATOR
_KEYS = mc.PROPERTY_KEYS + NAME_VALUE_SEPARATOR
_UNIQ = mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX + NAME_VALUE_SEPARATOR


def encode_v2_properties(user: Mapping[str, str], tag: str | None, keys: Sequence[str], message_id: str) -> bytes:
    """``encode_properties(v2_properties(...))`` without the dict: the record's properties of a checked message
    (``validate_user_properties`` refuses the system's names, so no user property stands where these go)."""
    sep = PROPERTY_SEPARATOR
    text = sep.join(map(NAME_VALUE_SEPARATOR.join, user.items())) + sep if user else ""
    if tag is not None:
        text += _TAGS + tag + sep
    if keys:
        text += _KEYS + mc.KEY_SEPARATOR.join(keys) + sep
    if message_id:
        text += _UNIQ + message_id + sep
    return text.encode()


def inner_from_v2(
    msg: definition_pb2.Message,
    sp: definition_pb2.SystemProperties,
    props: dict[str, str],
    sys_flag: int,
    *,
    born_host: tuple[str, int],
    store_host: tuple[str, int],
    queue_id: int = 0,
) -> MessageExtBrokerInner:
    """The store's message for v2 message ``msg`` (``sp``: its system properties) with its stored properties."""
    born_ms = timestamp_to_ms(sp.born_timestamp) if sp.HasField("born_timestamp") else int(time.time() * 1000)
    return MessageExtBrokerInner(
        topic=msg.topic.name,
        body=msg.body,
        queue_id=queue_id,
        properties=props,
        sys_flag=sys_flag | body_sys_flag(sp.body_encoding),
        born_timestamp=born_ms,
        born_host=declared_born_host(sp.born_host, born_host),
        store_host=store_host,
    )


def body_sys_flag(encoding: int) -> int:
    """The system flag of a body sent with ``encoding``: it is stored as sent, and the flag tells consumers it is
    compressed (as RocketMQ's COMPRESSED_FLAG)."""
    return COMPRESSED_FLAG if encoding == definition_pb2.GZIP else 0


def declared_born_host(declared: str, peer: tuple[str, int]) -> tuple[str, int]:
    """The born host of a message declaring ``declared`` (maybe nothing) sent over a connection from ``peer``."""
    return _host_tuple(declared, peer) if declared else peer


def to_v2_message(
    msg: MessageExt,
    *,
    receipt_handle: str | None = None,
    delivery_attempt: int = 1,
    invisible_duration_s: float | None = None,
    topic: str | None = None,
    namespace: str = "",
    dead_letter_queue: definition_pb2.DeadLetterQueue | None = None,
    into: definition_pb2.Message | None = None,
) -> definition_pb2.Message:
    """A stored message as delivered to a v2 client; ``topic`` overrides the stored one (e.g. retry topics).

    ``into`` (e.g. ``response.message``) is filled in place and returned: protobuf copies a sub-message passed
    to a constructor, and on the delivery hot path those copies cost more than the conversion itself.
    """
    out = definition_pb2.Message() if into is None else into
    props = msg.properties
    out.topic.name = topic or msg.topic
    if namespace:
        out.topic.resource_namespace = namespace
    out.body = msg.body
    for k, v in props.items():
        if k not in _HIDDEN_PROPERTIES:
            out.user_properties[k] = v
    sp = out.system_properties
    sp.message_id = msg.unique_id or msg.msg_id
    sp.body_encoding = definition_pb2.GZIP if msg.sys_flag & COMPRESSED_FLAG else definition_pb2.IDENTITY
    sp.message_type = _KIND_TO_V2[kind_of_stored(props, msg.sys_flag)]
    sp.born_host = msg.born_host[0]
    sp.store_host = f"{msg.store_host[0]}:{msg.store_host[1]}"
    sp.queue_id = msg.queue_id
    sp.queue_offset = msg.queue_offset
    sp.delivery_attempt = max(1, delivery_attempt)
    digest = sp.body_digest
    digest.type = definition_pb2.MD5
    digest.checksum = hashlib.md5(msg.body).hexdigest().upper()
    born, stored = sp.born_timestamp, sp.store_timestamp
    secs, ms = divmod(msg.born_timestamp, 1000)
    born.seconds, born.nanos = secs, ms * 1_000_000
    secs, ms = divmod(msg.store_timestamp, 1000)
    stored.seconds, stored.nanos = secs, ms * 1_000_000
    tag = msg.tags
    if tag:
        sp.tag = tag
    keys = msg.keys
    if keys:
        sp.keys.extend(keys)
    group = props.get(mc.PROPERTY_MESSAGE_GROUP)
    if group:
        sp.message_group = group
    deliver_ms = props.get(mc.PROPERTY_TIMER_DELIVER_MS)
    if deliver_ms and deliver_ms.isdigit():
        secs, ms = divmod(int(deliver_ms), 1000)
        sp.delivery_timestamp.seconds, sp.delivery_timestamp.nanos = secs, ms * 1_000_000
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    if invisible_duration_s is not None:
        secs = int(invisible_duration_s)
        sp.invisible_duration.seconds = secs
        sp.invisible_duration.nanos = int((invisible_duration_s - secs) * 1e9)
    if dead_letter_queue is not None:
        sp.dead_letter_queue.CopyFrom(dead_letter_queue)
    return out
