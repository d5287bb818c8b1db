from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class DescribeTransportsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeTransportsResponse(_message.Message):
    __slots__ = ("frames_addr", "max_frame_bytes")
    FRAMES_ADDR_FIELD_NUMBER: _ClassVar[int]
    MAX_FRAME_BYTES_FIELD_NUMBER: _ClassVar[int]
    frames_addr: str
    max_frame_bytes: int
    def __init__(self, frames_addr: _Optional[str] = ..., max_frame_bytes: _Optional[int] = ...) -> None: ...
