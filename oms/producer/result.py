"""What a send returns: ``SendResult`` (frozen) and ``SendStatus`` (RocketMQ's names for "stored, but...").

The degraded statuses come from the broker's persistence codes; every other failure is an exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from oms.queue import MessageQueue
from orbitmq.errors import Code


class SendStatus(StrEnum):
    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"  # stored, not yet flushed (SYNC_FLUSH timed out)
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"  # stored on the master, the slave did not confirm in time
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"  # stored on the master, no slave to replicate to


STATUS_OF_CODE: dict[int, SendStatus] = {
    Code.OK: SendStatus.SEND_OK,
    Code.MASTER_PERSISTENCE_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    Code.SLAVE_PERSISTENCE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    Code.HA_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


class TransactionResolution(StrEnum):
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"  # leave it to the broker's check-back (the producer's transaction_checker)


@dataclass(frozen=True)
class SendResult:
    message_id: str
    topic: str
    queue: MessageQueue  # queue_id is -1 when the broker chose the queue (see docs/oms.md)
    queue_offset: int
    status: SendStatus = SendStatus.SEND_OK
    transaction_id: str | None = None
    transaction_resolution: TransactionResolution | None = None
    recall_handle: str | None = None  # delay messages: cancel delivery with the broker's RecallMessage

    @property
    def ok(self) -> bool:
        return self.status is SendStatus.SEND_OK

    @classmethod
    def stored_run(
        cls, message_ids: Sequence[str], topic: str, queue: MessageQueue, first_offset: int, status: SendStatus
    ) -> list[SendResult]:
        """The results of a batch stored contiguously from ``first_offset`` in ``queue``: equal to one
        ``SendResult(...)`` each, without the frozen ``__init__``'s field-by-field ``object.__setattr__``
        (2.4 -> 0.9 us per result here: a fifth of a batched send's client time for 100-byte messages)."""
        new, set_dict = object.__new__, object.__setattr__
        out = []
        for offset, message_id in enumerate(message_ids, first_offset):
            result = new(cls)
            fields = {
                "message_id": message_id,
                "topic": topic,
                "queue": queue,
                "queue_offset": offset,
                "status": status,
                "transaction_id": None,
                "transaction_resolution": None,
                "recall_handle": None,
            }
            set_dict(result, "__dict__", fields)
            out.append(result)
        return out
