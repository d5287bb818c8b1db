"""The OMS exception hierarchy: every error carries a v2 status ``code`` (the broker's, or a client-side one).

``exception_for`` maps a broker status to the most specific class, so callers can catch by meaning.
"""

from __future__ import annotations

import grpc

from orbitmq.errors import Code, MQError


class OMSException(Exception):
    """Base of all OMS errors: ``code`` is the v2 status code, ``message`` the text naming what went wrong."""

    def __init__(self, code: int | Code, message: str) -> None:
        super().__init__(message)
        try:
            self.code: Code | int = Code(int(code))
        except ValueError:  # a newer server may send a code this client does not know: keep the number
            self.code = int(code)
        self.message = message

    @property
    def error_code(self) -> int:
        """The OMS Java name of ``code``."""
        return int(self.code)

    def __str__(self) -> str:
        name = self.code.name if isinstance(self.code, Code) else "UNKNOWN"
        return f"{name}({int(self.code)}): {self.message}"


class OMSRuntimeException(OMSException):
    """A failure at run time: the broker refused the request, or it could not be delivered."""


class OMSTimeOutException(OMSRuntimeException, TimeoutError):
    """The request (or the broker's flush/replication it waited for) did not finish in time."""


OMSTimeoutException = OMSTimeOutException  # the spelling Python users expect


class OMSNotSupportedException(OMSRuntimeException, NotImplementedError):
    """The feature or header is not supported by this client or by the broker."""


class OMSResourceNotExistException(OMSRuntimeException, LookupError):
    """The topic, group or offset does not exist (e.g. TOPIC_NOT_FOUND with auto-creation off)."""


class OMSMessageFormatException(OMSRuntimeException, ValueError):
    """The message or a name in the request is invalid (illegal topic, tag, key, body size, properties...)."""


class OMSSecurityException(OMSRuntimeException, PermissionError):
    """Authentication or authorization failed (UNAUTHORIZED, FORBIDDEN)."""


class OMSTransactionException(OMSRuntimeException):
    """A transactional send could not be prepared or ended."""


class OMSConnectionException(OMSRuntimeException, ConnectionError):
    """The broker could not be reached or the connection broke (the request may not have arrived)."""


class OMSIllegalStateException(OMSRuntimeException):
    """The object is not in a state that allows the call (not started, already shut down)."""

    def __init__(self, message: str) -> None:
        super().__init__(Code.PRECONDITION_FAILED, message)


_TIMEOUT_CODES = frozenset(
    {Code.REQUEST_TIMEOUT, Code.PROXY_TIMEOUT, Code.MASTER_PERSISTENCE_TIMEOUT, Code.SLAVE_PERSISTENCE_TIMEOUT}
)
_NOT_SUPPORTED_CODES = frozenset(
    {Code.NOT_IMPLEMENTED, Code.UNSUPPORTED, Code.VERSION_UNSUPPORTED, Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED}
)
_NOT_FOUND_CODES = frozenset(
    {Code.NOT_FOUND, Code.TOPIC_NOT_FOUND, Code.CONSUMER_GROUP_NOT_FOUND, Code.OFFSET_NOT_FOUND}
)
_SECURITY_CODES = frozenset({Code.UNAUTHORIZED, Code.FORBIDDEN, Code.PAYMENT_REQUIRED})


def exception_class(code: int) -> type[OMSException]:
    """The most specific exception class for a v2 status code."""
    if code in _TIMEOUT_CODES:
        return OMSTimeOutException
    if code in _NOT_SUPPORTED_CODES:
        return OMSNotSupportedException
    if code in _NOT_FOUND_CODES:
        return OMSResourceNotExistException
    if code in _SECURITY_CODES:
        return OMSSecurityException
    # 400xx bad request family, 413xx payload too large, 431xx properties too large: the input is wrong
    if 40000 <= code < 40100 or 41300 <= code < 41400 or 43100 <= code < 43200:
        return OMSMessageFormatException
    return OMSRuntimeException


def exception_for(code: int, message: str) -> OMSException:
    return exception_class(code)(code, message)


def from_mq_error(error: MQError) -> OMSException:
    """A shared validation error (``orbitmq.validation``) as the OMS exception of the same code."""
    return exception_for(int(error.code), error.message)


def from_rpc_error(error: grpc.RpcError, what: str) -> OMSException:
    """A transport-level failure (no v2 status came back): timeouts keep their meaning, the rest is runtime."""
    # both grpc.Call (sync stubs) and grpc.aio.AioRpcError offer code()/details()
    code_fn, details_fn = getattr(error, "code", None), getattr(error, "details", None)
    status = code_fn() if callable(code_fn) else None
    details = details_fn() if callable(details_fn) else str(error)
    text = f"{what}: gRPC {status.name if status else 'error'}: {details}"
    if status == grpc.StatusCode.DEADLINE_EXCEEDED:
        return OMSTimeOutException(Code.REQUEST_TIMEOUT, text)
    if status == grpc.StatusCode.UNIMPLEMENTED:
        return OMSNotSupportedException(Code.NOT_IMPLEMENTED, text)
    if status in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
        return OMSSecurityException(Code.UNAUTHORIZED, text)
    return OMSConnectionException(Code.INTERNAL_ERROR, text)
