"""``oms.Future``: a ``concurrent.futures.Future`` with the OMS listener/get/get_throwable conveniences.

Unlike RocketMQ's ``DefaultPromise``, a ``get`` timeout is measured from the call and does not cancel.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable
from typing import Generic, TypeVar

from oms.errors import OMSTimeOutException
from orbitmq.errors import Code

V = TypeVar("V")
log = logging.getLogger("oms.future")


class Future(concurrent.futures.Future[V], Generic[V]):
    """The result of an asynchronous operation (e.g. ``Producer.send_async``)."""

    def add_listener(self, listener: Callable[[Future[V]], object]) -> Future[V]:
        """Call ``listener(self)`` exactly once when done (now, on this thread, if already done)."""

        def call(fut: concurrent.futures.Future[V]) -> None:
            try:
                listener(self)
            except Exception:  # a listener's bug must not hide the result from other listeners
                log.exception("future listener %r failed", listener)

        self.add_done_callback(call)
        return self

    def get(self, timeout: float | None = None) -> V:
        """The result, waiting at most ``timeout`` seconds from now; raises the operation's exception.

        A timeout raises ``OMSTimeOutException`` and leaves the operation running (it is not cancelled).
        """
        try:
            return self.result(timeout)
        except concurrent.futures.TimeoutError:
            raise OMSTimeOutException(Code.REQUEST_TIMEOUT, f"no result within {timeout}s") from None

    def get_throwable(self) -> BaseException | None:
        """The exception of a failed operation, None on success or while not done (never blocks)."""
        if not self.done() or self.cancelled():
            return None
        return self.exception(0)

    def is_done(self) -> bool:
        return self.done()

    def is_cancelled(self) -> bool:
        return self.cancelled()
