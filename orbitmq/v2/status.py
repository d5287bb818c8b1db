"""Building v2 ``Status`` messages: every response carries a real code (never 0, see protocol P1).

Core code raises ``MQError``; the gRPC edge turns it into a status with these helpers.
"""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2

from orbitmq.errors import Code, MQError


def status(code: int, message: str = "") -> definition_pb2.Status:
    """A Status with ``code``; the message defaults to the code's name, as the reference proxy does."""
    if int(code) == 0:
        raise ValueError("status code 0 (CODE_UNSPECIFIED) is illegal for the client")
    return definition_pb2.Status(code=int(code), message=message or Code(int(code)).name)


def ok_status() -> definition_pb2.Status:
    return status(definition_pb2.Code.OK, "OK")


def status_from_error(error: MQError) -> definition_pb2.Status:
    return status(error.code, error.message)


def internal_error_status(error: BaseException) -> definition_pb2.Status:
    """For unexpected exceptions at the edge: INTERNAL_SERVER_ERROR naming the exception."""
    return status(definition_pb2.Code.INTERNAL_SERVER_ERROR, f"{type(error).__name__}: {error}")
