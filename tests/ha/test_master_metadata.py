"""The master's METADATA answer: a peer that reads it gets the tables; one that asks and never reads is dropped
after haHousekeepingInterval, as a silent slave is, rather than holding a task and the unsent answer."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.ha.master import HAMasterConfig, HAService
from broker.ha.protocol import ConnectionKind, Hello
from broker.ha.sync import fetch_metadata
from broker.store.config import MessageStoreConfig
from broker.store.message_store import DefaultMessageStore

HOUSEKEEPING_S = 0.5
# far more than loopback's socket buffers hold, so the answer backs up in the master while nobody reads
BIG_METADATA = {"topics": {"topicConfigTable": {f"T{i:06d}": {"x": "y" * 200} for i in range(80_000)}}}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DefaultMessageStore]:
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=1 << 20, warmMapedFileEnable=False)
    s = DefaultMessageStore(cfg, ("127.0.0.1", 10911))
    s.load()
    s.start()
    yield s
    s.shutdown()


def _service(store: DefaultMessageStore) -> HAService:
    config = HAMasterConfig(
        host="127.0.0.1",
        port=0,
        transfer_batch_size=32 * 1024,
        heartbeat_interval_s=1.0,
        housekeeping_interval_s=HOUSEKEEPING_S,
        sync_timeout_s=1.0,
        fallbehind_max=1 << 20,
    )
    return HAService(store, config, lambda: BIG_METADATA)


def test_a_peer_that_never_reads_its_metadata_is_dropped(store: DefaultMessageStore) -> None:
    async def scenario() -> None:
        service = _service(store)
        port = await service.start()
        try:
            assert await fetch_metadata(f"127.0.0.1:{port}", 30) == BIG_METADATA  # a reader gets all of it

            silent = socket.socket()
            silent.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            silent.setblocking(False)
            await asyncio.get_running_loop().sock_connect(silent, ("127.0.0.1", port))
            try:
                silent.send(Hello(ConnectionKind.METADATA, 0).encode())
                deadline = time.monotonic() + 0.2
                while not service._tasks and time.monotonic() < deadline:
                    await asyncio.sleep(0.01)
                assert service._tasks, "the master did not take the connection"
                started = time.monotonic()
                while service._tasks and time.monotonic() - started < 10 * HOUSEKEEPING_S + 5:
                    await asyncio.sleep(0.05)
                assert not service._tasks, "the master still holds the connection of a peer that reads nothing"
                assert time.monotonic() - started >= HOUSEKEEPING_S * 0.8  # dropped for its silence, not at once
            finally:
                silent.close()

            assert await fetch_metadata(f"127.0.0.1:{port}", 30) == BIG_METADATA  # and others are still served
        finally:
            await service.shutdown()

    asyncio.run(asyncio.wait_for(scenario(), 120))
