"""Errors with codes at the core; the gRPC edge turns them into a v2 ``Status``.

Codes are the RocketMQ 5 ``apache.rocketmq.v2.Code`` values so one number means the same everywhere.
"""

from __future__ import annotations

from enum import IntEnum

from rocketmq.grpc_protocol import definition_pb2

# One Python enum mirroring the protocol's codes, so core code never imports protobuf to raise.
Code = IntEnum("Code", dict(definition_pb2.Code.items()))  # type: ignore[misc]


class MQError(Exception):
    """An error a user can act on: a protocol status code and a message naming the field and limit."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = Code(code)
        self.message = message

    def __str__(self) -> str:
        return f"{self.code.name}({int(self.code)}): {self.message}"
