"""The oms pull consumer against a real broker: receive/ack/nack, and the queue-level API a stream processor
drives (queues, pull at offsets with PullBatch, commit/committed, offsets by time, long polling)."""

from __future__ import annotations

import asyncio
import os
import threading
import time

import pytest

import oms
from orbitmq.errors import Code
from tests.oms.helpers import create_topic


@pytest.fixture
def pull_consumer(access_point):
    with access_point.create_pull_consumer(consumer_id="GPullQueues", operation_timeout=5000) as pc:
        yield pc


@pytest.mark.timeout(60)
def test_receive_ack_by_message_handle_or_id_and_nack(access_point, producer):
    big = os.urandom(2000) * 4  # compressible, > 4 KiB: travels zlib-compressed with body_encoding GZIP
    bodies = [b"r0", b"r1", b"r2", b"r3", big]
    for body in bodies:
        producer.send(oms.BytesMessage(body, "OmsPullRecv"))
    with access_point.create_pull_consumer(consumer_id="GPullRecv", consume_from_where="first") as pc:
        pc.attach_queue("OmsPullRecv")
        got = [pc.receive(5) for _ in range(5)]
        assert all(m is not None for m in got)
        received = {m.body: m for m in got if m is not None}
        assert sorted(received) == sorted(bodies), "a compressed body comes back as sent"
        assert all(m.receipt_handle and m.reconsume_times == 0 for m in received.values())
        pc.ack(received[b"r0"])
        pc.ack(received[b"r1"].receipt_handle or "")
        pc.ack(received[b"r2"].message_id or "")  # RocketMQ's OMS acked by message id
        pc.ack(received[big])
        pc.nack(received[b"r3"])  # back at once, one more delivery counted
        again = pc.receive(5)
        assert again is not None and again.body == b"r3" and again.reconsume_times == 1
        pc.ack(again)
        assert pc.receive({"TIMEOUT": 300}) is None
        with pytest.raises(oms.OMSRuntimeException) as info:
            pc.ack(received[b"r0"])
        assert info.value.code == Code.INVALID_RECEIPT_HANDLE
        producer.send_batch([oms.BytesMessage(f"i{i}", "OmsPullRecv") for i in range(3)])
        drained = list(pc.iter(timeout=1.0))
        assert sorted(m.get_body(str) for m in drained) == ["i0", "i1", "i2"]
        for m in drained:
            pc.ack(m)


@pytest.mark.timeout(60)
def test_holds_past_their_invisible_time_are_forgotten_at_the_next_receive(access_point, producer):
    """The consumer's ledger of received messages (where to ack) does not grow with handles the broker gave up on:
    a receive forgets those past their invisible time (here a nack's, due at once), and leaves the others."""
    for body in (b"h0", b"h1"):
        producer.send(oms.BytesMessage(body, "OmsPullHold"))
    with access_point.create_pull_consumer(consumer_id="GPullHold", consume_from_where="first") as pc:
        pc.attach_queue("OmsPullHold")
        got = {m.body: m for m in (pc.receive(5), pc.receive(5)) if m is not None}
        assert sorted(got) == [b"h0", b"h1"]
        pc.nack(got[b"h0"])  # visible again at once: its new handle's invisible time is over
        nacked = pc._by_id[got[b"h0"].message_id or ""]
        assert nacked in pc._held
        again = pc.receive(5)
        assert again is not None and again.body == b"h0" and again.reconsume_times == 1
        assert nacked not in pc._held  # forgotten by the receive after its invisible time
        assert again.receipt_handle in pc._held and got[b"h1"].receipt_handle in pc._held  # the live ones stay
        pc.ack(again)
        pc.ack(got[b"h1"])
        assert not pc._held


@pytest.mark.timeout(60)
def test_queue_level_pull_commit_and_offsets(producer, pull_consumer):
    topic = "OmsPullQueues"
    before = int(time.time() * 1000) - 1
    big = os.urandom(1500) * 4
    for i in range(40):  # one by one: the broker spreads single sends over the queues
        producer.send(oms.BytesMessage(f"q{i}", topic, tags="TagA" if i % 2 else "TagB"))
    producer.send(oms.BytesMessage(big, topic, tags="Big"))
    pc = pull_consumer
    queues = pc.queues(topic)
    assert [q.queue_id for q in queues] == [0, 1, 2, 3] and {q.broker_name for q in queues} == {"broker-1"}
    seen: list[bytes] = []
    for q in queues:
        latest = pc.latest_offset(q)
        assert pc.earliest_offset(q) == 0 and latest > 0
        everything = pc.pull(q, 0, 100)
        assert everything.status is oms.PullStatus.FOUND and everything.next_offset == latest
        assert [m.queue_offset for m in everything] == list(range(latest))
        assert all(m.queue_id == q.queue_id and m.destination == topic for m in everything)
        seen.extend(m.body for m in everything)
        middle = pc.pull(q, 2, 3)
        assert [m.queue_offset for m in middle] == [2, 3, 4] and middle.next_offset == 5
        tagged = pc.pull(q, 0, 100, expression="TagA")
        assert all(m.tags == "TagA" for m in tagged) and tagged.next_offset == latest
        table = pc.pull_columns(q, 0, 100, properties=True)
        assert table.columns is not None and len(table) == latest and not table.messages
        assert table.columns.queue_offsets == list(range(latest))
        assert table.columns.bodies == [m.body for m in everything]
        assert table.columns.message_ids == [m.message_id for m in everything]
        assert table.columns.tags == [m.tags for m in everything]
        assert table.columns.properties == [dict(m.user_headers()) for m in everything]
        tagged_table = pc.pull_columns(q, 0, 100, expression="TagA")
        assert tagged_table.columns is not None and tagged_table.columns.properties is None
        assert tagged_table.columns.message_ids == [m.message_id for m in tagged]
        at_end = pc.pull_columns(q, latest, 10)
        assert at_end.status is oms.PullStatus.NO_NEW_MSG and at_end.columns is not None and not len(at_end)
        assert pc.pull(q, latest, 10).status is oms.PullStatus.NO_NEW_MSG
        illegal = pc.pull(q, latest + 5, 10)
        assert illegal.status is oms.PullStatus.OFFSET_ILLEGAL and illegal.next_offset == latest
        assert pc.offset_for_time(q, before) == 0
        assert pc.offset_for_time(q, int(time.time() * 1000) + 3_600_000) == latest
    assert sorted(seen) == sorted([f"q{i}".encode() for i in range(40)] + [big])
    q0, q1 = queues[0], queues[1]
    assert pc.committed(q0) is None
    pc.commit(q0, 3)
    assert pc.committed(q0) == 3 and pc.committed(q1) is None


@pytest.mark.timeout(30)
def test_pull_long_polls_at_the_end_of_a_queue(producer, pull_consumer):
    topic = "OmsPullLongPoll"
    producer.send(oms.BytesMessage(b"first", topic))
    pc = pull_consumer
    queues = pc.queues(topic)
    ends = {q: pc.latest_offset(q) for q in queues}
    started = time.monotonic()
    empty = pc.pull(queues[0], ends[queues[0]], 10, timeout=0.5)
    assert empty.status is oms.PullStatus.NO_NEW_MSG and 0.4 < time.monotonic() - started < 3

    def later() -> None:
        time.sleep(0.3)
        for i in range(len(queues)):  # one per queue
            producer.send(oms.BytesMessage(f"late{i}", topic))

    sender = threading.Thread(target=later)
    sender.start()
    started = time.monotonic()
    result = pc.pull(queues[0], ends[queues[0]], 10, timeout=5)
    sender.join(10)
    assert result.status is oms.PullStatus.FOUND and time.monotonic() - started < 4
    assert result.messages[0].get_body(str).startswith("late")


@pytest.mark.timeout(30)
def test_pull_consumer_errors_and_lifecycle(access_point):
    pc = access_point.create_pull_consumer(consumer_id="GPullLife")
    with pytest.raises(oms.OMSIllegalStateException):
        pc.queues("OmsPullLife")
    with pc:
        with pytest.raises(oms.OMSRuntimeException, match="no topic attached"):
            pc.receive(0)
        with pytest.raises(oms.OMSResourceNotExistException):
            pc.pull(oms.MessageQueue("OmsPullLife", "no-such-broker", 0), 0)
    assert not pc.is_running
    with pytest.raises(oms.OMSMessageFormatException):
        access_point.create_pull_consumer()  # a consumer needs a group


@pytest.mark.timeout(60)
def test_asyncio_face_of_the_pull_consumer(access_point, producer):
    for i in range(3):
        producer.send(oms.BytesMessage(f"a{i}", "OmsPullAio"))

    async def main(pc: oms.PullConsumer) -> tuple[list[str], int, int]:
        aio = pc.aio()
        got = []
        async for message in aio:
            got.append(message.get_body(str))
            await aio.ack(message)
            if len(got) == 3:
                break
        assert await aio.receive(0.2) is None
        queues = await aio.queues("OmsPullAio")
        total = 0
        for q in queues:
            result = await aio.pull(q, await aio.earliest_offset(q), 32)
            total += len(result)
            await aio.commit(q, result.next_offset)
            assert await aio.committed(q) == await aio.latest_offset(q) == result.next_offset
        return sorted(got), total, await aio.offset_for_time(queues[0], 0)

    with access_point.create_pull_consumer(consumer_id="GPullAio", consume_from_where="first") as pc:
        pc.attach_queue("OmsPullAio")
        bodies, total, first = asyncio.run(main(pc))
    assert bodies == ["a0", "a1", "a2"] and total == 3 and first == 0


@pytest.mark.timeout(60)
def test_a_receive_with_no_readable_queue_waits_its_timeout(access_point, shared_broker):
    """A topic whose queues are all write-only (perm 2) has nothing to long-poll: a receive still takes its timeout
    and returns nothing, so a caller's receive loop (a Celery worker's fetcher) waits instead of spinning."""
    create_topic(shared_broker.addr, "OmsPullWriteOnly", perm=2)
    with access_point.create_pull_consumer(consumer_id="GPullWriteOnly") as pc:
        pc.attach_queue("OmsPullWriteOnly")
        started = time.monotonic()
        assert pc.receive(1.0) is None
        assert time.monotonic() - started >= 0.9, "the receive returned at once: nothing waited"
