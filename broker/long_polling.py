"""Long polling: requests at a queue's end park here and wake as soon as the store dispatches a message.

The store calls ``on_arrival`` after each append, and only when someone waits on that topic does anything happen,
so a busy store does not flood the loop. An append made on the loop's own thread (the gRPC puts) wakes the waiters
right there; one made on another thread hops into the loop with ``call_soon_threadsafe``.

A woken waiter resumes its request in the loop's next iteration: the parked future is awaited directly, with a
``call_later`` timer for the timeout, instead of ``wait_for(shield(...))`` whose chain of done-callbacks costs three
iterations, each queued behind whatever else the loop has ready (the producer's own response, for one).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class _OffsetSource(Protocol):
    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int: ...


@dataclass(eq=False)
class _Waiter:
    queue_id: int | None
    min_offset: int | None
    future: asyncio.Future[bool] = field(repr=False)

    def wants(self, queue_id: int, max_offset: int) -> bool:
        if self.queue_id is not None and self.queue_id != queue_id:
            return False
        return self.min_offset is None or max_offset > self.min_offset


def _expire(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)


class LongPollingService:
    """Parks waiters per topic; ``notify`` wakes those whose queue moved past their offset."""

    def __init__(self, loop: asyncio.AbstractEventLoop, offsets: _OffsetSource | None = None) -> None:
        self._loop = loop
        self._offsets = offsets
        self._waiters: dict[str, set[_Waiter]] = {}
        self._closed = False
        self._loop_thread: int | None = None  # learnt in wait(), which always runs on the loop

    @property
    def waiting(self) -> int:
        return sum(len(w) for w in self._waiters.values())

    def on_arrival(self, topic: str, queue_id: int, max_offset: int) -> None:
        """Store callback (``add_arriving_listener``), from any thread: a message is readable up to ``max_offset``."""
        # A plain membership test is safe from another thread and keeps idle topics free of loop hops.
        if topic in self._waiters:
            if threading.get_ident() == self._loop_thread:
                self.notify(topic, queue_id, max_offset)  # only resolves futures: safe inside the store's put
            else:
                self._loop.call_soon_threadsafe(self.notify, topic, queue_id, max_offset)

    def notify(self, topic: str, queue_id: int, max_offset: int | None = None) -> None:
        """Loop-side wake-up; ``max_offset`` None wakes every waiter of the queue (e.g. a message became visible)."""
        waiters = self._waiters.get(topic)
        if not waiters:
            return
        for w in list(waiters):
            if w.future.done():
                continue
            if max_offset is None:
                if w.queue_id is None or w.queue_id == queue_id:
                    w.future.set_result(True)
            elif w.wants(queue_id, max_offset):
                w.future.set_result(True)

    async def wait(
        self,
        topic: str,
        queue_id: int | None,
        min_offset: int | None,
        timeout: float,
        ready: Callable[[], bool] | None = None,
    ) -> bool:
        """True as soon as ``topic`` (``queue_id``, or any queue) has a message beyond ``min_offset``; False at timeout.

        ``ready`` is re-checked after the waiter is registered, closing the race with an arrival in between;
        when ``queue_id`` and ``min_offset`` are given the store's max offset is checked the same way.
        """
        if timeout <= 0 or self._closed:
            return False
        self._loop_thread = threading.get_ident()
        waiter = _Waiter(queue_id, min_offset, self._loop.create_future())
        timer: asyncio.TimerHandle | None = None
        self._waiters.setdefault(topic, set()).add(waiter)
        try:
            if ready is not None and ready():
                return True
            if (
                self._offsets is not None
                and queue_id is not None
                and min_offset is not None
                and self._offsets.get_max_offset_in_queue(topic, queue_id) > min_offset
            ):
                return True
            timer = self._loop.call_later(timeout, _expire, waiter.future)
            return await waiter.future
        finally:
            if timer is not None:
                timer.cancel()
            waiters = self._waiters.get(topic)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[topic]
            if not waiter.future.done():
                waiter.future.cancel()

    def wake_all(self) -> None:
        """At shutdown: release every parked request (they see False) and refuse new waits."""
        self._closed = True
        for waiters in self._waiters.values():
            for w in waiters:
                if not w.future.done():
                    w.future.set_result(False)
