"""The one-byte wake-up of the worker's event loop (no broker): messages readied while the worker empties the pipe
are never left without a byte in it."""

from __future__ import annotations

import asyncio
import os
import select
from collections.abc import Iterator
from typing import Any

import pytest
from kombu import Connection

import transports.celery.transport as transport_module
from oms.client.loop import LoopThread
from transports.celery.transport import Transport


@pytest.fixture
def transport() -> Iterator[Transport]:
    t = Transport(Connection("rocketmq://127.0.0.1:1"))  # never connects: only the ready queue and its pipe
    yield t
    for fd in (t._wake_r, t._wake_w):
        os.close(fd)


def _pipe_has_byte(t: Transport) -> bool:
    return bool(select.select([t._wake_r], [], [], 0)[0])


def _ready(t: Transport, body: str) -> None:
    t._ready_for(None, "q", [{"body": body}])  # type: ignore[arg-type]  # the channel is only carried along


def test_a_message_readied_during_the_drain_of_the_pipe_still_wakes_the_worker(
    transport: Transport, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ready(transport, "first")
    assert _pipe_has_byte(transport)
    real_read = os.read
    calls = 0

    def read_while_the_loop_readies(fd: int, n: int) -> bytes:
        nonlocal calls
        calls += 1
        if calls == 1:
            _ready(transport, "during the drain")  # the I/O loop, between the worker's steps
        return real_read(fd, n)

    monkeypatch.setattr(transport_module.os, "read", read_while_the_loop_readies)
    transport._drain_pipe()
    monkeypatch.undo()
    taken: list[Any] = []
    while transport._ready:
        taken.append(transport._ready.popleft()[2]["body"])  # what _deliver_ready hands to kombu
    assert taken == ["first", "during the drain"]
    _ready(transport, "after the drain")
    assert _pipe_has_byte(transport), "a message readied after the worker took everything left no byte to wake it"
    transport._drain_pipe()
    assert not _pipe_has_byte(transport)


def test_a_message_readied_on_the_io_loop_wakes_the_worker_once_that_loop_turns(transport: Transport) -> None:
    """On the I/O loop the byte is written at the loop's next turn (after the fetcher sent its next receive), so
    the worker's thread is not woken into a wait for the GIL; it must still be written, once."""
    io = LoopThread("test-io")
    io.start()
    transport._io = io
    try:

        async def ready_on_the_loop() -> tuple[bool, bool]:
            _ready(transport, "from a fetcher")
            _ready(transport, "same turn")  # one byte for both: the worker is already being woken
            before = _pipe_has_byte(transport)
            await asyncio.sleep(0)  # the loop's next turn runs the write
            return before, _pipe_has_byte(transport)

        before, after = io.run(ready_on_the_loop(), timeout=10)
    finally:
        transport._io = None
        io.stop()
    assert not before, "the byte was written while the fetcher still held the loop"
    assert after, "no byte after the loop turned: the worker would sleep with messages ready"
    assert os.read(transport._wake_r, 16) == b"x"
    assert [entry[2]["body"] for entry in transport._ready] == ["from a fetcher", "same turn"]
