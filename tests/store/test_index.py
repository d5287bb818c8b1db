"""IndexFile/IndexService: every put key is found, time ranges and limits hold, files roll when full."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.store.index_file import IndexFile, IndexService, key_hash
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
