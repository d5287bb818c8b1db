"""Column lists (bodies, tags, keys, properties) as plain wire messages for ``Producer.send_columns``.

Validation is the same as ``to_wire``'s, row by row, but no ``BytesMessage`` and no header map is built per row:
the properties go straight into the ``Produce/SendBatch`` form, the v2 protobuf only if a broker needs it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence

from rocketmq.grpc_protocol import definition_pb2

from oms.client.identity import new_message_id
from oms.convert import WireMessage, v2_message
from oms.errors import from_mq_error
from oms.message import BytesMessage
from orbitmq import message_const as mc
from orbitmq.errors import MQError
from orbitmq.validation import (
    validate_body,
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
    now_ms = int(time.time() * 1000)
    wires: list[WireMessage] = []
    row = 0
    try:
        validate_topic(topic)
        for row in range(n):
            body = bodies[row]
            validate_body(body, max_message_size)
            user = properties[row] if properties is not None else None
            props: dict[str, str] = dict(user) if user else {}
            size = validate_user_properties(props) if props else 0
            tag = tags[row] if tags is not None else None
            if tag:
                validate_tag(tag)
                size += len(tag.encode("utf-8"))
                props[mc.PROPERTY_TAGS] = tag
            else:
                tag = None
            key_list = _key_list(keys[row]) if keys is not None else []
            if key_list:
                validate_keys(key_list)
                size += sum(len(k.encode("utf-8")) for k in key_list)
                props[mc.PROPERTY_KEYS] = mc.KEY_SEPARATOR.join(key_list)
            validate_properties_size(size)
            mid = new_message_id()
            # the order of the broker's from_v2_message (user properties, tag, keys, id), as to_wire gives it
            props[mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = mid
            build = functools.partial(
                v2_message,
                topic=topic,
                namespace="",
                body=body,
                message_id=mid,
                born_host=born_host,
                message_type=definition_pb2.NORMAL,
                encoding=definition_pb2.IDENTITY,
                born_ms=now_ms,
                tag=tag,
                keys=key_list,
                properties=dict(user) if user else {},
            )
            wires.append(WireMessage(None, topic, definition_pb2.NORMAL, body, mid, build, props))
    except MQError as exc:
        raise from_mq_error(MQError(exc.code, f"row {row}: {exc.message}")) from None
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
