"""Edge helpers: run a handler and turn ``MQError``/unexpected exceptions into a response status.

Business errors never become gRPC errors (protocol-v2 §1.4): the gRPC status stays OK.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from orbitmq.errors import Code, MQError
from orbitmq.logging import get_logger
from orbitmq.v2.status import status

R = TypeVar("R")
StatusFactory = Callable[[int, str], Any]
log = get_logger("broker.grpc")


async def guarded(
    rpc: str,
    response_cls: Callable[..., R],
    handler: Callable[[], Awaitable[R]],
    make_status: StatusFactory = status,
) -> R:
    """``await handler()``; on error a ``response_cls(status=...)`` naming the code and the cause."""
    try:
        return await handler()
    except MQError as exc:
        log.info("request refused", rpc=rpc, code=exc.code.name, reason=exc.message)
        return response_cls(status=make_status(int(exc.code), exc.message))
    except Exception as exc:
        log.exception("request failed", rpc=rpc, error=repr(exc))
        return response_cls(status=make_status(int(Code.INTERNAL_SERVER_ERROR), f"{type(exc).__name__}: {exc}"))
