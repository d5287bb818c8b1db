"""A SendBatch request's messages stored straight from its MessageBatch payload: no object per message on the put.

Only for batches ``scan_message_batch`` accepted (an id each, maybe a tag, keys, user properties): the record
encoder reads each entry where it lies in the payload; a message object is built only when something asks for one
(a refusal's reason, a CommitLog dispatcher, metrics), and then it is the one the general path would have built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

from broker.store.message import MessageExtBrokerInner
from orbitmq.message_batch import ScannedBatch, entry_at


@dataclass(eq=False)
class PlainBatch(Sequence[MessageExtBrokerInner]):
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

    @overload
    def __getitem__(self, i: int) -> MessageExtBrokerInner: ...

    @overload
    def __getitem__(self, i: slice) -> list[MessageExtBrokerInner]: ...

    def __getitem__(self, i: int | slice) -> MessageExtBrokerInner | list[MessageExtBrokerInner]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        pos = self.scanned.positions[i]  # IndexError past the end ends iteration
        index = i if i >= 0 else i + len(self)
        e = entry_at(self.payload, pos, index)
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
