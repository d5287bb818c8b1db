"""Column lists (bodies, tags, keys, properties) as plain wire messages for ``Producer.send_columns``.

Validation is the same as ``to_wire``'s, row by row, but no ``BytesMessage`` and no header map is built per row:
the properties go straight into the ``Produce/SendBatch`` form, the v2 protobuf only if a broker needs it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from rocketmq.grpc_protocol import definition_pb2

from oms.client.identity import new_message_id
from oms.convert import MAPPED_HEADERS, WireMessage, v2_message, validate_producer_body
from oms.errors import OMSMessageFormatException, from_mq_error
from oms.keys import BuiltinKeys, NonStandardKeys
from oms.message import BytesMessage
from orbitmq import message_const as mc
from orbitmq.errors import Code, MQError
from orbitmq.validation import (
    validate_keys,
    validate_properties_size,
    validate_tag,
    validate_topic,
    validate_user_properties,
)

Keys = str | Sequence[str] | None


def _key_list(keys: Keys) -> list[str]:
    if not keys:
        return []
    if isinstance(keys, str):
        return keys.split()  # RocketMQ's stored form: space-separated
    return [k for k in keys if k]


class _PlainRows:
    """Validates and converts plain rows of one call: the checks ``to_wire`` makes, with each topic and tag
    checked once per call (a batch mostly repeats them)."""

    __slots__ = ("checked_tags", "checked_topics", "max_message_size", "v2")

    def __init__(self, born_host: str, max_message_size: int) -> None:
        self.max_message_size = max_message_size
        self.v2 = _PlainV2(born_host, int(time.time() * 1000))
        self.checked_topics: set[str] = set()
        self.checked_tags: dict[str, int] = {}  # tag -> its UTF-8 size

    def wire(
        self,
        source: BytesMessage | None,
        topic: str,
        body: bytes,
        tag: str | None,
        key_list: list[str],
        user: Mapping[str, str] | None,
    ) -> WireMessage:
        if topic not in self.checked_topics:
            validate_topic(topic)
            self.checked_topics.add(topic)
        validate_producer_body(body, self.max_message_size)
        props: dict[str, str] = dict(user) if user else {}
        size = validate_user_properties(props) if props else 0
        if tag:
            tag_size = self.checked_tags.get(tag)
            if tag_size is None:
                validate_tag(tag)
                tag_size = self.checked_tags[tag] = len(tag.encode("utf-8"))
            size += tag_size
            props[mc.PROPERTY_TAGS] = tag
        else:
            tag = None
        if key_list:
            validate_keys(key_list)
            size += sum(len(k.encode("utf-8")) for k in key_list)
            props[mc.PROPERTY_KEYS] = mc.KEY_SEPARATOR.join(key_list)
        validate_properties_size(size)
        mid = new_message_id()
        # the order of the broker's from_v2_message (user properties, tag, keys, id), as to_wire gives it
        props[mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = mid
        return WireMessage(source, topic, definition_pb2.NORMAL, body, mid, self.v2, props)


class _PlainV2:
    """Builds a plain row's v2 message from the wire message itself, only if a broker without
    ``Produce/SendBatch`` needs it: one builder per call, not an object (and its cells) per row."""

    __slots__ = ("born_host", "born_ms")

    def __init__(self, born_host: str, born_ms: int) -> None:
        self.born_host = born_host
        self.born_ms = born_ms

    def __call__(self, wire: WireMessage) -> definition_pb2.Message:
        props = wire.batch_properties or {}
        keys = props.get(mc.PROPERTY_KEYS)
        return v2_message(
            topic=wire.topic,
            namespace="",
            body=wire.body,
            message_id=wire.message_id,
            born_host=self.born_host,
            message_type=definition_pb2.NORMAL,
            encoding=definition_pb2.IDENTITY,
            born_ms=self.born_ms,
            tag=props.get(mc.PROPERTY_TAGS),
            keys=keys.split(mc.KEY_SEPARATOR) if keys else [],
            properties={k: v for k, v in props.items() if k not in _SYSTEM_PROPERTIES},
        )


_SYSTEM_PROPERTIES = frozenset({mc.PROPERTY_TAGS, mc.PROPERTY_KEYS, mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX})


def plain_wires(
    topic: str,
    bodies: Sequence[bytes],
    tags: Sequence[str | None] | None,
    keys: Sequence[Keys] | None,
    properties: Sequence[Mapping[str, str] | None] | None,
    *,
    born_host: str,
    max_message_size: int,
    compress_over: int,
) -> list[WireMessage] | None:
    """One plain (normal, uncompressed) wire message per row, or None when a row's body is over the compression
    threshold (that call takes the message path). Raises ``OMSMessageFormatException`` naming the row."""
    n = len(bodies)
    for name, column in (("tags", tags), ("keys", keys), ("properties", properties)):
        if column is not None and len(column) != n:
            raise ValueError(f"{name} has {len(column)} rows, bodies has {n}")
    if compress_over > 0 and any(len(b) > compress_over for b in bodies):
        return None
    rows = _PlainRows(born_host, max_message_size)
    wires: list[WireMessage] = []
    row = 0
    try:
        for row in range(n):
            wires.append(
                rows.wire(
                    None,
                    topic,
                    bodies[row],
                    tags[row] if tags is not None else None,
                    _key_list(keys[row]) if keys is not None else [],
                    properties[row] if properties is not None else None,
                )
            )
    except MQError as exc:
        raise from_mq_error(MQError(exc.code, f"row {row}: {exc.message}")) from None
    return wires


# What a message may carry to be sent as a plain row: a topic, a tag, keys (an id it had is replaced, as to_wire
# replaces it) and user headers that to_wire passes on as properties; anything else (delays, groups, unsupported
# headers, user headers to_wire would read as a tag or keys...) takes to_wire.
_PLAIN_SYS_HEADERS = frozenset(
    {BuiltinKeys.DESTINATION, BuiltinKeys.MESSAGE_ID, NonStandardKeys.TAGS, BuiltinKeys.SEARCH_KEYS}
)


def plain_message_wires(
    messages: Sequence[BytesMessage], *, born_host: str, max_message_size: int, compress_over: int
) -> list[WireMessage] | None:
    """``to_wire`` for a batch of plain messages (see ``_PLAIN_SYS_HEADERS``) without its per-header work, or None
    when one of them is not plain or needs compression (the batch then takes ``to_wire``, message by message).

    Gives each message its id, as ``to_wire`` does; raises what ``to_wire`` raises."""
    plain = _PLAIN_SYS_HEADERS
    for m in messages:
        if not plain.issuperset(m.sys_headers()) or not MAPPED_HEADERS.isdisjoint(m.user_headers()):
            return None
        if 0 < compress_over < len(m.body):
            return None
    rows = _PlainRows(born_host, max_message_size)
    wires: list[WireMessage] = []
    try:
        for m in messages:
            sys_h = m.sys_headers()
            topic = sys_h.get(BuiltinKeys.DESTINATION)
            if not topic:
                raise OMSMessageFormatException(
                    Code.ILLEGAL_TOPIC, f"the message has no {BuiltinKeys.DESTINATION} (topic)"
                )
            tag = sys_h.get(NonStandardKeys.TAGS)
            if tag == "":
                validate_tag(tag)  # to_wire refuses a blank tag where a column leaves it out
            keys = m.keys if BuiltinKeys.SEARCH_KEYS in sys_h else []
            wire = rows.wire(m, topic, m.body, tag, keys, m.user_headers())
            sys_h.set_trusted(BuiltinKeys.MESSAGE_ID, wire.message_id)
            wires.append(wire)
    except MQError as exc:
        raise from_mq_error(exc) from None
    return wires


def column_messages(
    topic: str,
    bodies: Sequence[bytes],
    tags: Sequence[str | None] | None,
    keys: Sequence[Keys] | None,
    properties: Sequence[Mapping[str, str] | None] | None,
) -> list[BytesMessage]:
    """The rows as messages, for the calls ``plain_wires`` leaves to ``send_batch``."""
    out = []
    for row, body in enumerate(bodies):
        user = properties[row] if properties is not None else None
        message = BytesMessage(body, topic, user_headers=dict(user) if user else None)
        tag = tags[row] if tags is not None else None
        if tag:
            message.tags = tag
        key_list = _key_list(keys[row]) if keys is not None else []
        if key_list:
            message.keys = key_list
        out.append(message)
    return out
