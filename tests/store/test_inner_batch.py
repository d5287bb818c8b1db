"""Inner batches (BatchCQ): one CommitLog record per batch, one ConsumeQueue entry and queue offset per message,
and every read path hands the messages out one by one."""

from __future__ import annotations

from pathlib import Path

from broker.filter import TagFilter
from broker.store import codec
from broker.store.message import (
    INNER_BATCH_FLAG,
    NEED_UNWRAP_FLAG,
    MessageExtBrokerInner,
    inner_batch_message,
    tags_hash_code,
)
from broker.store.message_store import DefaultMessageStore
from broker.store.results import GetMessageStatus
from orbitmq.message_batch import BatchEntry, encode_message_batch
from orbitmq.record import iter_records
from tests.store.conftest import StoreFactory, small_config
from tests.store.test_recovery import crash


def entries(first: int, n: int) -> list[BatchEntry]:
    return [
        BatchEntry(i % 3, f"inner-{i:04d}".encode() * (1 + i % 4), {"TAGS": "ab"[i % 2], "UNIQ_KEY": f"U{i}"})
        for i in range(first, first + n)
    ]


def batch(topic: str, qid: int, es: list[BatchEntry]) -> MessageExtBrokerInner:
    return inner_batch_message(
        topic,
        qid,
        encode_message_batch(es),
        [tags_hash_code(e.properties.get("TAGS")) for e in es],
        born_timestamp=1_700_000_000_000,
        born_host=("10.1.2.3", 4567),
    )


def single(i: int) -> tuple[MessageExtBrokerInner, BatchEntry]:
    e = BatchEntry(0, f"single-{i}".encode(), {"TAGS": "a", "UNIQ_KEY": f"S{i}"})
    return MessageExtBrokerInner("T", e.body, 0, dict(e.properties)), e


def fill(store: DefaultMessageStore) -> list[BatchEntry]:
    """Queue 0 of T: a batch of 5, a single message, a batch of 3, a batch of 7: 16 messages."""
    expected: list[BatchEntry] = []
    first = entries(0, 5)
    assert store.put_message(batch("T", 0, first)).ok
    expected += first
    one, e = single(0)
    assert store.put_message(one).ok
    expected.append(e)
    for n, start in ((3, 100), (7, 200)):
        es = entries(start, n)
        result = store.put_message(batch("T", 0, es))
        assert result.ok and result.append_result is not None
        assert result.append_result.logics_offset == len(expected)  # the batch's first message's offset
        expected += es
    return expected


def test_batch_takes_one_record_and_one_offset_per_message(store_factory: StoreFactory) -> None:
    store = store_factory()
    expected = fill(store)
    assert store.get_max_offset_in_queue("T", 0) == 16
    assert store.stats.put_messages == 16  # the broker's TPS line counts messages, not records
    records = [info for info in store.commitlog.scan(0) if info.status is codec.ScanStatus.OK]
    assert len(records) == 4  # three batches and one single message
    got = store.get_message("g", "T", 0, 0, 100)
    assert got.status is GetMessageStatus.FOUND and got.next_begin_offset == 16
    assert [m.queue_offset for m in got.messages] == list(range(16))
    assert [(m.flag, m.body, m.properties) for m in got.messages] == [(e.flag, e.body, e.properties) for e in expected]
    for m in got.messages:
        assert not m.sys_flag & (INNER_BATCH_FLAG | NEED_UNWRAP_FLAG)
        assert m.store_host == ("10.0.0.7", 8081) and m.topic == "T" and m.queue_id == 0
    assert got.messages[0].born_host == ("10.1.2.3", 4567)
    # the messages of a batch share its record's commitlog offset, as RocketMQ's unwrapped messages do
    assert len({m.commitlog_offset for m in got.messages[:5]}) == 1


def test_reads_start_and_stop_inside_a_batch(store_factory: StoreFactory) -> None:
    store = store_factory()
    expected = fill(store)
    for offset in range(16):
        for count in (1, 2, 5):
            got = store.get_message("g", "T", 0, offset, count)
            want = expected[offset : offset + count]
            assert [m.body for m in got.messages] == [e.body for e in want], (offset, count)
            assert [m.queue_offset for m in got.messages] == list(range(offset, offset + len(want)))
            assert got.next_begin_offset == offset + len(want)


def test_raw_reads_are_records_of_their_own(store_factory: StoreFactory) -> None:
    store = store_factory()
    expected = fill(store)
    for offset in (0, 3, 5, 7, 12):
        got = store.get_message_raw("g", "T", 0, offset, 100)
        views = list(iter_records(got.raw))
        assert got.raw_count == len(views) == 16 - offset
        assert [(v.flag, v.body, v.properties, v.queue_offset) for v in views] == [
            (e.flag, e.body, e.properties, offset + i) for i, e in enumerate(expected[offset:])
        ]
        pos = 0
        for v in views:  # each one passes the record checks: size, magic, CRC
            info = codec.check_record(got.raw, pos, len(got.raw))
            assert info.status is codec.ScanStatus.OK and info.queue_offset == v.queue_offset
            assert not v.sys_flag & INNER_BATCH_FLAG
            pos += v.store_size


def test_spans_read_back_per_message(store_factory: StoreFactory) -> None:
    store = store_factory()
    expected = fill(store)
    spans = store.get_message_spans("g", "T", 0, 2, 10).spans
    assert [s[0] for s in spans] == list(range(2, 12))
    parts, gone, corrupt = store.read_records(spans)
    assert gone == [] and corrupt == []
    views = list(iter_records(b"".join(p for _, p in parts)))
    assert [v.body for v in views] == [e.body for e in expected[2:12]]
    # a pop reads its flights one by one
    for queue_offset, phys, size in spans:
        m = store.look_message_by_offset(phys, size, queue_offset)
        assert m is not None and m.body == expected[queue_offset].body
    phys = spans[0][1]
    assert store.look_message_by_offset(phys) is None, "which message of the batch is meant is not said"


def test_a_batch_counts_its_bytes_once(store_factory: StoreFactory) -> None:
    store = store_factory()
    es = [BatchEntry(0, bytes(300), {"UNIQ_KEY": f"U{i}"}) for i in range(50)]
    assert store.put_message(batch("T", 0, es)).ok
    got = store.get_message("g", "T", 0, 0, 100, max_total_bytes=20_000)
    assert len(got.messages) == 50  # the ~16 KB record fits the limit once, not 50 times


def test_tag_filter_selects_messages_inside_batches(store_factory: StoreFactory) -> None:
    store = store_factory()
    expected = fill(store)
    f = TagFilter.parse("b")
    got = store.get_message("g", "T", 0, 0, 100, f)
    assert [m.body for m in got.messages] == [e.body for e in expected if e.properties["TAGS"] == "b"]
    raw = store.get_message_raw("g", "T", 0, 0, 100, f)
    assert [v.body for v in iter_records(raw.raw)] == [m.body for m in got.messages]


def test_crash_recovery_rebuilds_an_entry_per_message(tmp_path: Path) -> None:
    store = DefaultMessageStore(small_config(tmp_path, flushIntervalConsumeQueue=3_600_000), ("10.0.0.7", 8081))
    store.load()
    store.start()
    expected = fill(store)
    crash(store)
    for cq in store.queues.values():
        cq.destroy()
    again = DefaultMessageStore(small_config(tmp_path), ("10.0.0.7", 8081))
    again.load()
    assert again.stats.recovered_records == 4
    assert again.get_max_offset_in_queue("T", 0) == 16
    got = again.get_message("g", "T", 0, 0, 100)
    assert [m.body for m in got.messages] == [e.body for e in expected]
    assert again.get_message("g", "T", 0, 0, 100, TagFilter.parse("a")).messages[0].body == expected[0].body
    again.start()
    nxt = again.put_message(batch("T", 0, entries(300, 2)))
    assert nxt.append_result is not None and nxt.append_result.logics_offset == 16
    again.shutdown()


def test_retention_drops_a_batch_whole(store_factory: StoreFactory) -> None:
    store = store_factory(fileReservedTime=0)
    for i in range(200):  # ~0.8 KB per batch over 64 KiB segments
        assert store.put_message(batch("T", 0, entries(i * 10, 10))).ok
    assert len(store.commitlog.files.files) > 1
    deleted = store.delete_expired_files(force=True)
    assert deleted >= 1
    low = store.get_min_offset_in_queue("T", 0)
    assert low > 0 and low % 10 == 0, "a batch's entries all go with its segment"
    got = store.get_message("g", "T", 0, low, 3)
    assert [m.queue_offset for m in got.messages] == [low, low + 1, low + 2]


def test_records_whose_segment_is_gone_are_reported_not_served(store_factory: StoreFactory) -> None:
    """Retention deleting a segment between the ConsumeQueue read and the record read: those spans come back as
    gone (the pop acks them, the pull skips them), the others as records, batches unwrapped."""
    store = store_factory(fileReservedTime=0)
    sent: list[bytes] = []
    for i in range(200):  # batches and single messages over several 64 KiB segments
        if i % 3:
            es = entries(i * 10, 10)
            assert store.put_message(batch("T", 0, es)).ok
            sent += [e.body for e in es]
        else:
            one, e = single(i)
            assert store.put_message(one).ok
            sent.append(e.body)
    spans = store.get_message_spans("g", "T", 0, 0, 100_000, max_total_bytes=1 << 30).spans
    assert len(spans) == len(sent)
    assert store.delete_expired_files(force=True) >= 1
    low = store.commitlog.min_offset
    parts, gone, corrupt = store.read_records(spans)
    assert gone == [k for k, (_, phys, _) in enumerate(spans) if phys < low] and gone and not corrupt
    served = [v.body for v in iter_records(b"".join(part for _, part in parts))]
    assert sum(n for n, _ in parts) == len(served) == len(spans) - len(gone)
    assert served == sent[len(gone) :]
