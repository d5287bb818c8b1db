from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.store.config import FlushDiskType, MessageStoreConfig
from broker.store.message_store import DefaultMessageStore


def small_config(root: Path, **overrides: object) -> MessageStoreConfig:
    values: dict[str, object] = {
        "storePathRootDir": str(root),
        "mappedFileSizeCommitLog": 64 * 1024,
        "mappedFileSizeConsumeQueue": 20 * 256,
        "flushDiskType": FlushDiskType.ASYNC_FLUSH,
        "flushIntervalCommitLog": 50,
        "flushIntervalConsumeQueue": 100,
        "maxHashSlotNum": 256,
        "maxIndexNum": 1024,
        "cleanResourceInterval": 3_600_000,
    }
    values.update(overrides)
    return MessageStoreConfig(**values)  # type: ignore[arg-type]


StoreFactory = Callable[..., DefaultMessageStore]


@pytest.fixture
def store_factory(tmp_path: Path) -> Iterator[StoreFactory]:
    opened: list[DefaultMessageStore] = []

    def make(**overrides: object) -> DefaultMessageStore:
        store = DefaultMessageStore(small_config(tmp_path / "store", **overrides), ("10.0.0.7", 8081))
        store.load()
        store.start()
        opened.append(store)
        return store

    yield make
    for store in opened:
        if store._running:
            store.shutdown()
