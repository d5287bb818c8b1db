"""A private asyncio event loop on one thread: the grpc.aio core runs there, sync APIs submit to it.

One per access point; ``stop()`` cancels what is left and joins the thread, so nothing outlives shutdown.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from oms.errors import OMSIllegalStateException

T = TypeVar("T")
log = logging.getLogger("oms.client.loop")


class LoopThread:
    def __init__(self, name: str) -> None:
        self.name = name
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._lock = threading.Lock()
        self._started = False
        self._stopped = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    @property
    def running(self) -> bool:
        return self._started and not self._stopped

    def start(self) -> None:
        with self._lock:
            if self._stopped:
                raise OMSIllegalStateException(f"{self.name} was stopped")
            if not self._started:
                self._started = True
                self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            # whatever is still pending (a stuck RPC, a forgotten task) is cancelled here, on the loop's own thread
            pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def in_loop(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop from any thread."""
        if not self.running:
            coro.close()
            raise OMSIllegalStateException(f"{self.name} is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def call_soon(self, callback: Callable[[], Any]) -> None:
        """Run ``callback`` on the loop soon (from any thread); dropped once the loop is stopped."""
        with self._lock:
            if self.running:
                self._loop.call_soon_threadsafe(callback)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for it (never from the loop thread: that would deadlock)."""
        if self.in_loop():
            coro.close()
            raise RuntimeError(f"blocking call from the {self.name} thread (use the async API there)")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise

    def stop(self, timeout: float = 10.0) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            started = self._started
        if not started:
            self._loop.close()
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        if not self.in_loop():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("%s did not stop within %.1fs", self.name, timeout)
