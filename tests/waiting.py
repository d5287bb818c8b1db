"""The tests' one way to wait for a condition: poll it until a deadline, then fail naming what did not happen."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


def wait_until(predicate: Callable[[], bool], timeout: float = 20.0, what: str = "", *, interval: float = 0.02) -> None:
    """Return once ``predicate()`` is true; TimeoutError after ``timeout`` seconds otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float, what: str, interval: float = 0.1) -> None:
    """``wait_until`` for a coroutine check, sleeping on the running loop between tries."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        if await check():
            return
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(f"timed out after {timeout}s: {what}")
        await asyncio.sleep(interval)
