"""Validation rules for names and messages, each failure an ``MQError`` with the v2 code and the limit it broke.

Rules follow the reference proxy (protocol-v2 §3.3): the broker runs them before anything is stored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import NamedTuple

from orbitmq import message_const as mc
from orbitmq.errors import Code, MQError
from orbitmq.limits import (
    MAX_GROUP_LENGTH,
    MAX_MESSAGE_BODY_SIZE,
    MAX_MESSAGE_GROUP_LENGTH,
    MAX_PROPERTIES_SIZE,
    MAX_PROPERTY_COUNT,
    MAX_TOPIC_LENGTH,
)
from orbitmq.topics import is_system_group, is_system_topic

NAME_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")

_TAG_CHARS = rb"[!-{}~]{1,128}"  # printable ASCII but space and '|': what validate_tag accepts, and no more
_ID_CHARS = rb"[0-9A-Za-z_-]{1,128}+"
# keys: printable ASCII words joined by single spaces (no blank key), 4 KiB at most (well under the properties limit)
_KEYS_CHARS = rb"(?=[ -~]{1,4096}\x02)((?:[!-~]+ )*[!-~]+)"
_TAGS_ITEM = re.escape(mc.PROPERTY_TAGS.encode()) + rb"\x01(" + _TAG_CHARS + rb")\x02"
_KEYS_ITEM = re.escape(mc.PROPERTY_KEYS.encode()) + rb"\x01" + _KEYS_CHARS + rb"\x02"
_ID_ITEM = re.escape(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX.encode()) + rb"\x01(" + _ID_CHARS + rb")\x02"
_RESERVED_NAME = rb"(?:" + rb"|".join(re.escape(k.encode()) for k in sorted(mc.SYSTEM_PROPERTY_KEYS)) + rb")\x01"
# user properties as validate_user_properties accepts them, in printable ASCII only (so no UTF-8 to check): a name
# with a non-space character that is not reserved, any value; at most MAX_PROPERTY_COUNT of them
# (possessive runs: no class holds the separator after it, so nothing is lost, and sre skips the backtracking state)
_USER_ITEMS = rb"((?:(?!" + _RESERVED_NAME + rb") *+[!-~][ -~]*+\x01[ -~]*+\x02){1,%d})" % MAX_PROPERTY_COUNT


# The encoded properties of a batched message in their most common shapes: the message id, maybe after user
# properties, a tag and keys (oms's order), or followed by a tag; every character one the full checks accept. A
# match passes those checks without decoding the properties, but for two that a pattern cannot say (the scan
# checks them: a name given twice, the properties' total size); its groups are (user properties, tag, keys, id,
# id, tag), one of each pair set. Anything else goes through the checks (Produce/SendBatch's plain path).
class PlainShapes(NamedTuple):
    """The plain shapes of a batched message's encoded properties: ``full`` (all of them, groups as below) and
    ``id_only``, the commonest match of ``full`` on its own (the id alone: one group), tried first because it costs
    about half as much to match."""

    full: re.Pattern[bytes]
    id_only: re.Pattern[bytes]


PLAIN_BATCH_PROPERTIES = PlainShapes(
    re.compile(
        rb"(?:" + _USER_ITEMS + rb")?(?:" + _TAGS_ITEM + rb")?(?:" + _KEYS_ITEM + rb")?" + _ID_ITEM
        + rb"|" + _ID_ITEM + rb"(?:" + _TAGS_ITEM + rb")?"
    ),
    re.compile(_ID_ITEM),
)  # fmt: skip


class MessageKind(StrEnum):
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"


# one regex search instead of a per-character loop: checked for every property of every message sent
_CONTROL_CHAR = re.compile("[\x00-\x1f\x7f]")


def has_control(s: str) -> bool:
    """Whether ``s`` has a control character (names and values of every kind refuse them)."""
    return _CONTROL_CHAR.search(s) is not None


def validate_topic(topic: str, *, allow_system: bool = False) -> None:
    if not topic or not topic.strip():
        raise MQError(Code.ILLEGAL_TOPIC, "topic name is blank")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise MQError(Code.ILLEGAL_TOPIC, f"topic name is {len(topic)} characters, the limit is {MAX_TOPIC_LENGTH}")
    if not NAME_PATTERN.match(topic):
        raise MQError(Code.ILLEGAL_TOPIC, f"topic {topic!r} must match {NAME_PATTERN.pattern}")
    if not allow_system and is_system_topic(topic):
        raise MQError(Code.ILLEGAL_TOPIC, f"topic {topic!r} is a system topic")


def validate_group(group: str, *, allow_system: bool = False) -> None:
    if not group or not group.strip():
        raise MQError(Code.ILLEGAL_CONSUMER_GROUP, "group name is blank")
    if len(group) > MAX_GROUP_LENGTH:
        raise MQError(
            Code.ILLEGAL_CONSUMER_GROUP, f"group name is {len(group)} characters, the limit is {MAX_GROUP_LENGTH}"
        )
    if not NAME_PATTERN.match(group):
        raise MQError(Code.ILLEGAL_CONSUMER_GROUP, f"group {group!r} must match {NAME_PATTERN.pattern}")
    if not allow_system and is_system_group(group):
        raise MQError(Code.ILLEGAL_CONSUMER_GROUP, f"group {group!r} is a system group")


def validate_tag(tag: str) -> None:
    if not tag.strip():
        raise MQError(Code.ILLEGAL_MESSAGE_TAG, "tag is blank")
    if "|" in tag:
        raise MQError(Code.ILLEGAL_MESSAGE_TAG, f"tag {tag!r} contains '|'")
    if has_control(tag):
        raise MQError(Code.ILLEGAL_MESSAGE_TAG, f"tag {tag!r} contains control characters")


def validate_keys(keys: Iterable[str]) -> None:
    for key in keys:
        if not key.strip():
            raise MQError(Code.ILLEGAL_MESSAGE_KEY, "message key is blank")
        if has_control(key):
            raise MQError(Code.ILLEGAL_MESSAGE_KEY, f"message key {key!r} contains control characters")


def validate_message_group(group: str) -> None:
    if not group.strip():
        raise MQError(Code.ILLEGAL_MESSAGE_GROUP, "message group is blank")
    if len(group.encode("utf-8")) >= MAX_MESSAGE_GROUP_LENGTH:
        raise MQError(
            Code.ILLEGAL_MESSAGE_GROUP, f"message group must be shorter than {MAX_MESSAGE_GROUP_LENGTH} bytes"
        )
    if has_control(group):
        raise MQError(Code.ILLEGAL_MESSAGE_GROUP, "message group contains control characters")


def validate_body(body: bytes, max_size: int = MAX_MESSAGE_BODY_SIZE) -> None:
    if not body:
        raise MQError(Code.MESSAGE_BODY_EMPTY, "message body is empty")
    if len(body) > max_size:
        raise MQError(Code.MESSAGE_BODY_TOO_LARGE, f"message body is {len(body)} bytes, the limit is {max_size} bytes")


def validate_user_properties(props: Mapping[str, str]) -> int:
    """Checks count, reserved keys and control characters; returns the properties' size in bytes."""
    if len(props) > MAX_PROPERTY_COUNT:
        raise MQError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"message has {len(props)} user properties, the limit is {MAX_PROPERTY_COUNT}",
        )
    size = 0
    for key, value in props.items():
        if not key.strip():
            raise MQError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "user property key is blank")
        if key in mc.SYSTEM_PROPERTY_KEYS:
            raise MQError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"user property key {key!r} is reserved by the system")
        if has_control(key) or has_control(value):
            raise MQError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"user property {key!r} contains control characters")
        size += len(key.encode("utf-8")) + len(value.encode("utf-8"))
    return size


class UserPropertiesCheck:
    """``validate_user_properties`` for the many messages of one call (a batch, a table's rows): the same checks
    and errors, each distinct property name checked once (rows mostly repeat their names), values scanned in C."""

    __slots__ = ("_names",)

    def __init__(self) -> None:
        self._names: dict[str, int] = {}  # checked name -> its UTF-8 size

    def __call__(self, props: Mapping[str, str]) -> int:
        if len(props) > MAX_PROPERTY_COUNT:
            return validate_user_properties(props)  # raises the count's error
        names, control = self._names, _CONTROL_CHAR.search
        size = 0
        for key, value in props.items():
            key_size = names.get(key)
            if key_size is None:
                validate_user_properties({key: value})
                key_size = names[key] = len(key.encode("utf-8"))
            elif control(value) is not None:
                raise MQError(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"user property {key!r} contains control characters")
            size += key_size + (len(value) if value.isascii() else len(value.encode("utf-8")))
        return size


def validate_properties_size(size: int) -> None:
    if size > MAX_PROPERTIES_SIZE:
        raise MQError(
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
            f"properties, tag and keys take {size} bytes, the limit is {MAX_PROPERTIES_SIZE} bytes",
        )


def validate_delivery_timestamp(deliver_ms: int, now_ms: int, max_delay_ms: int) -> None:
    if deliver_ms - now_ms > max_delay_ms:
        raise MQError(
            Code.ILLEGAL_DELIVERY_TIME,
            f"delivery timestamp is {(deliver_ms - now_ms) // 1000}s ahead, the limit is {max_delay_ms // 1000}s",
        )


def check_message_type(kind: MessageKind, topic_type: str, topic: str) -> None:
    """The topic's ``message.type`` must equal the message's type unless it is MIXED (40014)."""
    if topic_type == "MIXED" or topic_type == kind.value:
        return
    if topic_type in ("UNSPECIFIED", "") and kind is MessageKind.NORMAL:
        return
    raise MQError(
        Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
        f"topic {topic!r} accepts {topic_type} messages, this message is {kind.value}",
    )
