"""DefaultMessageStore: puts, reads and their statuses, segment rolling, filters, time lookup, key queries."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from pathlib import Path

import pytest

from broker.config import load_broker_settings
from broker.store.config import FlushDiskType
from broker.store.index_dispatch import IndexJob, KeyColumns
from broker.store.message import MessageExt, MessageExtBrokerInner, tags_hash_code
from broker.store.message_store import DefaultMessageStore
from broker.store.results import (
    AppendMessageResult,
    GetMessageStatus,
    PutMessageResult,
    PutMessageStatus,
    PutResults,
)
from orbitmq.config import ConfigError
from orbitmq.msgid import decode_offset_message_id
from tests.store.conftest import StoreFactory
from tests.waiting import wait_until


def msg(i: int, topic: str = "T", qid: int = 0, tag: str = "a", **props: str) -> MessageExtBrokerInner:
    return MessageExtBrokerInner(topic, f"body-{i}".encode() * 3, qid, {"TAGS": tag, "KEYS": f"k{i} common", **props})


def test_put_and_get_in_order(store_factory: StoreFactory) -> None:
    store = store_factory()
    for i in range(50):
        r = store.put_message(msg(i, qid=i % 2))
        assert r.status is PutMessageStatus.PUT_OK
        assert r.append_result is not None and r.append_result.logics_offset == i // 2
    got = store.get_message("g", "T", 1, 0, 100)
    assert got.status is GetMessageStatus.FOUND
    assert [m.body for m in got.messages] == [f"body-{i}".encode() * 3 for i in range(1, 50, 2)]
    assert [m.queue_offset for m in got.messages] == list(range(25))
    assert (got.next_begin_offset, got.min_offset, got.max_offset) == (25, 0, 25)


def test_get_statuses(store_factory: StoreFactory) -> None:
    store = store_factory()
    assert store.get_message("g", "none", 0, 0, 1).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
    for i in range(3):
        store.put_message(msg(i))
    assert store.get_message("g", "T", 0, 3, 1).status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    bad = store.get_message("g", "T", 0, 9, 1)
    assert bad.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY and bad.next_begin_offset == 3
    part = store.get_message("g", "T", 0, 1, 1)
    assert part.status is GetMessageStatus.FOUND and part.next_begin_offset == 2


def test_records_roll_over_segments_with_blank_marker(store_factory: StoreFactory) -> None:
    store = store_factory()
    bodies = [bytes([i % 251]) * 3000 for i in range(100)]  # ~300 KB over 64 KiB segments
    for b in bodies:
        assert store.put_message(MessageExtBrokerInner("Big", b, 0)).ok
    segments = store.commitlog.files.files
    assert len(segments) >= 4
    assert all(len(s.path.name) == 20 and int(s.path.name) == s.start_offset for s in segments)
    got = store.get_message("g", "Big", 0, 0, 1000, max_total_bytes=1 << 30)
    assert [m.body for m in got.messages] == bodies


def test_message_too_large_is_refused_and_store_keeps_working(store_factory: StoreFactory) -> None:
    store = store_factory(maxMessageSize=1000)
    r = store.put_message(MessageExtBrokerInner("T", b"x" * 1001, 0))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL and "1000" in r.error
    r = store.put_message(MessageExtBrokerInner("T", b"x" * 100_000, 0))
    assert r.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_message(msg(1)).ok
    assert store.get_max_offset_in_queue("T", 0) == 1


def test_batch_put_is_one_append(store_factory: StoreFactory) -> None:
    store = store_factory(flushDiskType=FlushDiskType.SYNC_FLUSH)
    results = store.put_messages([msg(i, qid=i % 3) for i in range(30)])
    assert all(r.ok for r in results)
    offsets = [r.append_result.wrote_offset for r in results if r.append_result]
    assert offsets == sorted(offsets)
    assert sum(store.get_max_offset_in_queue("T", q) for q in range(3)) == 30


def test_tag_filter_uses_consume_queue_hash_then_exact_tag(store_factory: StoreFactory) -> None:
    store = store_factory()
    for i in range(20):
        store.put_message(msg(i, tag="even" if i % 2 == 0 else "odd"))

    class TagFilter:
        def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext: bytes | None) -> bool:
            return tags_code == tags_hash_code("odd")

        def is_matched_by_commitlog(self, m: MessageExt) -> bool:
            return m.tags == "odd"

    got = store.get_message("g", "T", 0, 0, 5, TagFilter())
    assert [m.tags for m in got.messages] == ["odd"] * 5
    assert got.next_begin_offset == 10  # scanned past the filtered-out entries


def test_spans_locate_what_get_message_reads(store_factory: StoreFactory) -> None:
    """get_message_spans selects what get_message selects (filters, counts, next offset) without reading it."""
    store = store_factory()
    for i in range(20):
        store.put_message(msg(i, tag="even" if i % 2 == 0 else "odd"))

    class OddFilter:
        def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext: object) -> bool:
            return tags_code == tags_hash_code("odd")

        def is_matched_by_commitlog(self, m: MessageExt) -> bool:
            return m.tags == "odd"

    for start, count, flt in [(0, 7, None), (3, 100, None), (0, 5, OddFilter()), (20, 5, None)]:
        got = store.get_message("g", "T", 0, start, count, flt)  # type: ignore[arg-type]
        spans = store.get_message_spans("g", "T", 0, start, count, flt)  # type: ignore[arg-type]
        assert (spans.status, spans.next_begin_offset, spans.max_offset) == (
            got.status,
            got.next_begin_offset,
            got.max_offset,
        )
        assert spans.spans == [(m.queue_offset, m.commitlog_offset, m.store_size) for m in got.messages]
        assert spans.messages == [] and spans.raw == b""


def test_lookup_by_offset_and_message_id(store_factory: StoreFactory) -> None:
    store = store_factory()
    r = store.put_message(msg(7))
    assert r.append_result is not None
    decoded = decode_offset_message_id(r.append_result.msg_id)
    assert (decoded.host, decoded.port, decoded.commitlog_offset) == ("10.0.0.7", 8081, r.append_result.wrote_offset)
    found = store.look_message_by_offset(decoded.commitlog_offset)
    assert found is not None and found.body == msg(7).body and found.msg_id == r.append_result.msg_id
    assert store.look_message_by_offset(10**12) is None


def test_offset_by_time_binary_search(store_factory: StoreFactory) -> None:
    clock = [1_700_000_000.0]
    store = store_factory()
    store.clock = lambda: clock[0]
    for i in range(100):
        clock[0] += 1
        store.put_message(msg(i))
    base = 1_700_000_000_000
    assert store.get_offset_in_queue_by_time("T", 0, 0) == 0
    assert store.get_offset_in_queue_by_time("T", 0, base + 50_000) == 49
    assert store.get_offset_in_queue_by_time("T", 0, base + 50_001) == 50
    assert store.get_offset_in_queue_by_time("T", 0, base + 10**9) == 100
    assert store.get_message_store_timestamp("T", 0, 49) == base + 50_000


def test_query_by_key_and_unique_key(store_factory: StoreFactory) -> None:
    store = store_factory()
    for i in range(400):  # more than one index file (1024 entries, 3 keys per message)
        store.put_message(msg(i, topic="Q", UNIQ_KEY=f"UNIQ{i}"))
    store.put_message(msg(5, topic="Other"))
    now = int(time.time() * 1000)
    wait_until(lambda: store.dispatch_behind_bytes() == 0, 10, what="index dispatch")
    assert len(store.index.files) >= 2
    hits = store.query_message("Q", "k5", 10, now - 60_000, now + 60_000)
    assert [m.body for m in hits] == [msg(5).body]
    assert [m.unique_id for m in store.query_message("Q", "UNIQ250", 10, 0, now + 60_000)] == ["UNIQ250"]
    assert len(store.query_message("Q", "common", 32, 0, now + 60_000)) == 32
    assert store.query_message("Q", "k5", 10, now + 3_600_000, now + 7_200_000) == []


def test_index_dispatch_waits_but_a_key_query_reads_its_writes(store_factory: StoreFactory) -> None:
    # A dispatch delay longer than the query's wait bound: only the query's wake-up can get the keys indexed in time.
    store = store_factory(indexDispatchDelayMs=2_000, indexQueryWaitMs=1_000)
    for i in range(20):
        store.put_message(msg(i, topic="Q", UNIQ_KEY=f"UNIQ{i}"))
    assert store.dispatch_behind_bytes() > 0  # the thread is letting the puts' answers go first
    now = int(time.time() * 1000)
    assert [m.unique_id for m in store.query_message("Q", "UNIQ7", 10, 0, now + 60_000)] == ["UNIQ7"]
    assert [m.body for m in store.query_message("Q", "k19", 10, 0, now + 60_000)] == [msg(19).body]
    assert store.dispatch_behind_bytes() == 0
    for i in range(20, 30):
        store.put_message(msg(i, topic="Q", UNIQ_KEY=f"UNIQ{i}"))
    store.shutdown()  # inside the delay: what was queued before the stop is still indexed
    reopened = DefaultMessageStore(store.config, ("10.0.0.7", 8081))
    reopened.load()
    try:
        found = {m.unique_id for i in range(30) for m in reopened.query_message("Q", f"UNIQ{i}", 10, 0, now + 60_000)}
        assert found == {f"UNIQ{i}" for i in range(30)}
    finally:
        reopened.shutdown()


def test_index_dispatch_pauses_that_would_spin_the_thread_are_refused_at_load() -> None:
    assert load_broker_settings(None, {"indexDispatchDelayMs": "0"}).store.indexDispatchDelayMs == 0
    for key, bad in (("indexDispatchDelayMs", "-1"), ("indexDispatchIdleMs", "0"), ("indexDispatchIdleMs", "-5")):
        with pytest.raises(ConfigError, match="indexDispatchIdleMs >= 1"):
            load_broker_settings(None, {key: bad})


def test_one_index_job_per_put_names_its_keyed_messages(
    store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_factory()
    jobs: list[IndexJob] = []
    submit = store.index_dispatch.submit

    def spy(job: IndexJob) -> None:
        jobs.append(job)
        submit(job)

    monkeypatch.setattr(store.index_dispatch, "submit", spy)
    unkeyed = MessageExtBrokerInner("Q", b"no key", 0, {"TAGS": "a"})
    batch = [msg(0, topic="Q"), unkeyed, MessageExtBrokerInner("Q", b"uniq only", 1, {"UNIQ_KEY": "U2"}), unkeyed]
    results = store.put_messages(batch)
    assert store.put_messages([unkeyed, unkeyed])[1].ok
    assert len(jobs) == 1  # a put without keys queues nothing
    (job,) = jobs
    first, third = results[0].append_result, results[2].append_result
    assert first is not None and third is not None
    assert job.runs == [KeyColumns("Q", ["k0", "common", "U2"], [first.wrote_offset] * 2 + [third.wrote_offset])]
    assert job.store_timestamp == third.store_timestamp
    assert job.end_offset == third.wrote_offset + third.wrote_bytes  # the last keyed record, not the put's last
    wait_until(lambda: store.dispatch_behind_bytes() == 0, 10, what="index dispatch")
    assert [m.body for m in store.query_message("Q", "U2", 10, 0, job.store_timestamp + 1)] == [b"uniq only"]

    # a put of several topics: one run per stretch of one topic, in append order, each key found in its topic
    mixed = [msg(1, topic="Q"), msg(2, topic="R"), msg(3, topic="R", UNIQ_KEY="U3"), msg(4, topic="Q")]
    results = store.put_messages(mixed)
    offsets = [r.append_result.wrote_offset for r in results if r.append_result is not None]
    assert [(run.topic, run.keys, run.offsets) for run in jobs[-1].runs] == [
        ("Q", ["k1", "common"], [offsets[0]] * 2),
        ("R", ["k2", "common", "U3", "k3", "common"], [offsets[1]] * 2 + [offsets[2]] * 3),
        ("Q", ["k4", "common"], [offsets[3]] * 2),
    ]
    wait_until(lambda: store.dispatch_behind_bytes() == 0, 10, what="index dispatch")
    until = jobs[-1].store_timestamp + 1
    assert sorted(m.body for m in store.query_message("R", "common", 10, 0, until)) == [b"body-2" * 3, b"body-3" * 3]
    assert [m.body for m in store.query_message("R", "U3", 10, 0, until)] == [b"body-3" * 3]
    assert [m.body for m in store.query_message("Q", "k4", 10, 0, until)] == [b"body-4" * 3]


def test_sync_flush_concurrent_writers_share_flushes(store_factory: StoreFactory) -> None:
    store = store_factory(flushDiskType=FlushDiskType.SYNC_FLUSH)
    futures = [store.put_message_async(msg(i, qid=i % 4)) for i in range(200)]
    results = [f.result(timeout=10) for f in futures]
    assert all(r.status is PutMessageStatus.PUT_OK for r in results)
    assert store.commitlog.files.last() is not None
    last = store.commitlog.files.last()
    assert last is not None and last.flushed_position >= last.wrote_position


def test_arriving_listener_sees_new_max_offset(store_factory: StoreFactory) -> None:
    store = store_factory()
    seen: list[tuple[str, int, int]] = []
    store.add_arriving_listener(lambda t, q, m: seen.append((t, q, m)))
    store.put_message(msg(1, qid=2))
    assert seen == [("T", 2, 1)]


def test_put_after_shutdown_is_service_not_available(store_factory: StoreFactory) -> None:
    store = store_factory()
    store.shutdown()
    assert store.put_message(msg(1)).status is PutMessageStatus.SERVICE_NOT_AVAILABLE


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
def test_delete_topic(store_factory: StoreFactory, flush: FlushDiskType) -> None:
    store = store_factory(flushDiskType=flush)
    store.put_message(msg(1, topic="Gone"))
    store.delete_topics(["Gone"])
    assert "Gone" not in store.topics()
    assert store.get_message("g", "Gone", 0, 0, 1).status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE


def test_slow_disk_gives_flush_disk_timeout_and_data_stays(store_factory: StoreFactory, monkeypatch) -> None:
    """A flush slower than syncFlushTimeout answers FLUSH_DISK_TIMEOUT, not an error; the message is kept."""
    import broker.store.mapped_file as mapped_file

    store = store_factory(flushDiskType=FlushDiskType.SYNC_FLUSH, syncFlushTimeout=100)
    assert store.put_message(msg(0)).ok
    real = mapped_file.os.fdatasync

    def slow_disk(fd: int) -> None:
        time.sleep(0.5)
        real(fd)

    monkeypatch.setattr(mapped_file.os, "fdatasync", slow_disk)
    started = time.monotonic()
    r = store.put_message(msg(1))
    assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert time.monotonic() - started < 0.45, "the writer must not wait for the slow flush to finish"
    monkeypatch.setattr(mapped_file.os, "fdatasync", real)
    got = store.get_message("g", "T", 0, 1, 1)
    assert got.status is GetMessageStatus.FOUND and got.messages[0].body == msg(1).body


def test_batch_crossing_segments_keeps_order_offsets_and_blank_markers(store_factory: StoreFactory) -> None:
    store = store_factory()  # 64 KiB commitlog segments, 256-entry consume queue segments
    batch = [MessageExtBrokerInner(f"T{i % 2}", bytes([i % 251]) * (700 + i % 300), i % 3) for i in range(600)]
    results = store.put_messages(batch)
    assert all(r.ok for r in results)
    appended = [r.append_result for r in results if r.append_result is not None]
    phys = [a.wrote_offset for a in appended]
    assert phys == sorted(phys) and len(store.commitlog.files.files) > 5
    seg = store.config.mappedFileSizeCommitLog
    assert all(a.wrote_offset // seg == (a.wrote_offset + a.wrote_bytes - 1) // seg for a in appended)
    for topic in ("T0", "T1"):
        for q in range(3):
            mine = [(m, r) for m, r in zip(batch, results, strict=True) if m.topic == topic and m.queue_id == q]
            got = store.get_message("g", topic, q, 0, 1000, max_total_bytes=1 << 30).messages
            assert [m.body for m in got] == [m.body for m, _ in mine]
            assert [m.queue_offset for m in got] == [r.append_result.logics_offset for _, r in mine]  # type: ignore[union-attr]
            assert [m.queue_offset for m in got] == list(range(len(mine)))
    # A restart after a crash re-scans the same records across the blank markers.
    infos = [i for i in store.commitlog.scan(0) if i.status.name == "OK"]
    assert [i.physical_offset for i in infos] == phys


def test_dispatchers_see_every_stored_message_once(store_factory: StoreFactory) -> None:
    store = store_factory()
    seen: list[tuple[str, int, int]] = []

    class Recorder:
        def dispatch(self, m: MessageExtBrokerInner, result: AppendMessageResult) -> None:
            seen.append((m.topic, result.logics_offset, result.wrote_offset))

    store.add_dispatcher(Recorder())
    store.put_messages([msg(0), MessageExtBrokerInner("T", b"x" * 10**7, 0), msg(1)])
    results = [store.put_message(msg(2))]
    assert [s[1] for s in seen] == [0, 1, 2]
    assert seen[-1][2] == results[0].append_result.wrote_offset  # type: ignore[union-attr]


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
def test_aio_puts_resolve_on_the_loop_and_share_flushes(
    store_factory: StoreFactory, flush: FlushDiskType, monkeypatch: pytest.MonkeyPatch
) -> None:
    import broker.store.mapped_file as mapped_file

    store = store_factory(flushDiskType=flush)
    real = mapped_file.os.fdatasync
    syncs: list[int] = []

    def counting(fd: int) -> None:
        syncs.append(fd)
        real(fd)

    monkeypatch.setattr(mapped_file.os, "fdatasync", counting)

    async def run() -> tuple[list[PutMessageResult], list[PutMessageResult]]:
        singles = await asyncio.wait_for(
            asyncio.gather(*(store.put_message_aio(msg(i, qid=i % 4)) for i in range(200))), 10
        )
        batch = await asyncio.wait_for(store.put_messages_aio([msg(i, qid=1) for i in range(200, 210)]), 10)
        return list(singles), batch

    singles, batch = asyncio.run(run())
    assert all(r.status is PutMessageStatus.PUT_OK for r in [*singles, *batch])
    assert [r.append_result.logics_offset for r in singles[:8]] == [0, 0, 0, 0, 1, 1, 1, 1]  # type: ignore[union-attr]
    assert [r.append_result.logics_offset for r in batch] == list(range(50, 60))  # type: ignore[union-attr]
    if flush is FlushDiskType.SYNC_FLUSH:
        last = store.commitlog.files.last()
        assert last is not None and last.flushed_position >= last.wrote_position
        assert 1 <= len(syncs) < 100, "concurrent writers must share group commits"


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
def test_aio_puts_of_one_loop_turn_are_appended_together(
    store_factory: StoreFactory, flush: FlushDiskType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Singles, batches, a refused message and a cancelled caller in one turn: one append, each caller its share."""
    store = store_factory(flushDiskType=flush, maxMessageSize=64)
    appends: list[int] = []
    real_append = store.commitlog.append_batch

    def counting(batch):  # type: ignore[no-untyped-def]
        appends.append(len(batch.msgs))
        return real_append(batch)

    monkeypatch.setattr(store.commitlog, "append_batch", counting)

    async def run() -> list[object]:
        first = store.put_message_aio(msg(0, qid=2))
        batch = store.put_messages_aio([msg(1, qid=2), MessageExtBrokerInner("T", b"x" * 65, 2), msg(2, qid=2)])
        cancelled = store.put_message_aio(msg(3, qid=2))
        cancelled.cancel()
        last = store.put_message_aio(msg(4, qid=3))
        return list(await asyncio.wait_for(asyncio.gather(first, batch, last), 10))

    first, batch, last = asyncio.run(run())
    assert appends == [6], "the puts of one loop turn go through one append"
    assert isinstance(first, PutMessageResult) and first.ok and first.append_result is not None
    assert first.append_result.logics_offset == 0
    assert [r.status for r in batch] == [  # type: ignore[attr-defined]
        PutMessageStatus.PUT_OK,
        PutMessageStatus.MESSAGE_ILLEGAL,
        PutMessageStatus.PUT_OK,
    ]
    assert "maxMessageSize is 64" in batch[1].error  # type: ignore[index]
    assert [r.append_result.logics_offset for r in batch if r.ok] == [1, 2]  # type: ignore[attr-defined]
    assert isinstance(last, PutMessageResult) and last.ok and last.append_result is not None
    assert last.append_result.logics_offset == 0
    # The cancelled caller's message was appended with the others (as a send whose reply was lost would be).
    got = store.get_message("g", "T", 2, 0, 10)
    assert [m.body for m in got.messages] == [msg(i).body for i in (0, 1, 2, 3)]


def test_a_failing_append_fails_every_coalesced_caller_instead_of_hanging(
    store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_factory()

    def broken(batch):  # type: ignore[no-untyped-def]
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(store.commitlog, "append_batch", broken)

    async def run() -> list[object]:
        puts = [store.put_message_aio(msg(0)), store.put_messages_aio([msg(1), msg(2)])]
        return list(await asyncio.wait_for(asyncio.gather(*puts, return_exceptions=True), 10))

    outcomes = asyncio.run(run())
    assert [type(o) for o in outcomes] == [RuntimeError, RuntimeError]


def test_put_results_are_built_on_demand() -> None:
    results = PutResults([100, 300, 700], [200, 400, 100], [5, 6, 7], ("10.0.0.1", 10911), 1234)
    assert len(results) == 3
    assert results[1] == PutMessageResult(
        PutMessageStatus.PUT_OK, AppendMessageResult(300, 400, ("10.0.0.1", 10911), 1234, 6)
    )
    assert results[-1].append_result is not None and results[-1].append_result.wrote_offset == 700
    with pytest.raises(IndexError):
        results[3]
    share = results[1:]
    assert isinstance(share, PutResults) and [r.append_result.logics_offset for r in share] == [6, 7]  # type: ignore[union-attr]
    late = results.with_status(PutMessageStatus.FLUSH_DISK_TIMEOUT, "flush timed out")
    assert [r.status for r in late] == [PutMessageStatus.FLUSH_DISK_TIMEOUT] * 3
    assert late[0].append_result == results[0].append_result and late[0].error == "flush timed out"


def test_aio_put_on_a_slow_disk_gets_flush_disk_timeout(
    store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import broker.store.mapped_file as mapped_file

    store = store_factory(flushDiskType=FlushDiskType.SYNC_FLUSH, syncFlushTimeout=100)
    real = mapped_file.os.fdatasync

    def slow_disk(fd: int) -> None:
        time.sleep(0.5)
        real(fd)

    monkeypatch.setattr(mapped_file.os, "fdatasync", slow_disk)

    async def run() -> PutMessageResult:
        return await asyncio.wait_for(store.put_message_aio(msg(1)), 5)

    started = time.monotonic()
    assert asyncio.run(run()).status is PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert time.monotonic() - started < 0.45


@pytest.mark.parametrize("flush", [FlushDiskType.ASYNC_FLUSH, FlushDiskType.SYNC_FLUSH])
def test_puts_racing_shutdown_are_answered_and_kept(
    store_factory: StoreFactory, flush: FlushDiskType, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = store_factory(flushDiskType=flush)
    real_monotonic = time.monotonic

    def slow_in_writers() -> float:
        # Widen the window between a writer's append and its flush wait, where shutdown can slip in.
        if threading.current_thread().name.startswith("writer"):
            time.sleep(0.02)
        return real_monotonic()

    monkeypatch.setattr(time, "monotonic", slow_in_writers)
    acked: list[list[int]] = [[] for _ in range(4)]
    errors: list[BaseException] = []

    def writer(w: int) -> None:
        try:
            for i in range(100_000):
                r = store.put_message(MessageExtBrokerInner("R", f"{w}-{i}".encode(), w, {"KEYS": f"{w}-{i}"}))
                if r.status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
                    return
                assert r.ok and r.append_result is not None
                acked[w].append(r.append_result.logics_offset)
        except BaseException as exc:  # reported to the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,), name=f"writer-{w}") for w in range(4)]
    for t in threads:
        t.start()
    wait_until(lambda: all(len(a) > 20 for a in acked), timeout=10)
    store.shutdown()
    for t in threads:
        t.join(timeout=10)
    assert not any(t.is_alive() for t in threads), "a put racing shutdown was never answered"
    assert errors == []
    again = DefaultMessageStore(store.config, store.store_host)
    again.load()
    try:
        for w in range(4):
            got = again.get_message("g", "R", w, 0, 1_000_000, max_total_bytes=1 << 40).messages
            assert [m.queue_offset for m in got][: len(acked[w])] == acked[w] == list(range(len(acked[w])))
            assert [m.body for m in got[: len(acked[w])]] == [f"{w}-{i}".encode() for i in range(len(acked[w]))]
    finally:
        again.shutdown()


def test_a_new_stores_first_segment_is_prepared_warm_before_the_first_append(
    store_factory: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    import broker.store.mapped_file as mapped_file

    warmed: list[int] = []
    real_warm = mapped_file.MappedFile.warm

    def recording(self: mapped_file.MappedFile, upto: int | None = None, start: int = 0) -> None:
        if start == 0:  # a segment's first window (later windows of the one being written start further in)
            warmed.append(self.start_offset)
        real_warm(self, upto, start)

    monkeypatch.setattr(mapped_file.MappedFile, "warm", recording)
    store = store_factory(warmMapedFileEnable=True)
    files = store.commitlog.files
    files.wait_spare_ready(timeout=10)
    assert warmed == [0] and files.files == []  # prepared at start, not yet part of the log
    assert store.put_message(msg(0)).ok
    assert [mf.start_offset for mf in files.files] == [0]
    files.wait_spare_ready(timeout=10)
    assert warmed == [0, 64 * 1024]  # and the next one is prepared behind it, as before


def test_the_segment_being_written_is_warmed_a_window_ahead_of_the_writer(tmp_path: Path) -> None:
    """A prepared segment is warmed for its first window only; the next window is read once the writer is half-way
    into the current one, from the write position on, never past the segment's end."""
    from broker.store.mapped_file import MappedFileQueue

    window = 64 * 1024
    files = MappedFileQueue(tmp_path, 1024 * 1024, warm=True, warm_window=window)
    files.prepare_first()
    files.wait_spare_ready(timeout=10)
    mf = files.get_last_or_create()
    try:
        assert mf.warmed_to == window  # not the whole segment at once
        mf.wrote_position = window // 2 - 1
        files.warm_ahead(mf)
        files.wait_spare_ready(timeout=10)
        assert mf.warmed_to == window  # under half-way: nothing to do yet
        mf.wrote_position = window // 2
        files.warm_ahead(mf)
        files.wait_spare_ready(timeout=10)
        assert mf.warmed_to == window // 2 + window
        mf.wrote_position = mf.size - 100
        files.warm_ahead(mf)
        files.wait_spare_ready(timeout=10)
        assert mf.warmed_to == mf.size
        files.warm_ahead(mf)  # all warm: no thread
        assert files.get_last_or_create() is mf
    finally:
        files.shutdown()


def test_a_segment_whose_warm_up_cannot_read_is_still_written(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Warming is only a head start: a read that fails (here the descriptor is write-only) is logged, and the
    segment takes and keeps its records as any other."""
    from broker.store.mapped_file import MappedFile

    mf = MappedFile(tmp_path / "00000000000000000000", 64 * 1024)
    readable, mf.fd = mf.fd, os.open(mf.path, os.O_WRONLY)
    try:
        with caplog.at_level(logging.WARNING, logger="broker.store.mapped_file"):
            mf.warm()
    finally:
        os.close(mf.fd)
        mf.fd = readable
    assert any(r.getMessage() == "segment warm-up failed" for r in caplog.records), caplog.records
    mf.view[:5] = b"hello"
    mf.wrote_position = 5
    mf.flush()
    mf.close()
    assert (tmp_path / "00000000000000000000").read_bytes()[:5] == b"hello"
