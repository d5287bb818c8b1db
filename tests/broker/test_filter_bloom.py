"""The Bloom pre-check in a real store: bits computed at dispatch skip non-matching entries without a commitlog
read, messages stored before a group registered fall back to evaluation, and stale units are never trusted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.builtin_plugins import builtin_plugins
from broker.config import BrokerConfig
from broker.consumer_filter_manager import ConsumerFilterManager
from broker.plugins import BrokerPlugins
from broker.store.config import MessageStoreConfig
from broker.store.message import MessageExtBrokerInner
from broker.store.message_store import DefaultMessageStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DefaultMessageStore]:
    cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=1 << 20, warmMapedFileEnable=False)
    s = DefaultMessageStore(cfg, ("127.0.0.1", 10911))
    s.load()
    s.start()
    yield s
    s.shutdown()


def _manager(store: DefaultMessageStore, root: Path) -> tuple[BrokerPlugins, ConsumerFilterManager]:
    plugins = BrokerPlugins.create(builtin_plugins(BrokerConfig(), root), load_entry_points=False)
    manager = ConsumerFilterManager(
        root / "config" / "consumerFilter.json", store, plugins.compile_filter, plugins.filter_bits
    )
    manager.load()
    return plugins, manager


def _put(store: DefaultMessageStore, start: int, n: int) -> None:
    msgs = [MessageExtBrokerInner("BloomT", f"m{i}".encode(), 0, {"n": str(i % 100)}) for i in range(start, start + n)]
    assert all(r.ok for r in store.put_messages(msgs))


def _drain(store: DefaultMessageStore, group: str, msg_filter: object) -> list[bytes]:
    bodies: list[bytes] = []
    offset = 0
    while offset < store.get_max_offset_in_queue("BloomT", 0):
        r = store.get_message(group, "BloomT", 0, offset, 32, msg_filter)  # type: ignore[arg-type]
        bodies += [m.body for m in r.messages]
        offset = r.next_begin_offset
    return bodies


def test_bits_skip_commitlog_reads_and_early_messages_are_evaluated(store: DefaultMessageStore, tmp_path: Path):
    plugins, manager = _manager(store, tmp_path)
    _put(store, 0, 200)  # before the group registers: no bits for it
    compiled = plugins.compile_filter("SQL92", "n = 7")
    bloom_filter = manager.filter_for("G1", "BloomT", compiled)
    _put(store, 200, 1000)

    reads = {"n": 0}
    real_read = store.commitlog.read

    def counting_read(*args, **kwargs):
        reads["n"] += 1
        return real_read(*args, **kwargs)

    store.commitlog.read = counting_read  # type: ignore[method-assign]
    got = _drain(store, "G1", bloom_filter)
    expected = [f"m{i}".encode() for i in range(1200) if i % 100 == 7]
    assert got == expected
    with_bloom = reads["n"]
    reads["n"] = 0
    assert _drain(store, "G1", compiled) == expected
    without = reads["n"]
    assert without == 1200  # plain evaluation reads every message
    # 200 early messages are read and evaluated; of the 1000 later ones only Bloom hits are read (10 true
    # matches plus false positives, which the evaluation then rejects).
    assert 210 <= with_bloom < 200 + 1000 // 2


def test_stale_ext_unit_is_not_trusted(store: DefaultMessageStore, tmp_path: Path):
    plugins, manager = _manager(store, tmp_path)
    compiled = plugins.compile_filter("SQL92", "n = 7")
    bloom_filter = manager.filter_for("G1", "BloomT", compiled)
    _put(store, 0, 10)
    # A unit written for another commitlog offset (e.g. before a crash truncated the log) must be ignored.
    cq_entry = store.queues[("BloomT", 0)].get(7)
    assert cq_entry is not None
    store.put_cq_ext("BloomT", 0, 7, cq_entry[0] + 1, bytes(manager.bloom.byte_length))
    assert _drain(store, "G1", bloom_filter) == [b"m7"]


def test_registrations_persist(store: DefaultMessageStore, tmp_path: Path):
    plugins, manager = _manager(store, tmp_path)
    manager.filter_for("G1", "BloomT", plugins.compile_filter("SQL92", "n > 50"))
    manager.close()  # the file is written off the caller's thread; close() waits for it, as broker shutdown does
    again = ConsumerFilterManager(
        tmp_path / "config" / "consumerFilter.json", store, plugins.compile_filter, plugins.filter_bits
    )
    again.load()
    [reg] = again.registrations("BloomT")
    assert (reg.group, reg.expression) == ("G1", "n > 50")
