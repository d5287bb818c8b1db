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

class ReceiveBatchRequest(_message.Message):
    __slots__ = ("group", "topic", "queue_id", "batch_size", "invisible_ms", "auto_renew", "long_polling_ms", "filter_type", "filter_expression", "attempt_id")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ID_FIELD_NUMBER: _ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    INVISIBLE_MS_FIELD_NUMBER: _ClassVar[int]
    AUTO_RENEW_FIELD_NUMBER: _ClassVar[int]
    LONG_POLLING_MS_FIELD_NUMBER: _ClassVar[int]
    FILTER_TYPE_FIELD_NUMBER: _ClassVar[int]
    FILTER_EXPRESSION_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_ID_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    queue_id: int
    batch_size: int
    invisible_ms: int
    auto_renew: bool
    long_polling_ms: int
    filter_type: str
    filter_expression: str
    attempt_id: str
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., queue_id: _Optional[int] = ..., batch_size: _Optional[int] = ..., invisible_ms: _Optional[int] = ..., auto_renew: _Optional[bool] = ..., long_polling_ms: _Optional[int] = ..., filter_type: _Optional[str] = ..., filter_expression: _Optional[str] = ..., attempt_id: _Optional[str] = ...) -> None: ...

class ReceiveBatchResponse(_message.Message):
    __slots__ = ("status", "count", "records", "receipt_handles", "delivery_attempts", "invisible_ms", "delivery_timestamp_ms")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLES_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    INVISIBLE_MS_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    status: Status
    count: int
    records: bytes
    receipt_handles: _containers.RepeatedScalarFieldContainer[str]
    delivery_attempts: _containers.RepeatedScalarFieldContainer[int]
    invisible_ms: int
    delivery_timestamp_ms: int
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., count: _Optional[int] = ..., records: _Optional[bytes] = ..., receipt_handles: _Optional[_Iterable[str]] = ..., delivery_attempts: _Optional[_Iterable[int]] = ..., invisible_ms: _Optional[int] = ..., delivery_timestamp_ms: _Optional[int] = ...) -> None: ...

class AckBatchRequest(_message.Message):
    __slots__ = ("group", "topic", "receipt_handles")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HANDLES_FIELD_NUMBER: _ClassVar[int]
    group: str
    topic: str
    receipt_handles: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, group: _Optional[str] = ..., topic: _Optional[str] = ..., receipt_handles: _Optional[_Iterable[str]] = ...) -> None: ...

class AckFailure(_message.Message):
    __slots__ = ("index", "status")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    index: int
    status: Status
    def __init__(self, index: _Optional[int] = ..., status: _Optional[_Union[Status, _Mapping]] = ...) -> None: ...

class AckBatchResponse(_message.Message):
    __slots__ = ("status", "failures")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    status: Status
    failures: _containers.RepeatedCompositeFieldContainer[AckFailure]
    def __init__(self, status: _Optional[_Union[Status, _Mapping]] = ..., failures: _Optional[_Iterable[_Union[AckFailure, _Mapping]]] = ...) -> None: ...
