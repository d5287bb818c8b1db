"""A SendBatch request's plain messages appended straight from its payload (``PlainBatch``) leave the store exactly
as the general path (decoded messages, one object each) does: the same CommitLog bytes across segment ends, the
same ConsumeQueue entries and index, the same refusals; they survive a crash like any other record."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from broker.store.message import MessageExtBrokerInner, tags_hash_code
from broker.store.message_store import DefaultMessageStore
from broker.store.plain_batch import PlainBatch
from broker.store.results import PutMessageResult, PutMessageStatus
from orbitmq.message_batch import BatchEntry, decode_message_batch, encode_message_batch, scan_message_batch
from orbitmq.validation import PLAIN_BATCH_PROPERTIES
from tests.store.conftest import small_config
from tests.store.test_recovery import crash

BORN = 1_700_000_000_123
BORN_HOST = ("10.1.2.3", 4567)
STORE_HOST = ("10.0.0.7", 8081)


def entries(first: int, n: int, big: int | None = None) -> list[BatchEntry]:
    """Plain messages (an id; a tag, first or last, or user properties, a tag and keys on some), bodies of varying
    sizes; ``big``: that one's body does not fit a segment."""
    out = []
    for i in range(first, first + n):
        props = {"UNIQ_KEY": f"PLAIN{i:06d}"}
        if i % 4 == 1:
            props = {"TAGS": "TagA", **props}
        elif i % 4 == 2:
            props["TAGS"] = f"T{i % 5}"
        elif i % 4 == 3:  # oms's order: user properties, tag, keys, id
            user = {"__idem": f"q:0:1:{i}", "color": "red"} if i % 8 == 3 else {}
            props = {**user, "TAGS": "TagK", "KEYS": f"order-{i} user-{i % 7}", **props}
        body = b"B" * 70_000 if i == big else f"body-{i}-".encode() * (1 + i % 40)
        out.append(BatchEntry(i % 4, body, props))
    return out


def plain_batch(topic: str, qid: int, es: list[BatchEntry]) -> PlainBatch:
    payload = encode_message_batch(es)
    scanned = scan_message_batch(payload, len(es), 1024, 4 * 1024 * 1024, PLAIN_BATCH_PROPERTIES)
    assert scanned is not None
    codes = [tags_hash_code(t.decode() if t is not None else None) for t in scanned.tags]
    return PlainBatch(topic, qid, payload, scanned, codes, BORN, BORN_HOST, STORE_HOST)


def inners(topic: str, qid: int, es: list[BatchEntry]) -> tuple[list[MessageExtBrokerInner], list[bytes]]:
    """What the general path hands the store for the same request (Produce/SendBatch's ``_store``)."""
    decoded = decode_message_batch(encode_message_batch(es), len(es), 1024)
    msgs = [
        MessageExtBrokerInner(
            topic,
            e.body,
            qid,
            e.properties,
            flag=e.flag,
            born_timestamp=BORN,
            born_host=BORN_HOST,
            store_host=STORE_HOST,
        )
        for e in decoded
    ]
    return msgs, [e.raw_properties for e in decoded]


def open_store(root: Path) -> DefaultMessageStore:
    # 64 KiB segments: the batches below cross segment ends; a fixed clock: equal store timestamps
    store = DefaultMessageStore(small_config(root), STORE_HOST, clock=lambda: 1_700_000_001.5)
    store.load()
    store.start()
    return store


async def put_plain(store: DefaultMessageStore, batch: PlainBatch) -> Sequence[PutMessageResult]:
    return await store.put_plain_batch_aio(batch)


async def put_general(store: DefaultMessageStore, msgs: list[MessageExtBrokerInner], raws: list[bytes]):
    return await store.put_messages_aio(msgs, raws)


async def both_in_one_turn(store: DefaultMessageStore, first: PlainBatch, msgs, raws, last: PlainBatch):
    """Puts made in one turn of the loop: a plain batch, a general one, a plain one, appended in that order."""
    return await asyncio.gather(
        store.put_plain_batch_aio(first), store.put_messages_aio(msgs, raws), store.put_plain_batch_aio(last)
    )


def commitlog_bytes(store: DefaultMessageStore) -> bytes:
    store.commitlog.flush()
    return b"".join(bytes(mf.view[: mf.wrote_position]) for mf in store.commitlog.files.files)


def outcome(results: Sequence[PutMessageResult]) -> list[tuple[PutMessageStatus, int, int, str | None]]:
    return [
        (
            r.status,
            r.append_result.wrote_offset if r.append_result else -1,
            r.append_result.logics_offset if r.append_result else -1,
            r.error,
        )
        for r in results
    ]


def assert_stores_equal(
    store: DefaultMessageStore, general: DefaultMessageStore, queues: list[tuple[str, int]]
) -> None:
    """The same CommitLog bytes (across segment ends) and the same entries in ``queues`` in both stores."""
    assert len(store.commitlog.files.files) > 2  # the runs crossed segment ends
    assert commitlog_bytes(store) == commitlog_bytes(general)
    for key in queues:
        a, b = store.queues[key], general.queues[key]
        assert a.max_offset == b.max_offset > 0
        assert [a.get(i) for i in range(a.max_offset)] == [b.get(i) for i in range(b.max_offset)]


def assert_same_found(store: DefaultMessageStore, general: DefaultMessageStore, keys: list[tuple[str, str]]) -> None:
    """Each (topic, key) finds something, and the same messages, in both stores."""
    for topic, key in keys:
        found = [m.commitlog_offset for m in store.query_message(topic, key, 64, 0, 2**62)]
        assert found and found == [m.commitlog_offset for m in general.query_message(topic, key, 64, 0, 2**62)]


def test_plain_batches_store_what_the_general_path_stores(tmp_path: Path) -> None:
    plain_store, general_store = open_store(tmp_path / "plain"), open_store(tmp_path / "general")
    try:
        batches = [("T", 0, entries(0, 300)), ("T", 1, entries(300, 7)), ("T", 0, entries(307, 200, big=350))]
        for topic, qid, es in batches:
            got = asyncio.run(put_plain(plain_store, plain_batch(topic, qid, es)))
            want = asyncio.run(put_general(general_store, *inners(topic, qid, es)))
            assert outcome(got) == outcome(want)
        refused = [r for r in got if not r.ok]
        assert len(refused) == 1 and refused[0].status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "does not fit a commitlog segment" in (refused[0].error or "")

        # several puts in one turn of the loop: each plain batch is appended on its own, in order
        mixed = asyncio.run(
            both_in_one_turn(
                plain_store,
                plain_batch("U", 0, entries(600, 5)),
                *inners("U", 0, entries(605, 5)),
                plain_batch("U", 0, entries(610, 5)),
            )
        )
        for es in (entries(600, 5), entries(605, 5), entries(610, 5)):
            asyncio.run(put_general(general_store, *inners("U", 0, es)))
        assert [r.append_result.logics_offset for rs in mixed for r in rs if r.append_result] == list(range(15))

        assert_stores_equal(plain_store, general_store, [("T", 0), ("T", 1), ("U", 0)])
        ids = [("T", "PLAIN000000"), ("T", "PLAIN000299"), ("T", "PLAIN000506"), ("U", "PLAIN000612")]
        assert_same_found(plain_store, general_store, [*ids, ("T", "order-3"), ("T", "user-3"), ("U", "order-611")])
        assert plain_store.query_message("T", "PLAIN000350", 4, 0, 2**62) == []  # refused: not indexed
    finally:
        plain_store.shutdown()
        general_store.shutdown()


def test_plain_batch_records_survive_a_crash(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    es = entries(0, 400)
    results = asyncio.run(put_plain(store, plain_batch("T", 0, es)))
    assert all(r.ok for r in results)
    crash(store)
    again = DefaultMessageStore(small_config(tmp_path / "s"), STORE_HOST)
    again.load()
    again.start()
    try:
        got = again.get_message("G", "T", 0, 0, 1000)
        assert [m.body for m in got.messages] == [e.body for e in es]
        assert [m.properties for m in got.messages] == [e.properties for e in es]
        found = again.query_message("T", "PLAIN000399", 4, 0, 2**62)
        assert [m.commitlog_offset for m in found] == [results[-1].append_result.wrote_offset]
    finally:
        again.shutdown()


def test_a_plain_batch_hands_out_the_messages_the_general_path_builds() -> None:
    es = entries(0, 6)
    batch = plain_batch("T", 3, es)
    msgs, _ = inners("T", 3, es)
    assert len(batch) == 6
    for got, want in zip(batch, msgs, strict=True):  # what dispatchers, metrics and refusals see
        assert (got.topic, got.body, got.queue_id, got.properties, got.flag, got.born_timestamp, got.born_host) == (
            want.topic,
            want.body,
            want.queue_id,
            want.properties,
            want.flag,
            want.born_timestamp,
            want.born_host,
        )
        assert got.effective_tags_code() == want.effective_tags_code()
    assert [m.body for m in batch[1:3]] == [msgs[1].body, msgs[2].body] and batch[-1].body == msgs[-1].body
