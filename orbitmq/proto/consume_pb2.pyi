from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Status(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class PullBatchRequest(_message.Message):
    __slots__ = ("group", "topic", "queue_id", "offset", "max_messages", "max_bytes", "long_polling_ms", "filter_type", "filter_expression", "use_reset_offset")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    LONG_POLLING_MS_FIELD_NUMBER: _ClassVar[int]
    FILTER_TYPE_FIELD_NUMBER: _ClassVar[int]
    FILTER_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    USE_RESET_OFFSET_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    queue_id: int
    offset: int
    max_messages: int
    max_bytes: int
    long_polling_ms: int
    filter_type: str
    filter_expression: str
    use_reset_offset: bool
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., offset: _Optional[int] = ..., max_messages: _Optional[int] = ..., max_bytes: _Optional[int] = ..., long_polling_ms: _Optional[int] = ..., filter_type: _Optional[str] = ..., filter_expression: _Optional[str] = ..., use_reset_offset: _Optional[bool] = ...) -> None: ...

class PullBatchResponse(_message.Message):
    __slots__ = ("status", "next_offset", "min_offset", "max_offset", "count", "records", "offset_reset")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MIN_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_RESET_FIELD_NUMBER: _ClassVar[int]
    status: Status
    next_offset: int
    min_offset: int
    max_offset: int
    count: int
    records: bytes
    offset_reset: bool
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., next_offset: _Optional[int] = ..., min_offset: _Optional[int] = ..., max_offset: _Optional[int] = ..., count: _Optional[int] = ..., records: _Optional[bytes] = ..., offset_reset: _Optional[bool] = ...) -> None: ...

class GetConsumerListRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class GetConsumerListResponse(_message.Message):
    __slots__ = ("status", "client_ids")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_IDS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    client_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., client_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class SendBackRequest(_message.Message):
    __slots__ = ("group", "topic", "commitlog_offset", "delay_level", "max_reconsume_times", "queue_offset")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    COMMITLOG_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DELAY_LEVEL_FIELD_NUMBER: _ClassVar[int]
    MAX_RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    commitlog_offset: int
    delay_level: int
    max_reconsume_times: int
    queue_offset: int
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., commitlog_offset: _Optional[int] = ..., delay_level: _Optional[int] = ..., max_reconsume_times: _Optional[int] = ..., queue_offset: _Optional[int] = ...) -> None: ...

class SendBackResponse(_message.Message):
    __slots__ = ("status", "destination", "reconsume_times", "deliver_timestamp_ms")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    RECONSUME_TIMES_FIELD_NUMBER: _ClassVar[int]
    DELIVER_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    destination: str
    reconsume_times: int
    deliver_timestamp_ms: int
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., destination: _Optional[str] = ..., reconsume_times: _Optional[int] = ..., deliver_timestamp_ms: _Optional[int] = ...) -> None: ...

class LockQueuesRequest(_message.Message):
    __slots__ = ("group", "topic", "client_id", "queue_ids", "lease_ms")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_IDS_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    client_id: str
    queue_ids: _containers.RepeatedScalarFieldContainer[int]
    lease_ms: int
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., client_id: _Optional[str] = ..., queue_ids: _Optional[_Iterable[int]] = ..., lease_ms: _Optional[int] = ...) -> None: ...

class LockQueuesResponse(_message.Message):
    __slots__ = ("status", "locked_queue_ids", "lease_ms")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LOCKED_QUEUE_IDS_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    locked_queue_ids: _containers.RepeatedScalarFieldContainer[int]
    lease_ms: int
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., locked_queue_ids: _Optional[_Iterable[int]] = ..., lease_ms: _Optional[int] = ...) -> None: ...

class UnlockQueuesRequest(_message.Message):
    __slots__ = ("group", "topic", "client_id", "queue_ids")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUE_IDS_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    client_id: str
    queue_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., client_id: _Optional[str] = ..., queue_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class UnlockQueuesResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ...) -> None: ...
