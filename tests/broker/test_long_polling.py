"""Long polling's wake-up path: an append on the loop's thread wakes waiters at once, other threads hop in."""

from __future__ import annotations

import asyncio
import threading

from broker.long_polling import LongPollingService


class _Offsets:
    max_offset = 0

    def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
        return self.max_offset


def test_arrival_on_the_loop_thread_resolves_the_waiter_before_returning():
    async def scenario() -> None:
        offsets = _Offsets()
        lp = LongPollingService(asyncio.get_running_loop(), offsets)
        task = asyncio.create_task(lp.wait("T", 0, 0, 5))
        await asyncio.sleep(0)  # parked
        (waiter,) = next(iter(lp._waiters.values()))
        offsets.max_offset = 1
        lp.on_arrival("T", 0, 1)  # as a put made by a gRPC handler calls it
        assert waiter.future.done() and waiter.future.result() is True  # no loop iteration needed
        assert await task is True
        assert lp.waiting == 0

    asyncio.run(scenario())


def test_arrival_from_another_thread_and_timeout():
    async def scenario() -> None:
        offsets = _Offsets()
        lp = LongPollingService(asyncio.get_running_loop(), offsets)
        task = asyncio.create_task(lp.wait("T", None, None, 5))
        await asyncio.sleep(0)
        thread = threading.Thread(target=lp.on_arrival, args=("T", 3, 7))
        thread.start()
        thread.join()
        assert await asyncio.wait_for(task, 1) is True
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert await lp.wait("T", 0, 7, 0.05) is False  # nothing past offset 7: the timer answers False
        assert 0.04 <= loop.time() - t0 < 1
        assert lp.waiting == 0 and not lp._waiters

    asyncio.run(scenario())


def test_cancelled_waiter_leaves_nothing_behind():
    async def scenario() -> None:
        lp = LongPollingService(asyncio.get_running_loop(), _Offsets())
        task = asyncio.create_task(lp.wait("T", 0, 0, 5))
        await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert task.cancelled() and lp.waiting == 0
        lp.on_arrival("T", 0, 1)  # no waiter left: nothing to do

    asyncio.run(scenario())
