"""The one-byte wake-up of the worker's event loop (no broker): messages readied while the worker empties the pipe
are never left without a byte in it."""

from __future__ import annotations

import os
import select
from collections.abc import Iterator
from typing import Any

import pytest
from kombu import Connection

import transports.celery.transport as transport_module
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
