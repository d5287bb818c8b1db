"""Requests' plain messages stored without an object per message on the put: a SendBatch request's straight from
its MessageBatch payload (``PlainBatch``), a v2 SendMessage request's from columns (``ColumnBatch``).

Only for plain messages (an id each, maybe a tag, keys, user properties): the record encoder reads each message
where it lies; a message object is built only when something asks for one (a refusal's reason, a CommitLog
dispatcher, metrics), and then it is the one the general path would have built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

from broker.store.message import MessageExtBrokerInner
from orbitmq.message_batch import ScannedBatch, entry_at
from orbitmq.record import decode_properties


class _BuiltOnDemand(Sequence[MessageExtBrokerInner]):
    """A request's messages, each built only when something asks for it (``_message`` of a valid index)."""

    def _message(self, index: int) -> MessageExtBrokerInner:
        raise NotImplementedError

    @overload
    def __getitem__(self, i: int) -> MessageExtBrokerInner: ...

    @overload
    def __getitem__(self, i: slice) -> list[MessageExtBrokerInner]: ...

    def __getitem__(self, i: int | slice) -> MessageExtBrokerInner | list[MessageExtBrokerInner]:
        n = len(self)
        if isinstance(i, slice):
            return [self._message(k) for k in range(*i.indices(n))]
        index = i if i >= 0 else i + n
        if not 0 <= index < n:
            raise IndexError(i)  # ends iteration
        return self._message(index)


@dataclass(eq=False)
class PlainBatch(_BuiltOnDemand):
    """The messages of one request, all to ``topic``/``queue_id``, in the request's order."""

    topic: str
    queue_id: int
    payload: bytes
    scanned: ScannedBatch
    tags_codes: list[int]
    born_timestamp: int
    born_host: tuple[str, int]
    store_host: tuple[str, int]

    def __len__(self) -> int:
        return len(self.scanned.positions)

    def _message(self, index: int) -> MessageExtBrokerInner:
        e = entry_at(self.payload, self.scanned.positions[index], index)
        return MessageExtBrokerInner(
            self.topic,
            e.body,
            self.queue_id,
            e.properties,
            flag=e.flag,
            born_timestamp=self.born_timestamp,
            born_host=self.born_host,
            store_host=self.store_host,
            tags_code=self.tags_codes[index],
        )


@dataclass(eq=False)
class ColumnBatch(_BuiltOnDemand):
    """The plain messages of one request as columns, all to ``topic``/``queue_id``, in the request's order.

    A v2 SendMessage request is not one payload but a message object each: the protocol layer reads each field once
    into these columns and the encoder writes records from them (``encode_column_run``), so a put builds no message
    object and no properties dict. ``properties[i]`` is message i's properties as the record holds them (the
    encoded form ``orbitmq.record.encode_properties`` writes); ``keys[i]`` its ``KEYS`` value, "" for none.
    """

    topic: str
    queue_id: int
    bodies: list[bytes]
    properties: list[bytes]
    sys_flags: list[int]
    born_timestamps: list[int]
    born_hosts: list[tuple[str, int]]
    tags_codes: list[int]
    unique_keys: list[str]
    keys: list[str]
    store_host: tuple[str, int]

    def __len__(self) -> int:
        return len(self.bodies)

    def _message(self, i: int) -> MessageExtBrokerInner:
        return MessageExtBrokerInner(
            self.topic,
            self.bodies[i],
            self.queue_id,
            decode_properties(self.properties[i]),
            sys_flag=self.sys_flags[i],
            born_timestamp=self.born_timestamps[i],
            born_host=self.born_hosts[i],
            store_host=self.store_host,
            tags_code=self.tags_codes[i],
        )


RAW_BATCHES = (PlainBatch, ColumnBatch)
"""The batches the store encodes without a message object each: appended on their own, never merged with others."""
