"""``BytesMessage``: an OMS message (body + sys headers + user headers) with typed conveniences.

Sys headers use ``BuiltinKeys``/``NonStandardKeys`` names; ``docs/oms.md`` lists how each maps onto RocketMQ.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from typing import Any, TypeVar, overload

from oms.keys import BuiltinKeys, NonStandardKeys
from oms.keyvalue import KeyValue
from orbitmq import message_const as mc

T = TypeVar("T", bytes, str)


class BytesMessage:
    """A message to send or one that was received; headers are ``KeyValue`` maps of strings."""

    __slots__ = ("_body", "_sys", "_user")

    def __init__(
        self,
        body: bytes | bytearray | memoryview | str = b"",
        destination: str | None = None,
        *,
        tags: str | None = None,
        keys: str | Iterable[str] | None = None,
        sharding_key: str | None = None,
        delay_level: int | None = None,
        start_time: int | None = None,
        sys_headers: Mapping[str, Any] | None = None,
        user_headers: Mapping[str, Any] | None = None,
    ) -> None:
        if type(body) is bytes:  # the usual body: nothing to check or convert
            self._body = body
        else:
            self.body = body
        self._sys = KeyValue(sys_headers)
        self._user = KeyValue(user_headers)
        # A non-empty str is what KeyValue would store as it is; anything else takes its checks and conversions.
        if destination is not None:
            if type(destination) is str and destination:
                self._sys.set_trusted(BuiltinKeys.DESTINATION, destination)
            else:
                self._sys[BuiltinKeys.DESTINATION] = destination
        if tags is not None:
            if type(tags) is str and tags:
                self._sys.set_trusted(NonStandardKeys.TAGS, tags)
            else:
                self.tags = tags
        if keys is not None:
            self.keys = [keys] if isinstance(keys, str) else list(keys)
        if sharding_key is not None:
            self.sharding_key = sharding_key
        if delay_level is not None:
            self._sys[NonStandardKeys.DELAY_TIME_LEVEL] = delay_level
        if start_time is not None:
            self._sys[BuiltinKeys.START_TIME] = start_time

    # -- body ---------------------------------------------------------------------------------------------------

    @property
    def body(self) -> bytes:
        return self._body

    @body.setter
    def body(self, value: bytes | bytearray | memoryview | str) -> None:
        if isinstance(value, str):
            value = value.encode("utf-8")
        if not isinstance(value, bytes | bytearray | memoryview):
            raise TypeError(f"message body must be bytes or str, not {type(value).__name__}")
        self._body = bytes(value)

    def set_body(self, value: bytes | str) -> BytesMessage:
        self.body = value
        return self

    @overload
    def get_body(self) -> bytes: ...
    @overload
    def get_body(self, as_type: type[T]) -> T: ...
    def get_body(self, as_type: type[Any] = bytes) -> bytes | str:
        """The body as ``bytes`` (default) or decoded UTF-8 ``str`` (OMS 0.3.1 ``getBody(Class)``)."""
        if as_type is str:
            return self._body.decode("utf-8")
        if as_type is bytes:
            return self._body
        raise TypeError(f"get_body supports bytes and str, not {as_type!r}")

    # -- headers ------------------------------------------------------------------------------------------------

    def sys_headers(self) -> KeyValue:
        return self._sys

    def user_headers(self) -> KeyValue:
        return self._user

    def put_sys_headers(self, key: str, value: int | float | bool | str) -> BytesMessage:
        self._sys[key] = value
        return self

    def put_user_headers(self, key: str, value: int | float | bool | str) -> BytesMessage:
        self._user[key] = value
        return self

    def _header(self, *names: str) -> str | None:
        """The first of ``names`` found in the sys headers, then in the user headers (raw RocketMQ names)."""
        for headers in (self._sys, self._user):
            for name in names:
                value = headers.get(name)
                if value is not None:
                    return value
        return None

    # -- conveniences -------------------------------------------------------------------------------------------

    @property
    def destination(self) -> str | None:
        return self._sys.get(BuiltinKeys.DESTINATION)

    @destination.setter
    def destination(self, topic: str) -> None:
        self._sys[BuiltinKeys.DESTINATION] = topic

    @property
    def message_id(self) -> str | None:
        return self._sys.get(BuiltinKeys.MESSAGE_ID)

    @property
    def receipt_handle(self) -> str | None:
        return self._sys.get(BuiltinKeys.RECEIPT_HANDLE)

    @property
    def tags(self) -> str | None:
        return self._header(NonStandardKeys.TAGS, mc.PROPERTY_TAGS)

    @tags.setter
    def tags(self, tag: str) -> None:
        self._sys[NonStandardKeys.TAGS] = tag

    @property
    def keys(self) -> list[str]:
        """Message keys (indexed by the broker): ``SEARCH_KEYS`` (comma-separated) plus raw ``KEYS``."""
        out: list[str] = []
        search = self._header(BuiltinKeys.SEARCH_KEYS)
        if search:
            out.extend(k.strip() for k in search.split(",") if k.strip())
        raw = self._header(NonStandardKeys.KEYS, mc.PROPERTY_KEYS)
        if raw:
            out.extend(k for k in raw.split(mc.KEY_SEPARATOR) if k)
        return list(dict.fromkeys(out))

    @keys.setter
    def keys(self, keys: Iterable[str]) -> None:
        self._sys[BuiltinKeys.SEARCH_KEYS] = ",".join(keys)

    @property
    def sharding_key(self) -> str | None:
        """The message group: messages with one key go to one queue, in order (``STREAM_KEY``)."""
        return self._header(BuiltinKeys.STREAM_KEY, NonStandardKeys.SHARDING_KEY, mc.PROPERTY_SHARDING_KEY)

    @sharding_key.setter
    def sharding_key(self, key: str) -> None:
        self._sys[BuiltinKeys.STREAM_KEY] = key

    @property
    def delay_level(self) -> int | None:
        raw = self._header(NonStandardKeys.DELAY_TIME_LEVEL, mc.PROPERTY_DELAY_TIME_LEVEL)
        return int(raw) if raw else None

    @property
    def start_time(self) -> int | None:
        """Absolute delivery time in ms since the epoch (``START_TIME``), if set."""
        raw = self._sys.get(BuiltinKeys.START_TIME)
        return int(raw) if raw else None

    def _int_header(self, key: str) -> int | None:
        raw = self._sys.get(key)
        return int(raw) if raw else None

    @property
    def born_timestamp(self) -> int | None:
        return self._int_header(BuiltinKeys.BORN_TIMESTAMP)

    @property
    def store_timestamp(self) -> int | None:
        return self._int_header(BuiltinKeys.STORE_TIMESTAMP)

    @property
    def reconsume_times(self) -> int:
        return self._int_header(BuiltinKeys.REDELIVERED_NUMBER) or 0

    @property
    def queue_id(self) -> int | None:
        return self._int_header(BuiltinKeys.QUEUE_ID)

    @property
    def queue_offset(self) -> int | None:
        return self._int_header(BuiltinKeys.QUEUE_OFFSET)

    @property
    def transaction_id(self) -> str | None:
        return self._sys.get(BuiltinKeys.TRANSACTION_ID)

    def __repr__(self) -> str:
        return f"BytesMessage(body={len(self._body)} bytes, sys={dict(self._sys)!r}, user={dict(self._user)!r})"


# The batched produce path reads thousands of messages per call: these read a column of every message in C
# (``map`` of an ``attrgetter``) instead of two or three Python method calls per message (``sys_headers()``,
# ``as_dict()``, the ``body`` property), which cost as much as the rest of a 100-byte message's send.
# The maps are the ``KeyValue`` maps themselves, as ``KeyValue.as_dict`` gives them: read them, do not keep them.
_SYS_MAP = attrgetter("_sys._data")
_USER_MAP = attrgetter("_user._data")
_BODY = attrgetter("_body")


@dataclass(frozen=True, slots=True)
class MessageColumns:
    """Each message's sys header map, user header map and body, in the messages' order."""

    sys_maps: list[dict[str, str]]
    user_maps: list[dict[str, str]]
    bodies: list[bytes]


def message_columns(messages: Sequence[BytesMessage]) -> MessageColumns | None:
    """The columns of ``messages``, or None if one of them is not a ``BytesMessage`` (its send refuses it)."""
    try:
        return MessageColumns(list(map(_SYS_MAP, messages)), list(map(_USER_MAP, messages)), list(map(_BODY, messages)))
    except AttributeError:
        return None


def stamp_message_ids(sys_maps: Sequence[dict[str, str]], message_ids: Sequence[str]) -> None:
    """Give each message (by its sys header map, from ``message_columns``) its id, as ``KeyValue.set_trusted``
    does: ids the library made need no checks, and one C-level ``dict.__setitem__`` each."""
    deque(map(dict.__setitem__, sys_maps, repeat(BuiltinKeys.MESSAGE_ID), message_ids), maxlen=0)
