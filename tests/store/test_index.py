"""IndexFile/IndexService: every put key is found, time ranges and limits hold, files roll when full."""

from __future__ import annotations

import tempfile
import zlib
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.store.index_file import ENTRY, HEADER_SIZE, SLOT, IndexFile, IndexService, KeyHash, key_hash
from broker.store.message import java_string_hash

keys = st.text(alphabet="abcdefgh0123", min_size=1, max_size=6)


@given(st.lists(st.tuples(keys, st.integers(0, 10_000)), min_size=1, max_size=300))
@settings(max_examples=60, deadline=None)
def test_every_key_is_found_with_all_its_offsets(entries: list[tuple[str, int]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        service = IndexService(Path(d), slot_num=16, index_num=64)  # tiny: forces collisions and rolling
        service.load()
        base = 1_700_000_000_000
        expected: dict[str, list[int]] = {}
        for phys, (key, dt) in enumerate(entries):
            service.build_index("T", (key,), None, phys, base + dt)
            expected.setdefault(key, []).append(phys)
        for key, offsets in expected.items():
            found = service.query("T", key, 10_000, base - 1, base + 20_000)
            # hash collisions may add candidates (the store re-checks keys), but never lose one
            assert set(offsets) <= set(found)
        service.shutdown()


def test_time_range_and_limit(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "1", slot_num=64, index_num=100)
    base = 1_700_000_000_000
    for i in range(50):
        assert f.put("T", "k", i, base + i * 10_000)
    assert len(f.select("T", "k", 100, base, base + 1_000_000)) == 50
    assert len(f.select("T", "k", 7, base, base + 1_000_000)) == 7
    window = f.select("T", "k", 100, base + 100_000, base + 200_000)
    assert set(range(10, 21)) <= set(window) and all(9 <= p <= 21 for p in window)
    f.close()
    reopened = IndexFile(tmp_path / "1", slot_num=64, index_num=100)
    assert reopened.header.index_count == 51
    assert len(reopened.select("T", "k", 100, base, base + 1_000_000)) == 50
    reopened.close()


def test_full_file_refuses_and_service_rolls(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "1", slot_num=8, index_num=4)
    assert [f.put("T", f"k{i}", i, 1000) for i in range(4)] == [True, True, True, False]
    f.close()
    service = IndexService(tmp_path / "svc", slot_num=8, index_num=4)
    service.load()
    for i in range(10):
        service.build_index("T", (f"k{i}",), None, i, 1000 + i)
    assert len(service.files) >= 3
    assert service.query("T", "k9", 5, 0, 10**13) == [9]
    assert service.query("T", "k0", 5, 0, 10**13) == [0]
    service.shutdown()


@given(st.text(min_size=1, max_size=30), st.text(max_size=60))
@settings(max_examples=200, deadline=None)
def test_slot_hash_is_javas_hash_of_topic_hash_key(topic: str, key: str) -> None:
    """The per-topic shortcut must give RocketMQ's hash of ``topic#key`` (UTF-16 units, astral characters too)."""
    assert key_hash(topic, key) == abs(java_string_hash(f"{topic}#{key}")) & 0x7FFFFFFF


def test_upgraded_store_keeps_java_hash_files_and_writes_crc32_files(tmp_path: Path) -> None:
    """Files named ``<millis>`` (RocketMQ's hash, written before the CRC32 files) keep answering queries after an
    upgrade; new keys go to a new ``<millis>.crc32`` file at once, not into the old file's free space."""
    base = 1_700_000_000_000
    old = IndexFile(tmp_path / str(base), slot_num=64, index_num=100)
    assert old.key_hash is KeyHash.JAVA
    assert old.put("T", "before", 7, base)
    entry_hash = ENTRY.unpack_from(old.mm, HEADER_SIZE + 64 * SLOT.size + 1 * ENTRY.size)[0]
    assert entry_hash == key_hash("T", "before"), "a Java-hash file holds RocketMQ's hash"
    old.close()

    service = IndexService(tmp_path, slot_num=64, index_num=100)
    service.load()
    assert [f.key_hash for f in service.files] == [KeyHash.JAVA]
    service.build_index("T", ("after",), None, 8, base + 1000)
    assert [f.key_hash for f in service.files] == [KeyHash.JAVA, KeyHash.CRC32]
    new = service.files[-1]
    assert new.path.name.endswith(".crc32") and int(new.path.name.split(".")[0]) > base
    assert ENTRY.unpack_from(new.mm, HEADER_SIZE + 64 * SLOT.size + 1 * ENTRY.size)[0] == (
        zlib.crc32(b"T#after") & 0x7FFFFFFF
    )
    assert service.query("T", "before", 5, 0, 10**13) == [7]
    assert service.query("T", "after", 5, 0, 10**13) == [8]
    service.shutdown()

    reloaded = IndexService(tmp_path, slot_num=64, index_num=100)
    reloaded.load()
    assert [f.key_hash for f in reloaded.files] == [KeyHash.JAVA, KeyHash.CRC32], "oldest first across both names"
    assert reloaded.query("T", "before", 5, 0, 10**13) == [7]
    assert reloaded.query("T", "after", 5, 0, 10**13) == [8]
    reloaded.shutdown()


def test_index_file_names() -> None:
    assert KeyHash.of("1700000000000") is KeyHash.JAVA
    assert KeyHash.of("1700000000000.crc32") is KeyHash.CRC32
    assert KeyHash.of("1700000000000.tmp") is None and KeyHash.of("lock") is None


@given(
    st.lists(st.tuples(st.sampled_from(["T", "主题"]), st.lists(keys, min_size=1, max_size=40)), max_size=8),
    st.integers(0, 50_000),
)
@settings(max_examples=40, deadline=None)
def test_key_columns_write_what_single_puts_write(puts: list[tuple[str, list[str]]], step_ms: int) -> None:
    """build_keys (a plain or column batch's keys: one topic, one store time per put) leaves the same files, byte
    for byte, as one build_index per key, across file rolls."""
    base = 1_700_000_000_000
    with tempfile.TemporaryDirectory() as d:
        single = IndexService(Path(d) / "single", slot_num=16, index_num=32)
        columns = IndexService(Path(d) / "columns", slot_num=16, index_num=32)
        single.load()
        columns.load()
        phys = 0
        for n, (topic, put_keys) in enumerate(puts):
            ts = base + n * step_ms
            offsets = [phys + 100 * i for i in range(len(put_keys))]
            phys += 100 * len(put_keys)
            for key, offset in zip(put_keys, offsets, strict=True):
                single.build_index(topic, (key,), None, offset, ts)
            columns.build_keys(topic, put_keys, offsets, ts)
        assert [f.mm[:] for f in columns.files] == [f.mm[:] for f in single.files]
        assert [f.header for f in columns.files] == [f.header for f in single.files]
        single.shutdown()
        columns.shutdown()
