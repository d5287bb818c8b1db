"""The stored message model: what is put (``MessageExtBrokerInner``) and what is read back (``MessageExt``).

Also the helpers RocketMQ keeps beside them: tag hash codes and the properties string codec.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from common import message_const as mc
from common.msgid import create_offset_message_id

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"

# sys flag bits (RocketMQ MessageSysFlag)
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x1 << 1
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (signed 32-bit, over UTF-16 code units): RocketMQ's tag hash code."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=4096)
def _cached_hash(tags: str) -> int:
    return java_string_hash(tags)


def tags_hash_code(tags: str | None) -> int:
    return _cached_hash(tags) if tags else 0


def encode_properties(properties: dict[str, str]) -> bytes:
    if not properties:
        return b""
    return "".join(f"{k}{NAME_VALUE_SEPARATOR}{v}{PROPERTY_SEPARATOR}" for k, v in properties.items()).encode("utf-8")


def decode_properties(raw: bytes | bytearray | memoryview) -> dict[str, str]:
    if not raw:
        return {}
    result: dict[str, str] = {}
    for item in bytes(raw).decode("utf-8").split(PROPERTY_SEPARATOR):
        if item:
            name, _, value = item.partition(NAME_VALUE_SEPARATOR)
            result[name] = value
    return result


@dataclass
class MessageExtBrokerInner:
    """A message on its way into the CommitLog; offsets and the store timestamp are assigned at append."""

    topic: str
    body: bytes
    queue_id: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = field(default_factory=lambda: int(time.time() * 1000))
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    store_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    tags_code: int | None = None

    @property
    def tags(self) -> str | None:
        return self.properties.get(mc.PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(mc.PROPERTY_KEYS, "")
        return [k for k in raw.split(mc.KEY_SEPARATOR) if k]

    def effective_tags_code(self) -> int:
        return self.tags_code if self.tags_code is not None else tags_hash_code(self.tags)


@dataclass
class MessageExt:
    """A message read back from the CommitLog with its store metadata."""

    topic: str
    body: bytes
    queue_id: int
    properties: dict[str, str]
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    queue_offset: int
    commitlog_offset: int
    store_size: int
    body_crc: int

    @cached_property
    def msg_id(self) -> str:
        """The offset message id (store host + commitlog offset)."""
        return create_offset_message_id(self.store_host[0], self.store_host[1], self.commitlog_offset)

    @property
    def unique_id(self) -> str | None:
        return self.properties.get(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)

    @property
    def tags(self) -> str | None:
        return self.properties.get(mc.PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(mc.PROPERTY_KEYS, "")
        return [k for k in raw.split(mc.KEY_SEPARATOR) if k]
