"""Recovery: clean restarts do not re-scan; crashes re-scan from the checkpoint, keep what follows a damaged record
and drop only a torn tail."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.store.message import MessageExtBrokerInner
from broker.store.message_store import DefaultMessageStore
from broker.store.results import GetMessageStatus
from tests.store.conftest import small_config


def body(i: int) -> bytes:
    return f"message-{i:05d}-".encode() * 4


def fill(root: Path, n: int, **overrides: object) -> DefaultMessageStore:
    store = DefaultMessageStore(small_config(root, **overrides), ("10.0.0.7", 8081))
    store.load()
    store.start()
    for i in range(n):
        assert store.put_message(MessageExtBrokerInner("T", body(i), i % 2, {"KEYS": f"k{i}"})).ok
    return store


def reopen(root: Path, **overrides: object) -> DefaultMessageStore:
    store = DefaultMessageStore(small_config(root, **overrides), ("10.0.0.7", 8081))
    store.load()
    return store


def read_all(store: DefaultMessageStore) -> list[bytes]:
    out: list[tuple[int, bytes]] = []
    for q in (0, 1):
        got = store.get_message("g", "T", q, 0, 10_000, max_total_bytes=1 << 30)
        out.extend((m.commitlog_offset, m.body) for m in got.messages)
    return [b for _, b in sorted(out)]


def crash(store: DefaultMessageStore) -> None:
    """Stop the threads without a clean shutdown: abort file stays, no final checkpoint."""
    store.halt()


def test_clean_restart_does_not_rescan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import broker.store.mapped_file as mapped_file

    store = fill(tmp_path, 500)
    store.shutdown()
    assert not (tmp_path / "abort").exists()
    syncs: list[int] = []
    real = mapped_file.os.fdatasync

    def counting(fd: int) -> None:
        syncs.append(fd)
        real(fd)

    monkeypatch.setattr(mapped_file.os, "fdatasync", counting)
    again = reopen(tmp_path)
    monkeypatch.setattr(mapped_file.os, "fdatasync", real)
    assert again.stats.recovered_records == 0
    assert syncs == [], "a clean restart must not rewrite (zero) the tail of the commitlog"
    assert read_all(again) == [body(i) for i in range(500)]
    again.start()
    assert again.put_message(MessageExtBrokerInner("T", b"next", 0)).append_result.logics_offset == 250  # type: ignore[union-attr]
    again.shutdown()


def test_crash_recovery_rebuilds_consume_queue_and_index(tmp_path: Path) -> None:
    store = fill(tmp_path, 300, flushIntervalConsumeQueue=3_600_000)  # no checkpoint after start
    crash(store)
    # Lose the consume queues and the index entirely: recovery must rebuild them from the commitlog.
    for cq in store.queues.values():
        cq.destroy()
    for f in store.index.files:
        f.destroy()
    store.index.files = []
    recovered = reopen(tmp_path)
    assert recovered.stats.recovered_records == 300
    assert read_all(recovered) == [body(i) for i in range(300)]
    assert [m.body for m in recovered.query_message("T", "k123", 5, 0, 2**62)] == [body(123)]
    recovered.shutdown()


def _last_segment(root: Path) -> Path:
    return sorted((root / "commitlog").iterdir())[-1]


def test_torn_tail_drops_only_the_torn_record(tmp_path: Path) -> None:
    store = fill(tmp_path, 200)
    last = store.commitlog.files.last()
    assert last is not None
    end_pos = last.wrote_position
    last_start = store.get_message("g", "T", 1, 99, 1).messages[0].commitlog_offset - last.start_offset
    crash(store)
    store.commitlog.shutdown()
    for cq in store.queues.values():
        cq.shutdown()
    seg = _last_segment(tmp_path)
    assert last_start < end_pos
    os.truncate(seg, last_start + (end_pos - last_start) // 2)  # cut the last record in half
    recovered = reopen(tmp_path)
    assert read_all(recovered) == [body(i) for i in range(199)]
    assert recovered.get_max_offset_in_queue("T", 1) == 99
    recovered.start()
    r = recovered.put_message(MessageExtBrokerInner("T", b"fresh", 1))
    assert r.ok and r.append_result is not None and r.append_result.logics_offset == 99
    assert recovered.get_message("g", "T", 1, 99, 1).messages[0].body == b"fresh"
    recovered.shutdown()


def read_skipping(store: DefaultMessageStore, q: int) -> tuple[list[bytes], list[int]]:
    """Queue ``q`` read as a consumer does: on past a corrupt offset. The bodies, and the corrupt offsets."""
    bodies: list[bytes] = []
    corrupt: list[int] = []
    offset = 0
    while True:
        got = store.get_message("g", "T", q, offset, 10_000, max_total_bytes=1 << 30)
        if got.status is GetMessageStatus.MESSAGE_CORRUPTED:
            corrupt.append(offset)
        elif got.status is not GetMessageStatus.FOUND:
            return bodies, corrupt
        bodies.extend(m.body for m in got.messages)
        assert got.next_begin_offset > offset
        offset = got.next_begin_offset


def test_flipped_byte_in_an_older_record_keeps_every_record_after_it(tmp_path: Path) -> None:
    store = fill(tmp_path, 200)
    victim = store.get_message("g", "T", 0, 97, 1).messages[0]  # message 194 of 200
    assert victim.body == body(194)
    crash(store)
    store.commitlog.shutdown()
    for cq in store.queues.values():
        cq.shutdown()
    segments = sorted((tmp_path / "commitlog").iterdir())
    seg = next(p for p in reversed(segments) if int(p.name) <= victim.commitlog_offset)
    with open(seg, "r+b") as f:
        f.seek(victim.commitlog_offset - int(seg.name) + victim.store_size - 30)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x5A]))
    recovered = reopen(tmp_path)
    # recovery kept what follows the damaged record; reading stops before it, then answers its offset as corrupt
    assert read_all(recovered) == [body(i) for i in range(200) if (i < 194 and i % 2 == 0) or i % 2 == 1]
    assert recovered.get_message("g", "T", 0, 97, 1).status is GetMessageStatus.MESSAGE_CORRUPTED
    even, corrupt = read_skipping(recovered, 0)
    assert even == [body(i) for i in range(0, 200, 2) if i != 194] and corrupt == [97]
    assert read_skipping(recovered, 1) == ([body(i) for i in range(1, 200, 2)], [])
    assert recovered.corrupt_records == 1
    assert [p.name for p in (tmp_path / "quarantine").iterdir()] == [
        f"{victim.commitlog_offset:020d}-{victim.store_size}.bin"
    ]
    recovered.shutdown()


def _flip(root: Path, phys: int, at: int) -> None:
    segments = sorted((root / "commitlog").iterdir())
    seg = next(p for p in reversed(segments) if int(p.name) <= phys)
    with open(seg, "r+b") as f:
        f.seek(phys - int(seg.name) + at)
        b = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([b[0] ^ 0x01]))


def test_a_record_damaged_in_an_older_segment_is_caught_by_its_first_read(tmp_path: Path) -> None:
    store = fill(tmp_path, 600)  # several 64 KiB segments
    victim = store.get_message("g", "T", 1, 10, 1).messages[0]  # message 21, in the first segment
    assert victim.commitlog_offset < 64 * 1024 <= store.commitlog.max_offset  # not in the last segment
    store.shutdown()
    _flip(tmp_path, victim.commitlog_offset, 100)  # inside the body
    recovered = reopen(tmp_path)  # a clean start checks the last segment only: the damage is found on read
    recovered.start()
    try:
        assert recovered.corrupt_records == 0
        raw = recovered.get_message_raw("g", "T", 1, 0, 64)
        assert raw.status is GetMessageStatus.FOUND and raw.raw_count == 10 and raw.next_begin_offset == 10
        again = recovered.get_message_raw("g", "T", 1, 10, 64)
        assert again.status is GetMessageStatus.MESSAGE_CORRUPTED and again.next_begin_offset == 11
        decoded = recovered.get_message("g", "T", 1, 10, 64)
        assert decoded.status is GetMessageStatus.MESSAGE_CORRUPTED and decoded.next_begin_offset == 11
        odd, corrupt = read_skipping(recovered, 1)
        assert odd == [body(i) for i in range(1, 600, 2) if i != 21] and corrupt == [10]
        assert recovered.look_message_by_offset(victim.commitlog_offset, victim.store_size, 10) is None
        assert recovered.corrupt_records == 1  # reported once, however often it is read
        # a record appended now is known good without a second check, and reads past the damage go on
        assert recovered.put_message(MessageExtBrokerInner("T", b"fresh", 1)).ok
        assert recovered.get_message("g", "T", 1, 300, 1).messages[0].body == b"fresh"
    finally:
        recovered.shutdown()


def test_a_clean_start_rechecks_the_tail_and_truncates_a_torn_one(tmp_path: Path) -> None:
    store = fill(tmp_path, 100)
    last = store.get_message("g", "T", 1, 49, 1).messages[0]  # message 99, the newest record
    store.shutdown()
    _flip(tmp_path, last.commitlog_offset, 4)  # its magic code: the tail no longer frames
    recovered = reopen(tmp_path)
    try:
        assert read_all(recovered) == [body(i) for i in range(99)]
        assert recovered.commitlog.max_offset == last.commitlog_offset  # new appends start where it stood
        assert recovered.get_message("g", "T", 1, 49, 1).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    finally:
        recovered.shutdown()
