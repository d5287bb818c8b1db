"""``send_batch`` over ``Produce/SendBatch`` against real broker processes: what a consumer reads back matches the
results and what v2 SendMessage stores, refusals keep v2's codes, and batches SendBatch cannot carry still go."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from rocketmq.grpc_protocol import definition_pb2

import oms
from oms.client import identity
from oms.client.endpoints import Endpoint
from oms.client.identity import new_message_id, new_message_ids
from oms.client.routes import RouteQueue
from oms.convert import WireMessage, to_wire
from oms.producer.base import ProducerBase
from oms.producer.columns import plain_column_runs, plain_message_runs
from oms.producer.plain_run import PlainRun, PlainRunBuilder, in_input_order
from oms.producer.result import SendResult
from oms.producer.sender import send_batch_request, send_batch_results, topic_of
from oms.queue import MessageQueue
from orbitmq.errors import Code, MQError
from orbitmq.limits import MAX_PROPERTIES_SIZE, MAX_PROPERTY_COUNT
from orbitmq.message_batch import BatchEntry, decode_message_batch, encode_message_batch
from orbitmq.proto import produce_pb2
from orbitmq.record import decode_properties
from tests.oms.helpers import create_topic, pull_all


class SendBatchCalls:
    """Counts the producer's ``Produce/SendBatch`` calls (and their answers); the real call still goes out."""

    def __init__(self, producer: ProducerBase) -> None:
        self.rpc = producer._running_core().rpc
        self.answers: list[produce_pb2.SendBatchResponse | None] = []
        real = self.rpc.send_batch

        async def counted(*args: Any, **kw: Any) -> produce_pb2.SendBatchResponse | None:
            answer = await real(*args, **kw)
            self.answers.append(answer)
            return answer

        self.rpc.send_batch = counted  # type: ignore[method-assign]
        real_direct = self.rpc.send_batch_direct

        def counted_direct(*args: Any, **kw: Any) -> produce_pb2.SendBatchResponse | None:  # a caller's thread
            answer = real_direct(*args, **kw)
            if answer is not None:  # None: not sent here, the loop's send_batch (counted above) sends it
                self.answers.append(answer)
            return answer

        self.rpc.send_batch_direct = counted_direct  # type: ignore[method-assign]


def stored_by_id(addr: str, topic: str) -> dict[str, tuple[int, definition_pb2.Message]]:
    """Every stored message of ``topic`` by message id: (queue id, message)."""
    return {m.system_properties.message_id: (qid, m) for qid, msgs in pull_all(addr, topic).items() for m in msgs}


def _messages(topic: str, n: int, prefix: str) -> list[oms.BytesMessage]:
    return [
        oms.BytesMessage(
            f"{prefix}-{i}",
            topic,
            tags=f"Tag{i % 3}" if i % 4 else None,
            keys=[f"k{i}", f"order-{i // 10}"] if i % 2 else None,
            user_headers={"i": i, "color": "red"} if i % 5 else None,
        )
        for i in range(n)
    ]


def _record(m: definition_pb2.Message) -> tuple[Any, ...]:
    sp = m.system_properties
    return (m.body, sp.tag if sp.HasField("tag") else None, tuple(sp.keys), dict(m.user_properties))


@pytest.fixture
def fast_producer(access_point: oms.MessagingAccessPoint) -> Iterator[oms.Producer]:
    with access_point.create_producer(operation_timeout=10_000) as p:
        yield p


@pytest.mark.integration
@pytest.mark.timeout(90)
def test_results_match_what_a_consumer_reads_and_what_v2_stores(shared_broker, fast_producer):
    calls = SendBatchCalls(fast_producer)
    batch = _messages("OmsFast", 300, "fast")
    results = fast_producer.send_batch(batch)
    assert len(calls.answers) == 1 and calls.answers[0] is not None  # one SendBatch, served
    assert [r.message_id for r in results] == [m.message_id for m in batch]
    assert all(r.ok and r.topic == "OmsFast" and r.queue.queue_id == -1 for r in results)  # as v2 results say
    stored = stored_by_id(shared_broker.addr, "OmsFast")
    assert set(stored) == {r.message_id for r in results}
    assert len({qid for qid, _ in stored.values()}) == 1  # one request, one queue
    for result, message in zip(results, batch, strict=True):
        _, m = stored[result.message_id]
        assert m.system_properties.queue_offset == result.queue_offset
        assert m.body == message.body
    offsets = [r.queue_offset for r in results]
    assert offsets == list(range(offsets[0], offsets[0] + len(batch)))

    # The same messages one by one over v2 SendMessage are stored with the same tags, keys and properties.
    twins = _messages("OmsFastTwin", 300, "fast")
    for twin in twins:
        fast_producer.send(twin)
    assert len(calls.answers) == 1  # single sends stay on v2
    twin_stored = stored_by_id(shared_broker.addr, "OmsFastTwin")
    for result, twin in zip(results, twins, strict=True):
        assert _record(stored[result.message_id][1]) == _record(twin_stored[str(twin.message_id)][1])


@pytest.mark.integration
@pytest.mark.timeout(90)
def test_async_send_batch_takes_the_fast_path_too(shared_broker, access_point):
    async def main() -> tuple[list[oms.SendResult], SendBatchCalls]:
        async with access_point.create_async_producer(operation_timeout=10_000) as p:
            calls = SendBatchCalls(p.producer)
            return await p.send_batch(_messages("OmsFastAio", 40, "aio")), calls

    results, calls = asyncio.run(asyncio.wait_for(main(), 60))
    assert len(calls.answers) == 1 and calls.answers[0] is not None
    stored = stored_by_id(shared_broker.addr, "OmsFastAio")
    assert {i: (stored[r.message_id][1].system_properties.queue_offset) for i, r in enumerate(results)} == {
        i: r.queue_offset for i, r in enumerate(results)
    }
    assert sorted(m.body for _, m in stored.values()) == sorted(f"aio-{i}".encode() for i in range(40))


@pytest.mark.integration
@pytest.mark.timeout(90)
def test_a_batch_with_a_delayed_message_goes_over_v2(shared_broker, fast_producer):
    create_topic(shared_broker.addr, "OmsFastMixed", "MIXED")
    calls = SendBatchCalls(fast_producer)
    later = int(time.time() * 1000) + 60_000
    batch = [*_messages("OmsFastMixed", 5, "now"), oms.BytesMessage(b"later", "OmsFastMixed", start_time=later)]
    results = fast_producer.send_batch(batch)
    assert calls.answers == []  # nothing of it went as SendBatch
    assert [r.message_id for r in results] == [m.message_id for m in batch] and all(r.ok for r in results)
    assert results[-1].recall_handle  # what only the v2 path gives a delayed message
    stored = stored_by_id(shared_broker.addr, "OmsFastMixed")
    assert sorted(m.body for _, m in stored.values()) == sorted(f"now-{i}".encode() for i in range(5))
    for r in results[:5]:
        assert stored[r.message_id][1].system_properties.queue_offset == r.queue_offset


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_refused_batch_raises_what_v2_raises_and_stores_nothing(broker_factory):
    broker = broker_factory.broker(options={"maxMessageSize": "8192"})
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer(compress_msg_body_over_howmuch=0, operation_timeout=10_000) as p,
    ):
        calls = SendBatchCalls(p)
        p.send_batch([oms.BytesMessage(b"ok", "OmsFastBig")])
        with pytest.raises(oms.OMSException) as v2:
            p.send(oms.BytesMessage(b"y" * 9000, "OmsFastBig"))
        with pytest.raises(oms.OMSException) as fast:
            p.send_batch([oms.BytesMessage(b"small", "OmsFastBig"), oms.BytesMessage(b"y" * 9000, "OmsFastBig")])
        # SendBatch refused it with the broker's code, then v2 gave the answer to raise
        assert [a.status.code for a in calls.answers if a is not None] == [Code.OK, Code.MESSAGE_BODY_TOO_LARGE]
    assert fast.value.code == v2.value.code == Code.MESSAGE_BODY_TOO_LARGE
    assert type(fast.value) is type(v2.value) and "8192" in str(fast.value)
    assert sorted(m.body for _, m in stored_by_id(broker.addr, "OmsFastBig").values()) == [b"ok"]


@pytest.mark.integration
@pytest.mark.timeout(90)
def test_an_endpoint_without_send_batch_is_remembered(broker_factory):
    namesrv = broker_factory.namesrv()  # a real gRPC server that does not serve Produce/SendBatch
    broker = broker_factory.broker()
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_producer(operation_timeout=10_000) as p,
    ):
        calls = SendBatchCalls(p)
        core = p._running_core()
        first = p.send_batch(_messages("OmsFastNs", 2, "first"))
        assert len(calls.answers) == 1 and calls.answers[0] is not None and all(r.ok for r in first)
        [served] = core.routes.endpoints()
        wires = [p._prepare(m) for m in _messages("OmsFastNs", 3, "never")]
        request = send_batch_request(wires)
        assert request is not None
        host, port = namesrv.addr.rsplit(":", 1)
        elsewhere = Endpoint.of([(host, int(port))])
        assert p._run(core.rpc.send_batch(elsewhere, request, 5), 10) is None  # UNIMPLEMENTED there
        assert not core.rpc.serves_send_batch(elsewhere) and core.rpc.serves_send_batch(served)
        # the broker too, as if it did not serve it: batches go as v2 SendMessage and are not asked again
        core.rpc.pool.without_send_batch.add(served)
        calls.answers.clear()
        results = p.send_batch(_messages("OmsFastNs", 20, "ns"))
        assert calls.answers == [] and all(r.ok for r in results)
    assert sorted(m.body for _, m in stored_by_id(broker.addr, "OmsFastNs").values()) == sorted(
        [b"first-0", b"first-1", *(f"ns-{i}".encode() for i in range(20))]
    )


def _wire(message: oms.BytesMessage, **kw: Any) -> WireMessage:
    return to_wire(message, max_message_size=1 << 20, compress_over=kw.pop("compress_over", 0), **kw)


def test_only_plain_batches_take_send_batch() -> None:
    plain = _wire(oms.BytesMessage(b"x", "T", tags="a", keys=["k"], user_headers={"p": 1}))
    request = send_batch_request([plain])
    assert request is not None and request.count == 1 and request.topic == "T" and request.queue_id == -1
    later = int(time.time() * 1000) + 60_000
    for other in (
        _wire(oms.BytesMessage(b"x", "T", sharding_key="g")),  # FIFO
        _wire(oms.BytesMessage(b"x", "T", start_time=later)),  # delay
        _wire(oms.BytesMessage(b"x", "T", delay_level=2)),  # delay level
        _wire(oms.BytesMessage(b"x", "T"), transactional=True),
        _wire(oms.BytesMessage(b"z" * 9000, "T"), compress_over=4096),  # compressed: the v2 body encoding says so
        _wire(oms.BytesMessage(b"x", "T"), namespace="ns"),
    ):
        assert send_batch_request([plain, other]) is None


def test_a_refused_send_batch_answer_raises_the_broker_code() -> None:
    wires = [_wire(oms.BytesMessage(b"x", "T")) for _ in range(2)]
    queue = RouteQueue(MessageQueue("T", "b1", 0), definition_pb2.READ_WRITE, Endpoint.of([("127.0.0.1", 1)]),
                       frozenset({definition_pb2.NORMAL}))  # fmt: skip
    refused = produce_pb2.SendBatchResponse(
        status=produce_pb2.Status(code=Code.ILLEGAL_MESSAGE_PROPERTY_KEY, message="no")
    )
    with pytest.raises(oms.OMSException) as err:
        send_batch_results(refused, wires, queue)
    assert err.value.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY and "SendBatch to b1: no" in str(err.value)
    with pytest.raises(oms.OMSRuntimeException, match="no status"):
        send_batch_results(produce_pb2.SendBatchResponse(), wires, queue)
    slow = produce_pb2.SendBatchResponse(
        status=produce_pb2.Status(code=Code.MASTER_PERSISTENCE_TIMEOUT), first_queue_offset=7, commitlog_offsets=[1, 2]
    )
    results = send_batch_results(slow, wires, queue)
    assert [(r.queue_offset, r.status, r.message_id) for r in results] == [
        (7, oms.SendStatus.FLUSH_DISK_TIMEOUT, wires[0].message_id),
        (8, oms.SendStatus.FLUSH_DISK_TIMEOUT, wires[1].message_id),
    ]


def test_a_plain_run_is_sent_and_answered_without_making_its_rows(monkeypatch) -> None:
    [run] = PlainRunBuilder(born_host="h", max_message_size=1 << 20, max_bytes=1 << 20, max_count=8).runs(
        "T", [b"a", b"b"], None, None, None
    )
    monkeypatch.setattr(PlainRun, "_row", lambda self, i: pytest.fail("a row was made"))
    queue = RouteQueue(MessageQueue("T", "b1", 0), definition_pb2.READ_WRITE, Endpoint.of([("127.0.0.1", 1)]),
                       frozenset({definition_pb2.NORMAL}))  # fmt: skip
    ok = produce_pb2.SendBatchResponse(
        status=produce_pb2.Status(code=Code.OK), first_queue_offset=3, commitlog_offsets=[10, 20]
    )
    assert topic_of(run) == "T" and send_batch_request(run).messages == run.payload
    assert [(r.topic, r.queue_offset, r.message_id) for r in send_batch_results(ok, run, queue)] == [
        ("T", 3, run.ids[0]),
        ("T", 4, run.ids[1]),
    ]


def _plain_messages(topic: str, n: int, prefix: str) -> list[oms.BytesMessage]:
    """Messages ``plain_message_runs`` takes: a topic, maybe a tag, keys, user headers passed on as properties."""
    return [
        oms.BytesMessage(
            f"{prefix}-{i}",
            topic,
            tags=f"Tag{i % 3}" if i % 4 else None,
            keys=[f"k{i}", "shared"] if i % 2 else None,
            user_headers={"i": i, "host": "web-1"} if i % 3 else None,
        )
        for i in range(n)
    ]


def _comparable(wire: WireMessage) -> tuple[Any, ...]:
    """A wire message without what differs from one conversion to the next (its id, its born time)."""
    props = dict(wire.batch_properties or {})
    props.pop("UNIQ_KEY")
    pb = definition_pb2.Message()
    pb.CopyFrom(wire.pb)
    pb.system_properties.ClearField("message_id")
    pb.system_properties.ClearField("born_timestamp")
    return wire.topic, wire.body, wire.message_type, props, pb.SerializeToString(deterministic=True)


def test_plain_batches_convert_as_to_wire_converts() -> None:
    limits = {"born_host": "127.0.0.1", "max_message_size": 1 << 20, "compress_over": 4096}
    batch = _plain_messages("T", 12, "p")
    batch[0].sys_headers()["MESSAGE_ID"] = "an id it had"  # replaced, as to_wire replaces it
    twins = _plain_messages("T", 12, "p")
    runs = plain_message_runs(batch, **limits)
    assert runs is not None and len(runs) == 1
    wires = list(runs[0])
    # the request carries exactly what the general encoder makes of the rows
    assert runs[0].payload == encode_message_batch([BatchEntry(0, w.body, w.batch_properties or {}) for w in wires])
    assert [w.message_id for w in wires] == [m.message_id for m in batch]  # each message got its new id
    assert len({w.message_id for w in wires}) == 12 and "an id it had" not in {w.message_id for w in wires}
    for wire, twin in zip(wires, twins, strict=True):
        assert wire.batch_properties is not None and wire.batch_properties["UNIQ_KEY"] == wire.message_id
        assert wire.source is not None and wire.pb.system_properties.message_id == wire.message_id
        assert _comparable(wire) == _comparable(to_wire(twin, **limits))

    # rows of send_columns with user properties too: the v2 message a broker without SendBatch would get
    [run] = plain_column_runs(
        "T", [b"a", b"b"], ["t", None], [["k1", "k2"], None], [{"color": "red"}, None], **limits
    ) or [None]
    assert run is not None
    rows = list(run)
    assert run.payload == encode_message_batch([BatchEntry(0, w.body, w.batch_properties or {}) for w in rows])
    twins = [
        oms.BytesMessage(b"a", "T", tags="t", keys=["k1", "k2"], user_headers={"color": "red"}),
        oms.BytesMessage(b"b", "T"),
    ]
    for row, twin in zip(rows, twins, strict=True):
        assert _comparable(row) == _comparable(to_wire(twin, **limits))

    # anything more than plain: None, and send_batch converts message by message
    later = int(time.time() * 1000) + 60_000
    for other in (
        oms.BytesMessage(b"x", "T", user_headers={"TAGS": "t"}),  # to_wire reads it as the tag
        oms.BytesMessage(b"x", "T", user_headers={"KEYS": "k"}),
        oms.BytesMessage(b"x", "T", sharding_key="g"),
        oms.BytesMessage(b"x", "T", start_time=later),
        oms.BytesMessage(b"x", "T", delay_level=2),
        oms.BytesMessage(b"z" * 5000, "T"),  # over the compression threshold
        oms.BytesMessage(b"x", "T", sys_headers={"PRIORITY": 1}),  # unsupported: to_wire says why
    ):
        assert plain_message_runs([*_plain_messages("T", 3, "p"), other], **limits) is None


@pytest.mark.parametrize(
    "message",
    [
        oms.BytesMessage(b"x", "T", tags=""),
        oms.BytesMessage(b"x", "T", tags="a|b"),
        oms.BytesMessage(b"x", "T", keys=["bad\x01key"]),
        oms.BytesMessage(b"x", "bad topic!"),
        oms.BytesMessage(b"x", ""),
        oms.BytesMessage(b"", "T"),
        oms.BytesMessage(b"y" * 2048, "T"),
        oms.BytesMessage(b"x", "T", user_headers={"UNIQ_KEY": "forged"}),
        oms.BytesMessage(b"x", "T", user_headers={"k": "v\x01"}),
    ],
)
def test_a_refused_plain_message_raises_what_to_wire_raises(message: oms.BytesMessage) -> None:
    limits = {"born_host": "127.0.0.1", "max_message_size": 1024, "compress_over": 0}
    with pytest.raises(oms.OMSException) as expected:
        to_wire(message, **limits)
    with pytest.raises(type(expected.value)) as got:
        plain_message_runs([*_plain_messages("T", 2, "ok"), message], **limits)
    assert str(got.value) == str(expected.value)


@pytest.mark.integration
@pytest.mark.timeout(90)
def test_plain_batches_store_what_v2_stores(shared_broker, fast_producer):
    calls = SendBatchCalls(fast_producer)
    batch = _plain_messages("OmsPlain", 200, "plain")
    results = fast_producer.send_batch(batch)
    assert len(calls.answers) == 1 and calls.answers[0] is not None
    assert [r.message_id for r in results] == [m.message_id for m in batch] and all(r.ok for r in results)
    stored = stored_by_id(shared_broker.addr, "OmsPlain")
    twins = _plain_messages("OmsPlainTwin", 200, "plain")
    for twin in twins:
        fast_producer.send(twin)
    twin_stored = stored_by_id(shared_broker.addr, "OmsPlainTwin")
    for result, twin in zip(results, twins, strict=True):
        assert stored[result.message_id][1].system_properties.queue_offset == result.queue_offset
        assert _record(stored[result.message_id][1]) == _record(twin_stored[str(twin.message_id)][1])


def test_plain_runs_are_cut_like_requests_and_keep_input_positions() -> None:
    limits = {"born_host": "127.0.0.1", "max_message_size": 1 << 20, "compress_over": 0}
    topics = ["A", "B", "A", "A", "B", "A"]
    batch = [oms.BytesMessage(f"m{i}", t, tags="t" if i % 2 else None) for i, t in enumerate(topics)]
    runs = plain_message_runs(batch, **limits)
    assert runs is not None
    assert [(r.topic, list(r.positions)) for r in runs] == [("A", [0, 2, 3, 5]), ("B", [1, 4])]
    assert in_input_order(runs, [r.ids for r in runs], len(batch)) == [m.message_id for m in batch]
    for run in runs:
        assert run.ids == [batch[p].message_id for p in run.positions]  # each message got the id of its row
        assert [w.body for w in run] == [batch[p].body for p in run.positions]
        entries = decode_message_batch(run.payload, len(run), 1024)
        assert [e.body for e in entries] == run.bodies
        assert [e.properties["UNIQ_KEY"] for e in entries] == run.ids

    # count and bytes: at most max_count rows and max_bytes of bodies per run; a larger row gets its own run
    builder = PlainRunBuilder(born_host="h", max_message_size=1 << 20, max_bytes=10, max_count=3)
    bodies = [b"1234", b"1234", b"12", b"1", b"12345678901", b"1", b"1", b"1", b"1"]
    cut = builder.runs("T", bodies, None, None, None)
    assert [r.bodies for r in cut] == [[b"1234", b"1234", b"12"], [b"1"], [b"12345678901"], [b"1", b"1", b"1"], [b"1"]]
    assert [list(r.positions) for r in cut] == [[0, 1, 2], [3], [4], [5, 6, 7], [8]]
    ids = [i for r in cut for i in r.ids]
    assert ids == sorted(ids) and len(set(ids)) == len(bodies)  # ids in row order
    request = cut[0].request(5)
    assert (request.topic, request.queue_id, request.count, request.messages) == ("T", 5, 3, cut[0].payload)


@pytest.mark.parametrize(
    "tags",
    [
        None,
        ["t"] * 7,
        ["t", None, "u", "", "t", None, "v"],
        [None] * 7,
        # properties of 128+ and 256+ bytes: a length byte over 0x7F, a high length byte
        ["x" * 100] * 7,
        ["y" * 300, None, "z" * 120] * 2 + [None],
        ["é", "t", None, "é", "ü", "t", "é"],  # UTF-8 longer than the characters: the row loop's
    ],
    ids=["no-tags", "one-tag", "mixed-tags", "none-tags", "long-tag", "long-mixed-tags", "non-ascii-tags"],
)
def test_rows_with_at_most_a_tag_encode_as_the_general_encoder(tags: list[str | None] | None) -> None:
    # such rows take the builder's simple loop: byte for byte what the general MessageBatch encoder makes of them,
    # cut at max_count rows as the row loop cuts them
    builder = PlainRunBuilder(born_host="h", max_message_size=1 << 20, max_bytes=1 << 20, max_count=3)
    bodies = [f"body {i}".encode() * (i + 1) for i in range(7)]
    runs = builder.runs("T", bodies, tags, None, [None] * 7)
    assert [list(r.positions) for r in runs] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [b for r in runs for b in r.bodies] == bodies
    for run in runs:
        rows = list(run)
        assert run.payload == encode_message_batch([BatchEntry(0, w.body, w.batch_properties or {}) for w in rows])
        for row, position in zip(rows, run.positions, strict=True):
            tag = tags[position] if tags else None
            assert (row.batch_properties or {}).get("TAGS") == (tag or None)


def test_a_tag_too_large_is_refused_by_its_row_even_once_checked() -> None:
    builder = PlainRunBuilder(born_host="h", max_message_size=1 << 20, max_bytes=1 << 20, max_count=1024)
    huge = "t" * (MAX_PROPERTIES_SIZE + 1)
    for _ in range(2):  # the second call finds the tag among the checked ones: its size is still checked
        with pytest.raises(MQError) as err:
            builder.runs("T", [b"a", b"b"], [None, huge], None, None)
        assert err.value.code == Code.MESSAGE_PROPERTIES_TOO_LARGE and builder.failed_row == 1


def test_a_batch_with_something_other_than_a_message_is_not_plain() -> None:
    # left to the message-by-message path, which refuses it as send() does (TypeError)
    limits = {"born_host": "127.0.0.1", "max_message_size": 1 << 20, "compress_over": 4096}
    assert plain_message_runs([*_plain_messages("T", 2, "p"), object()], **limits) is None  # type: ignore[list-item]


def test_a_refused_row_is_named_and_nothing_is_kept() -> None:
    builder = PlainRunBuilder(born_host="h", max_message_size=8, max_bytes=1 << 20, max_count=1024)
    with pytest.raises(MQError) as err:
        builder.runs("T", [b"ok", b"ok", b"too long a body"], None, None, None, positions=[4, 7, 9])
    assert err.value.code == Code.MESSAGE_BODY_TOO_LARGE and builder.failed_row == 9
    assert "producer max_message_size" in err.value.message
    with pytest.raises(MQError):
        builder.runs("T", [b"a", b"b"], None, [[], ["bad\x01key"]], None)
    assert builder.failed_row == 1


def test_results_of_a_stored_run_equal_one_send_result_each() -> None:
    queue = MessageQueue("T", "b1", -1)
    made = SendResult.stored_run(["id1", "id2"], "T", queue, 41, oms.SendStatus.FLUSH_DISK_TIMEOUT)
    expected = [
        SendResult("id1", "T", queue, 41, oms.SendStatus.FLUSH_DISK_TIMEOUT),
        SendResult("id2", "T", queue, 42, oms.SendStatus.FLUSH_DISK_TIMEOUT),
    ]
    assert made == expected and [hash(r) for r in made] == [hash(r) for r in expected]
    # every field, a new one too (a slot stored_run leaves unset fails to read)
    assert [dataclasses.asdict(r) for r in made] == [dataclasses.asdict(r) for r in expected]
    assert not any(hasattr(r, "__dict__") for r in made)  # slots: one object per result for the collector
    with pytest.raises(dataclasses.FrozenInstanceError):
        made[0].queue_offset = 1  # type: ignore[misc]


def test_message_ids_in_bulk_have_the_single_id_layout() -> None:
    ids = new_message_ids(500)
    one = new_message_id()
    assert len(set(ids)) == 500 and one not in ids
    assert all(len(i) == 34 and int(i, 16) >= 0 and i[:26] == one[:26] for i in ids)
    assert [int(i[-8:], 16) for i in ids] == sorted(int(i[-8:], 16) for i in ids)  # counter order


def test_message_ids_in_bulk_wrap_the_counter_and_stay_unique_across_threads(monkeypatch) -> None:
    monkeypatch.setattr(identity, "_message_counter", itertools.count(0xFFFFFFFE))
    assert [i[-8:] for i in new_message_ids(4)] == ["FFFFFFFE", "FFFFFFFF", "00000000", "00000001"]
    monkeypatch.setattr(identity, "_message_counter", itertools.count())
    with ThreadPoolExecutor(4) as pool:
        made = [i for ids in pool.map(lambda _: new_message_ids(1000), range(40)) for i in ids]
    assert len(set(made)) == len(made) == 40_000


def test_property_columns_refusals_name_the_row_or_the_columns() -> None:
    limits = {"born_host": "127.0.0.1", "max_message_size": 1 << 20, "compress_over": 0}
    too_many = {f"c{i}": ["v"] for i in range(MAX_PROPERTY_COUNT + 1)}
    with pytest.raises(oms.OMSMessageFormatException, match=f"property_columns: message has {MAX_PROPERTY_COUNT + 1}"):
        plain_column_runs("T", [b"x"], None, None, None, property_columns=too_many, **limits)
    with pytest.raises(oms.OMSMessageFormatException, match="row 1: user property 'n' is not a string") as info:
        plain_column_runs("T", [b"x", b"y"], None, None, None, property_columns={"n": ["1", 2]}, **limits)  # type: ignore[list-item]
    assert info.value.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
    # a row's own properties and the columns count together; a name in both counts once (the column's value wins)
    own = [{f"p{i}": "v" for i in range(MAX_PROPERTY_COUNT - 1)}, {f"p{i}": "v" for i in range(MAX_PROPERTY_COUNT)}]
    columns = {"c": ["1", "2"], "p0": ["x", "y"]}
    with pytest.raises(oms.OMSMessageFormatException, match=f"row 1: message has {MAX_PROPERTY_COUNT + 1} user"):
        plain_column_runs("T", [b"x", b"y"], None, None, own, property_columns=columns, **limits)
    [run] = plain_column_runs(
        "T", [b"x"], None, None, own[:1], property_columns={"c": ["1"], "p0": ["x"]}, **limits
    ) or [None]
    assert run is not None and decode_properties(run.raw_properties[0])["p0"] == "x"


def test_a_batch_of_two_topics_without_tags_or_keys_is_split_per_topic() -> None:
    # no message carries a tag or keys: no pass reads them, and each topic's run still has its rows, in order
    batch = [oms.BytesMessage(f"m{i}".encode(), "A" if i % 3 else "B") for i in range(9)]
    runs = plain_message_runs(batch, born_host="h", max_message_size=1 << 20, compress_over=4096)
    assert runs is not None
    assert {r.topic: list(r.positions) for r in runs} == {"B": [0, 3, 6], "A": [1, 2, 4, 5, 7, 8]}
    for run in runs:
        assert [w.body for w in run] == [batch[p].body for p in run.positions]
        assert all((w.batch_properties or {}).keys() == {"UNIQ_KEY"} for w in run)
        assert [batch[p].message_id for p in run.positions] == run.ids
