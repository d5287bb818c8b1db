"""The stored message model: what is put (``MessageExtBrokerInner``) and what is read back (``MessageExt``).

Also the helpers RocketMQ keeps beside them: tag hash codes and the properties string codec.
"""

from __future__ import annotations

import array
import operator
import sys
import time
from dataclasses import dataclass, field
from functools import cached_property, lru_cache

from orbitmq import message_const as mc
from orbitmq.msgid import create_offset_message_id

# sys flag bits (RocketMQ MessageSysFlag)
COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x1 << 1
TRANSACTION_NOT_TYPE = 0
TRANSACTION_PREPARED_TYPE = 0x1 << 2
TRANSACTION_COMMIT_TYPE = 0x2 << 2
TRANSACTION_ROLLBACK_TYPE = 0x3 << 2
NEED_UNWRAP_FLAG = 0x1 << 6
INNER_BATCH_FLAG = 0x1 << 7  # the body is a MessageBatch whose messages take consecutive queue offsets


_MASK32 = 0xFFFFFFFF
_POW31_LEN = 512
_POW31 = [pow(31, i, 1 << 32) for i in range(_POW31_LEN)]  # 31**i mod 2**32


def _code_units(s: str) -> bytes | array.array[int]:
    if s.isascii():
        return s.encode("ascii")  # iterating bytes yields the code units
    units = array.array("H", s.encode("utf-16-be"))
    if sys.byteorder == "little":
        units.byteswap()
    return units


@lru_cache(maxsize=_POW31_LEN)
def _descending_powers(n: int) -> list[int]:
    return _POW31[n - 1 :: -1]


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` (signed 32-bit, over UTF-16 code units): RocketMQ's tag hash code.

    Evaluated as sum(unit[i] * 31**(n-1-i)) mod 2**32 with precomputed powers, so the loop runs in C: the index
    hashes one or more keys per stored message and a Python-level loop per character was a hot spot."""
    units = _code_units(s)
    n = len(units)
    if n <= _POW31_LEN:  # keys and tags: one C-level pass over powers reversed once per length
        h = sum(map(operator.mul, units, _descending_powers(n))) & _MASK32
        return h - (1 << 32) if h & 0x80000000 else h
    h = 0
    for start in range(0, n, _POW31_LEN):
        chunk = units[start : start + _POW31_LEN]
        n = len(chunk)
        h = (h * _POW31[n - 1] * 31 + sum(map(operator.mul, chunk, _descending_powers(n)))) & _MASK32
    return h - (1 << 32) if h & 0x80000000 else h


@lru_cache(maxsize=4096)
def _cached_hash(tags: str) -> int:
    return java_string_hash(tags)


def tags_hash_code(tags: str | None) -> int:
    return _cached_hash(tags) if tags else 0


@dataclass(slots=True)  # slots: the append loop reads a dozen fields of every message
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
    # An inner batch (sys flag INNER_BATCH_FLAG): the tag hash code of each message of the body, in order. The
    # record takes one queue offset and one ConsumeQueue entry per message.
    inner_tags_codes: list[int] | None = None

    @property
    def tags(self) -> str | None:
        return self.properties.get(mc.PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        raw = self.properties.get(mc.PROPERTY_KEYS, "")
        return [k for k in raw.split(mc.KEY_SEPARATOR) if k]

    def effective_tags_code(self) -> int:
        return self.tags_code if self.tags_code is not None else tags_hash_code(self.tags)


def inner_batch_message(
    topic: str, queue_id: int, payload: bytes, tags_codes: list[int], **fields: object
) -> MessageExtBrokerInner:
    """An inner-batch record (RocketMQ 5): ``payload`` is the batch in the MessageBatch layout, ``tags_codes`` the
    tag hash code of each of its messages; ``fields`` are the record's other fields (born time and host...)."""
    return MessageExtBrokerInner(
        topic,
        payload,
        queue_id,
        {mc.PROPERTY_INNER_NUM: str(len(tags_codes))},
        sys_flag=INNER_BATCH_FLAG | NEED_UNWRAP_FLAG,
        inner_tags_codes=tags_codes,
        **fields,  # type: ignore[arg-type]
    )


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
