"""Result types of the store API: put and get statuses, append and get results, the filter protocol."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Protocol, overload

from broker.store.consume_queue_ext import CqExtUnit
from broker.store.message import MessageExt, MessageExtBrokerInner
from orbitmq.msgid import create_offset_message_id


class PutMessageStatus(Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPPED_FILE_FAILED = "CREATE_MAPPED_FILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGE_CACHE_BUSY = "OS_PAGE_CACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


@dataclass(slots=True)  # not frozen: built once per message on the hot path
class AppendMessageResult:
    wrote_offset: int
    wrote_bytes: int
    store_host: tuple[str, int]
    store_timestamp: int
    logics_offset: int
    msg_num: int = 1

    @property
    def msg_id(self) -> str:
        """The offset message id; built on demand because most callers never ask for it."""
        return create_offset_message_id(self.store_host[0], self.store_host[1], self.wrote_offset)


@dataclass(slots=True)
class PutMessageResult:
    status: PutMessageStatus
    append_result: AppendMessageResult | None = None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK


@dataclass(frozen=True, slots=True)
class PutResults(Sequence[PutMessageResult]):
    """The results of a batch whose every record was written, built per item only when asked for.

    A put of thousands of small messages would otherwise spend as long building result objects as writing
    the records; callers that want only offsets read ``commitlog_offsets`` / ``queue_offsets`` directly.
    """

    commitlog_offsets: list[int]
    sizes: list[int]
    queue_offsets: list[int]
    store_host: tuple[str, int]
    store_timestamp: int
    status: PutMessageStatus = PutMessageStatus.PUT_OK
    error: str = ""

    def with_status(self, status: PutMessageStatus, error: str) -> PutResults:
        """The same records answered with another status (a flush that timed out)."""
        return replace(self, status=status, error=error)

    def __len__(self) -> int:
        return len(self.commitlog_offsets)

    def _at(self, i: int) -> PutMessageResult:
        append = AppendMessageResult(
            self.commitlog_offsets[i], self.sizes[i], self.store_host, self.store_timestamp, self.queue_offsets[i]
        )
        return PutMessageResult(self.status, append, self.error)

    @overload
    def __getitem__(self, index: int) -> PutMessageResult: ...

    @overload
    def __getitem__(self, index: slice) -> PutResults: ...

    def __getitem__(self, index: int | slice) -> PutMessageResult | PutResults:
        if isinstance(index, slice):  # one caller's share of a batch appended with other callers' puts
            return replace(
                self,
                commitlog_offsets=self.commitlog_offsets[index],
                sizes=self.sizes[index],
                queue_offsets=self.queue_offsets[index],
            )
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._at(index)

    def __iter__(self) -> Iterator[PutMessageResult]:
        return (self._at(i) for i in range(len(self)))


class GetMessageStatus(Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    # the record at the requested offset fails its CRC: never served; ``next_begin_offset`` is past it
    MESSAGE_CORRUPTED = "MESSAGE_CORRUPTED"


@dataclass
class GetMessageResult:
    status: GetMessageStatus
    messages: list[MessageExt] = field(default_factory=list)
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    raw: bytes = b""  # get_message_raw: the records as stored, end to end
    raw_count: int = 0
    # get_message_spans: (queue offset, commitlog offset, size) of the selected records
    spans: list[tuple[int, int, int]] = field(default_factory=list)


class MessageFilter(Protocol):
    """Two-stage filter: a cheap check on the ConsumeQueue entry, then one on the decoded message."""

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext: CqExtUnit | None) -> bool:
        """``cq_ext`` is the entry's filter bitmap when the filter has ``uses_cq_ext = True`` and one exists."""
        ...

    def is_matched_by_commitlog(self, msg: MessageExt) -> bool: ...


class CommitLogDispatcher(Protocol):
    """Called after each append once the ConsumeQueue entry exists (e.g. to compute filter bits)."""

    def dispatch(self, msg: MessageExtBrokerInner, result: AppendMessageResult) -> None: ...
