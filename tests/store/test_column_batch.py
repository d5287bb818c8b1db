"""A v2 request's plain messages appended from columns (``ColumnBatch``) leave the store exactly as the general path
(one message object each) does: the same CommitLog bytes across segment ends, the same ConsumeQueue entries and
index, the same refusals; they survive a crash like any other record."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from broker.store.message import COMPRESSED_FLAG, MessageExtBrokerInner, tags_hash_code
from broker.store.message_store import DefaultMessageStore
from broker.store.plain_batch import ColumnBatch
from broker.store.results import PutMessageStatus
from orbitmq import message_const as mc
from orbitmq.record import MAX_PROPERTIES_BYTES, encode_properties
from tests.store.conftest import small_config
from tests.store.test_plain_batch import (
    STORE_HOST,
    assert_same_found,
    assert_stores_equal,
    open_store,
    outcome,
    put_general,
)
from tests.store.test_recovery import crash

BORN = 1_700_000_000_123
HOSTS = (("10.1.2.3", 4567), ("10.9.8.7", 1234))


def messages(topic: str, qid: int, first: int, n: int, big: int | None = None) -> list[MessageExtBrokerInner]:
    """What the general path stores for plain v2 messages: an id each; on some a tag, keys, user properties, a
    compressed body, another born host or time; ``big``: that one's body does not fit a segment; ``big + 1``:
    its properties pass the record's limit."""
    out = []
    for i in range(first, first + n):
        props: dict[str, str] = {}
        if i % 4 == 3:  # v2's order: user properties, tag, keys, id
            props = {"color": "red", "n": str(i)} if i % 8 == 3 else {}
            props |= {mc.PROPERTY_TAGS: "TagK", mc.PROPERTY_KEYS: f"order-{i} user-{i % 7}"}
        elif i % 4 == 1:
            props[mc.PROPERTY_TAGS] = f"T{i % 5}"
        if big is not None and i == big + 1:
            props["huge"] = "v" * MAX_PROPERTIES_BYTES
        props[mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = f"COL{i:06d}"
        body = b"B" * 70_000 if i == big else f"body-{i}-".encode() * (1 + i % 40)
        out.append(
            MessageExtBrokerInner(
                topic,
                body,
                qid,
                props,
                sys_flag=COMPRESSED_FLAG if i % 5 == 2 else 0,
                born_timestamp=BORN + i,
                born_host=HOSTS[i % 7 == 6],
                store_host=STORE_HOST,
            )
        )
    return out


def columns(msgs: list[MessageExtBrokerInner]) -> ColumnBatch:
    """The same messages as the v2 send path reads them into columns."""
    return ColumnBatch(
        msgs[0].topic,
        msgs[0].queue_id,
        [m.body for m in msgs],
        [encode_properties(m.properties) for m in msgs],
        [m.sys_flag for m in msgs],
        [m.born_timestamp for m in msgs],
        [m.born_host for m in msgs],
        [tags_hash_code(m.tags) for m in msgs],
        [m.properties[mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] for m in msgs],
        [m.properties.get(mc.PROPERTY_KEYS, "") for m in msgs],
        STORE_HOST,
    )


def copies(msgs: list[MessageExtBrokerInner]) -> list[MessageExtBrokerInner]:
    return [dataclasses.replace(m, properties=dict(m.properties)) for m in msgs]


def test_column_batches_store_what_the_general_path_stores(tmp_path: Path) -> None:
    col_store, general_store = open_store(tmp_path / "columns"), open_store(tmp_path / "general")
    try:
        for msgs in (messages("T", 0, 0, 300), messages("T", 1, 300, 7), messages("T", 0, 307, 200, big=350)):
            got = asyncio.run(_put(col_store, columns(msgs)))
            want = asyncio.run(put_general(general_store, copies(msgs), [None] * len(msgs)))
            assert outcome(got) == outcome(want)
        refused = {i: r for i, r in enumerate(got) if not r.ok}
        assert sorted(refused) == [350 - 307, 351 - 307]
        assert refused[43].status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "does not fit a commitlog segment" in (refused[43].error or "")
        assert refused[44].status is PutMessageStatus.PROPERTIES_SIZE_EXCEEDED
        assert f"the limit is {MAX_PROPERTIES_BYTES}" in (refused[44].error or "")

        # a column batch between two general puts of the same turn of the loop is appended on its own, in order
        mixed = asyncio.run(_three_in_one_turn(col_store, messages("U", 0, 600, 5), messages("U", 0, 605, 5)))
        for first in (600, 605, 610):
            asyncio.run(put_general(general_store, copies(messages("U", 0, first, 5)), [None] * 5))
        assert [r.append_result.logics_offset for rs in mixed for r in rs if r.append_result] == list(range(15))

        assert_stores_equal(col_store, general_store, [("T", 0), ("T", 1), ("U", 0)])
        ids = [("T", "COL000000"), ("T", "COL000299"), ("T", "COL000506"), ("U", "COL000607")]
        assert_same_found(col_store, general_store, [*ids, ("T", "order-3"), ("T", "user-3"), ("U", "order-607")])
        assert col_store.query_message("T", "COL000350", 4, 0, 2**62) == []  # refused: not indexed
    finally:
        col_store.shutdown()
        general_store.shutdown()


async def _put(store: DefaultMessageStore, batch: ColumnBatch):
    return await store.put_plain_batch_aio(batch)


async def _three_in_one_turn(store: DefaultMessageStore, general: list[MessageExtBrokerInner], cols: list):
    """A general put, a column batch, a general put, made in one turn of the loop."""
    last = messages("U", 0, 610, 5)
    return await asyncio.gather(
        store.put_messages_aio(copies(general)),
        store.put_plain_batch_aio(columns(cols)),
        store.put_messages_aio(copies(last)),
    )


def test_column_batch_records_survive_a_crash(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    msgs = messages("T", 0, 0, 400)
    results = asyncio.run(_put(store, columns(msgs)))
    assert all(r.ok for r in results)
    crash(store)
    again = DefaultMessageStore(small_config(tmp_path / "s"), STORE_HOST)
    again.load()
    again.start()
    try:
        got = again.get_message("G", "T", 0, 0, 1000)
        assert [(m.body, m.properties, m.sys_flag, m.born_timestamp, m.born_host) for m in got.messages] == [
            (m.body, m.properties, m.sys_flag, m.born_timestamp, m.born_host) for m in msgs
        ]
        found = again.query_message("T", "COL000399", 4, 0, 2**62)
        assert [m.commitlog_offset for m in found] == [results[-1].append_result.wrote_offset]
    finally:
        again.shutdown()


def test_a_column_batch_hands_out_the_messages_the_general_path_builds() -> None:
    msgs = messages("T", 3, 0, 8)
    batch = columns(msgs)
    assert len(batch) == 8
    fields = ("topic", "body", "queue_id", "properties", "flag", "sys_flag", "born_timestamp", "born_host")
    for got, want in zip(batch, msgs, strict=True):  # what hooks, dispatchers, metrics and refusals see
        assert [getattr(got, f) for f in fields] == [getattr(want, f) for f in fields]
        assert got.effective_tags_code() == want.effective_tags_code()
    assert [m.body for m in batch[1:3]] == [msgs[1].body, msgs[2].body] and batch[-1].body == msgs[-1].body
