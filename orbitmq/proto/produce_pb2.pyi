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

class SendBatchRequest(_message.Message):
    __slots__ = ("topic", "queue_id", "messages", "count", "born_timestamp_ms", "producer_group")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    BORN_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_GROUP_FIELD_NUMBER: _ClassVar[int]
    topic: str
    queue_id: int
    messages: bytes
    count: int
    born_timestamp_ms: int
    producer_group: str
    def __init__(self, topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., messages: _Optional[bytes] = ..., count: _Optional[int] = ..., born_timestamp_ms: _Optional[int] = ..., producer_group: _Optional[str] = ...) -> None: ...

class SendBatchResponse(_message.Message):
    __slots__ = ("status", "queue_id", "first_queue_offset", "commitlog_offsets")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_QUEUE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMITLOG_OFFSETS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    queue_id: int
    first_queue_offset: int
    commitlog_offsets: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., queue_id: _Optional[int] = ..., first_queue_offset: _Optional[int] = ..., commitlog_offsets: _Optional[_Iterable[int]] = ...) -> None: ...
