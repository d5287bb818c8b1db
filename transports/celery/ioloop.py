"""The transport's one I/O thread: an asyncio loop on which every fetcher (one per consumed queue) and the settler run.

Why one loop and not a thread per job: a blocked thread per fetcher and another for settling meant a thread wake-up
(and a GIL hand-over with the worker's event loop) for every ack and every receive. On one loop, a fetcher waiting
for credit is woken only when enough credit is free, and acks reach the settler without a wake-up while it is busy.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger("transports.celery")


class IoLoopClosed(RuntimeError):
    """Work was submitted to an I/O loop that was stopped (the connection closed)."""


class IoLoop:
    def __init__(self, name: str) -> None:
        self.name = name
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._lock = threading.Lock()
        self._running = False

    def start(self) -> None:
        with self._lock:
            self._running = True
            self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            # a fetcher still in a long poll when the connection closes: cut it short (see docs/celery.md, gaps)
            pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.close()

    def in_loop(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coro`` on the loop (from any thread)."""
        with self._lock:
            if not self._running:
                coro.close()
                raise IoLoopClosed(f"{self.name} is stopped")
            return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call_soon(self, callback: Callable[[], Any]) -> None:
        """Run ``callback`` on the loop soon (from any thread); dropped once the loop is stopped."""
        with self._lock:
            if self._running:
                self.loop.call_soon_threadsafe(callback)

    def stop(self, timeout: float) -> None:
        with self._lock:
            if not self._running:
                return
            self._running = False
            self.loop.call_soon_threadsafe(self.loop.stop)
        if not self.in_loop():
            self._thread.join(timeout)
            if self._thread.is_alive():
                log.warning("%s did not stop within %.1fs", self.name, timeout)
