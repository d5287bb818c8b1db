"""Edge helpers: run a handler and turn ``MQError``/unexpected exceptions into a response status.

Business errors never become gRPC errors (protocol-v2 §1.4): the gRPC status stays OK.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from common.errors import MQError
from common.logging import get_logger
from common.v2.status import internal_error_status, status_from_error

R = TypeVar("R")
log = get_logger("broker.grpc")


async def guarded(rpc: str, response_cls: Callable[..., R], handler: Callable[[], Awaitable[R]]) -> R:
    """``await handler()``; on error a ``response_cls(status=...)`` naming the code and the cause."""
    try:
        return await handler()
    except MQError as exc:
        log.info("request refused", rpc=rpc, code=exc.code.name, reason=exc.message)
        return response_cls(status=status_from_error(exc))
    except Exception as exc:
        log.exception("request failed", rpc=rpc, error=repr(exc))
        return response_cls(status=internal_error_status(exc))


def error_status(exc: BaseException) -> Any:
    if isinstance(exc, MQError):
        return status_from_error(exc)
    return internal_error_status(exc)
