"""Retention: old segments go at ``deleteWhen`` or when the disk is too full; queues' min offsets follow."""

from __future__ import annotations

import time
from pathlib import Path

from broker.store.message import MessageExtBrokerInner
from broker.store.message_store import DefaultMessageStore
from broker.store.results import GetMessageStatus
from tests.store.conftest import small_config


def make(root: Path, clock: list[float], usage: list[float], **overrides: object) -> DefaultMessageStore:
    store = DefaultMessageStore(
        small_config(root, **overrides), ("10.0.0.7", 8081), clock=lambda: clock[0], disk_usage=lambda _p: usage[0]
    )
    store.load()
    store.start()
    return store


def fill(store: DefaultMessageStore, n: int) -> None:
    for i in range(n):
        assert store.put_message(MessageExtBrokerInner("R", bytes([i % 256]) * 2000, i % 2, {"KEYS": f"k{i}"})).ok


def hour_ts(hour: int, days_later: float) -> float:
    lt = time.localtime()
    base = time.mktime((lt.tm_year, lt.tm_mon, lt.tm_mday, hour, 30, 0, 0, 0, -1))
    return base + days_later * 86400


def test_old_segments_deleted_at_delete_when_and_min_offsets_follow(tmp_path: Path) -> None:
    clock = [time.time()]
    usage = [0.1]
    store = make(tmp_path, clock, usage, deleteWhen="04", fileReservedTime=48)
    fill(store, 200)  # ~400 KB over 64 KiB segments
    segments_before = len(store.commitlog.files.files)
    assert segments_before >= 6
    clock[0] = hour_ts(5, 3)  # 3 days later, but not the delete hour
    assert store.delete_expired_files() == 0
    clock[0] = hour_ts(4, 1)  # the delete hour, but the files are younger than 48 h
    assert store.delete_expired_files() == 0
    clock[0] = hour_ts(4, 3)  # the delete hour and the files are old
    deleted = store.delete_expired_files()
    assert deleted == segments_before - 1, "every segment but the one being written"
    assert len(store.commitlog.files.files) == 1
    min_phys = store.get_min_phy_offset()
    for q in (0, 1):
        min_offset = store.get_min_offset_in_queue("R", q)
        assert min_offset > 0
        first = store.get_message("g", "R", q, min_offset, 1)
        assert first.status is GetMessageStatus.FOUND and first.messages[0].commitlog_offset >= min_phys
        assert store.get_message("g", "R", q, 0, 1).status is GetMessageStatus.OFFSET_TOO_SMALL
    store_min_offsets = [store.get_min_offset_in_queue("R", q) for q in (0, 1)]
    # the store keeps working and keeps its queue offsets
    before = store.get_max_offset_in_queue("R", 0)
    fill(store, 2)
    assert store.get_max_offset_in_queue("R", 0) == before + 1
    store.shutdown()
    again = DefaultMessageStore(small_config(tmp_path), ("10.0.0.7", 8081))
    again.load()
    assert again.get_min_offset_in_queue("R", 0) == store_min_offsets[0]
    assert again.get_min_offset_in_queue("R", 1) == store_min_offsets[1]
    again.shutdown()


def test_full_disk_deletes_early_one_segment_per_round(tmp_path: Path) -> None:
    clock = [hour_ts(12, 0)]
    usage = [0.9]
    store = make(tmp_path, clock, usage, deleteWhen="04", fileReservedTime=72, diskMaxUsedSpaceRatio=75)
    fill(store, 100)
    n = len(store.commitlog.files.files)
    assert store.delete_expired_files() == 1
    assert len(store.commitlog.files.files) == n - 1
    usage[0] = 0.5
    assert store.delete_expired_files() == 0
    store.shutdown()
