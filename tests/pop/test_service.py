"""PopService against a real store: receive/ack/nack/redelivery, filters, FIFO, DLQ, long polling, restarts."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from broker.pop.receipt import decode
from broker.pop.service import PopService
from orbitmq import message_const as mc
from orbitmq.errors import Code
from tests.pop.harness import (
    FAST_POP,
    Core,
    GrpcContextStub,
    ack_request,
    change_request,
    receive,
    receive_request,
)

G, T = "cg", "TopicA"


def run(tmp_path: Path, body: Callable[[Core], Awaitable[None]], **kw) -> None:
    async def main() -> None:
        core = await Core(tmp_path, **kw).start()
        try:
            await body(core)
        finally:
            await core.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def bodies(messages) -> list[bytes]:
    return [m.body for m in messages]


def test_receive_ack_nack_redelivery_and_offsets(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T, queues=2)
        for i in range(4):
            core.put(T, f"m{i}".encode(), queue_id=i % 2)
        st, msgs, _ = await receive(core, receive_request(G, T, batch=3))
        assert st.code == Code.OK and len(msgs) == 3
        assert all(m.system_properties.delivery_attempt == 1 for m in msgs)
        assert all(m.system_properties.message_id.startswith("ID-") for m in msgs)
        st, rest, _ = await receive(core, receive_request(G, T, batch=3))
        assert len(rest) == 1 and set(bodies(msgs + rest)) == {b"m0", b"m1", b"m2", b"m3"}
        st, none, _ = await receive(core, receive_request(G, T))
        assert st.code == Code.MESSAGE_NOT_FOUND and not none
        # ack two, nack one with 0 s, leave one invisible
        everything = msgs + rest
        resp = await core.receiver.ack(ack_request(G, T, *(m.system_properties.receipt_handle for m in everything[:2])))
        assert resp.status.code == Code.OK and all(e.status.code == Code.OK for e in resp.entries)
        nacked = everything[2]
        ch = await core.receiver.change_invisible_duration(
            change_request(G, T, nacked.system_properties.receipt_handle, 0)
        )
        assert ch.status.code == Code.OK and ch.receipt_handle != nacked.system_properties.receipt_handle
        st, again, _ = await receive(core, receive_request(G, T))
        assert bodies(again) == [nacked.body] and again[0].system_properties.delivery_attempt == 2
        # the handle from before the nack and the one from the nack are both stale now
        resp = await core.receiver.ack(ack_request(G, T, nacked.system_properties.receipt_handle, ch.receipt_handle))
        assert resp.status.code == Code.INVALID_RECEIPT_HANDLE
        resp = await core.receiver.ack(ack_request(G, T, again[0].system_properties.receipt_handle))
        assert resp.status.code == Code.OK
        # acked twice: the second is refused
        resp = await core.receiver.ack(ack_request(G, T, again[0].system_properties.receipt_handle))
        assert resp.status.code == Code.INVALID_RECEIPT_HANDLE and "not in flight" in resp.entries[0].status.message
        # consumer offsets: lowest not-acked offset per queue
        left = everything[3]
        h = decode(left.system_properties.receipt_handle)
        offsets = core.ctx.offsets.offsets_of(G, T)
        assert offsets[h.queue_id] == h.queue_offset and offsets[1 - h.queue_id] == 2

    run(tmp_path, body)


def test_invisible_message_reappears_after_its_time(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T)
        core.put(T, b"x")
        _, _first, _ = await receive(core, receive_request(G, T, invisible_ms=300))
        started = time.monotonic()
        _st, second, _ = await receive(core, receive_request(G, T, polling_s=3))
        assert bodies(second) == [b"x"] and second[0].system_properties.delivery_attempt == 2
        assert 0.15 < time.monotonic() - started < 2.0  # woke at visibility, not at the end of polling

    run(tmp_path, body)


def test_tag_filter_and_filtered_offsets_count_as_consumed(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T)
        for i, tag in enumerate(["A", "B", "C", "A"]):
            core.put(T, f"m{i}".encode(), tag=tag)
        _, msgs, _ = await receive(core, receive_request(G, T, tag="A || C"))
        assert bodies(msgs) == [b"m0", b"m2", b"m3"] and msgs[0].system_properties.tag == "A"
        await core.receiver.ack(ack_request(G, T, *(m.system_properties.receipt_handle for m in msgs)))
        assert core.ctx.offsets.query_offset(G, T, 0) == 4

    run(tmp_path, body)


def test_errors_are_statuses_in_a_well_formed_stream(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T)
        st, _, _ = await receive(core, receive_request(G, T, invisible_ms=50))
        assert st.code == Code.ILLEGAL_INVISIBLE_TIME and "invisible_duration" in st.message
        st, _, _ = await receive(core, receive_request(G, T), GrpcContextStub(timeout_s=0.5))
        assert st.code == Code.ILLEGAL_POLLING_TIME
        st, _, _ = await receive(core, receive_request(G, "NoSuchTopic"))
        assert st.code == Code.TOPIC_NOT_FOUND
        st, _, _ = await receive(core, receive_request(G, T, tag="a ||"))
        assert st.code == Code.OK or st.code == Code.MESSAGE_NOT_FOUND  # "a ||" is the tag list {a}
        sql = receive_request(G, T)
        sql.filter_expression.type = 2  # SQL92
        sql.filter_expression.expression = "a >"
        st, _, _ = await receive(core, sql)
        assert st.code == Code.ILLEGAL_FILTER_EXPRESSION and "position" in st.message
        sql.filter_expression.expression = "a > 1"
        st, _, _ = await receive(core, sql)
        assert st.code == Code.MESSAGE_NOT_FOUND  # a valid SQL92 subscription, nothing stored yet
        # push consumers: auto_renew and no duration is fine (P19)
        core.put(T, b"p")
        st, msgs, _ = await receive(core, receive_request(G, T, invisible_ms=None, auto_renew=True))
        assert st.code == Code.OK and msgs[0].system_properties.invisible_duration.seconds == 60
        # garbage and foreign handles: per-entry INVALID_RECEIPT_HANDLE, mixed → MULTIPLE_RESULTS
        good = msgs[0].system_properties.receipt_handle
        resp = await core.receiver.ack(ack_request(G, T, "garbage", good))
        assert resp.status.code == Code.MULTIPLE_RESULTS
        assert [e.status.code for e in resp.entries] == [Code.INVALID_RECEIPT_HANDLE, Code.OK]
        resp = await core.receiver.ack(ack_request("other", T, good))
        assert resp.status.code == Code.INVALID_RECEIPT_HANDLE
        ch = await core.receiver.change_invisible_duration(change_request(G, T, "OMQ1.AAAA", 1000))
        assert ch.status.code == Code.INVALID_RECEIPT_HANDLE and ch.receipt_handle == "OMQ1.AAAA"

    run(tmp_path, body)


def test_long_polling_wakes_on_arrival(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T, queues=2)
        timer = threading.Timer(0.3, core.put, args=(T, b"late"), kwargs={"queue_id": 1})
        started = time.monotonic()
        timer.start()
        st, msgs, _ = await receive(core, receive_request(G, T, polling_s=5))
        assert bodies(msgs) == [b"late"] and time.monotonic() - started < 2.5
        started = time.monotonic()
        st, msgs, _ = await receive(core, receive_request(G, T, polling_s=0.4))
        assert st.code == Code.MESSAGE_NOT_FOUND and 0.3 < time.monotonic() - started < 2.0
        # the stream ends before the client's deadline even when polling asks for more (P11)
        started = time.monotonic()
        st, msgs, _ = await receive(core, receive_request(G, T, polling_s=20), GrpcContextStub(timeout_s=1.5))
        assert st.code == Code.MESSAGE_NOT_FOUND and time.monotonic() - started < 1.4

    run(tmp_path, body)


def test_parked_receive_ends_at_shutdown_without_blocking_the_loop(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T, queues=2)
        loop = asyncio.get_running_loop()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        started = time.monotonic()
        parked = asyncio.create_task(receive(core, receive_request(G, T, polling_s=10)))
        await asyncio.sleep(0.2)
        loop.call_soon(core.ctx.long_polling.wake_all)  # what the broker does first when it stops
        await asyncio.sleep(0.3)
        before = ticks
        await asyncio.sleep(0.3)
        st, msgs, _ = await asyncio.wait_for(parked, 2)
        task.cancel()
        assert st.code == Code.MESSAGE_NOT_FOUND and not msgs
        assert time.monotonic() - started < 2.0  # not the 10 s poll
        assert ticks - before >= 5  # the loop kept running (no synchronous re-poll spin)

    run(tmp_path, body)


def test_max_attempts_moves_message_to_dlq(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T)
        core.group(G, retry_max_times=1)  # max attempts 2
        core.put(T, b"poison", tag="TagX")
        for attempt in (1, 2):
            _, msgs, _ = await receive(core, receive_request(G, T))
            assert msgs[0].system_properties.delivery_attempt == attempt
            await core.receiver.change_invisible_duration(
                change_request(G, T, msgs[0].system_properties.receipt_handle, 0)
            )
        st, msgs, _ = await receive(core, receive_request(G, T))
        assert st.code == Code.MESSAGE_NOT_FOUND
        assert core.ctx.offsets.query_offset(G, T, 0) == 1  # acked by the move
        dlq = core.store.get_message("x", f"%DLQ%{G}", 0, 0, 10)
        [dead] = dlq.messages
        assert dead.body == b"poison" and dead.tags == "TagX" and dead.unique_id == "ID-poison"
        assert dead.properties[mc.PROPERTY_RETRY_TOPIC] == T
        assert dead.properties[mc.PROPERTY_DLQ_ORIGIN_MESSAGE_ID] == "ID-poison"
        assert dead.properties[mc.PROPERTY_RECONSUME_TIME] == "2" and dead.reconsume_times == 2
        assert core.ctx.topics.get(f"%DLQ%{G}") is not None
        stats = core.pop.stats.snapshot()
        assert stats["dead_lettered"] == 1 and stats["delivered"] == 2 and stats["redelivered"] == 1
        assert stats["nacked"] == 2 and stats["acked"] == 0

    run(tmp_path, body)


def test_forward_to_dlq_on_request(tmp_path):
    async def body(core: Core) -> None:
        from rocketmq.grpc_protocol import definition_pb2, service_pb2

        core.topic(T)
        core.put(T, b"f")
        _, msgs, _ = await receive(core, receive_request(G, T))
        req = service_pb2.ForwardMessageToDeadLetterQueueRequest(
            group=definition_pb2.Resource(name=G),
            topic=definition_pb2.Resource(name=T),
            receipt_handle=msgs[0].system_properties.receipt_handle,
            message_id=msgs[0].system_properties.message_id,
            delivery_attempt=1,
            max_delivery_attempts=3,
        )
        resp = await core.receiver.forward_to_dlq(req)
        assert resp.status.code == Code.OK
        assert [m.body for m in core.store.get_message("x", f"%DLQ%{G}", 0, 0, 10).messages] == [b"f"]
        st, _, _ = await receive(core, receive_request(G, T, invisible_ms=100))
        assert st.code == Code.MESSAGE_NOT_FOUND

    run(tmp_path, body)


def test_fifo_group_holds_later_messages_of_an_in_flight_group(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T)
        core.group(G, orderly=True)
        core.put(T, b"a1", msg_group="A")
        core.put(T, b"b1", msg_group="B")
        core.put(T, b"a2", msg_group="A")
        _, first, _ = await receive(core, receive_request(G, T, batch=2, queue_id=0))
        assert bodies(first) == [b"a1", b"b1"]
        st, _blocked, _ = await receive(core, receive_request(G, T, queue_id=0))
        assert st.code == Code.MESSAGE_NOT_FOUND  # a2 waits for a1
        # nack a1: it comes back first (attempt 2), still before a2
        await core.receiver.change_invisible_duration(
            change_request(G, T, first[0].system_properties.receipt_handle, 0)
        )
        _, again, _ = await receive(core, receive_request(G, T, batch=1, queue_id=0))
        assert bodies(again) == [b"a1"] and again[0].system_properties.delivery_attempt == 2
        await core.receiver.ack(ack_request(G, T, again[0].system_properties.receipt_handle))
        _, nxt, _ = await receive(core, receive_request(G, T, queue_id=0))
        assert bodies(nxt) == [b"a2"]

    run(tmp_path, body)


def test_auto_renew_keeps_message_invisible_and_release_on_client_exit(tmp_path):
    async def body(core: Core) -> None:
        core.pop.config.defaultInvisibleTimeMills = 400
        core.topic(T)
        core.put(T, b"r")
        core.ctx.telemetry.touch("push-1", group=G)
        _, msgs, _ = await receive(
            core, receive_request(G, T, invisible_ms=None, auto_renew=True), GrpcContextStub(client_id="push-1")
        )
        await asyncio.sleep(1.0)  # > 2 invisible periods: renewed in the background
        st, _, _ = await receive(core, receive_request(G, T))
        assert st.code == Code.MESSAGE_NOT_FOUND
        resp = await core.receiver.ack(ack_request(G, T, msgs[0].system_properties.receipt_handle))
        assert resp.status.code == Code.OK  # renewal does not change the client's handle
        core.put(T, b"s")
        _, msgs, _ = await receive(
            core, receive_request(G, T, invisible_ms=None, auto_renew=True), GrpcContextStub(client_id="push-1")
        )
        core.ctx.telemetry.remove("push-1")  # NotifyClientTermination
        _, back, _ = await receive(core, receive_request(G, T))
        assert bodies(back) == [b"s"]

    run(tmp_path, body)


def test_state_survives_clean_restart_and_kill(tmp_path):
    async def phase1(core: Core) -> None:
        core.topic(T)
        for i in range(3):
            core.put(T, f"m{i}".encode())
        _, msgs, _ = await receive(core, receive_request(G, T, invisible_ms=600))
        await core.receiver.ack(ack_request(G, T, msgs[1].system_properties.receipt_handle))

    async def phase2(core: Core) -> None:
        st, msgs, _ = await receive(core, receive_request(G, T))
        assert st.code == Code.MESSAGE_NOT_FOUND  # still invisible after the restart
        await asyncio.sleep(0.7)
        _, msgs, _ = await receive(core, receive_request(G, T, invisible_ms=600))
        assert bodies(msgs) == [b"m0", b"m2"] and all(m.system_properties.delivery_attempt == 2 for m in msgs)
        await core.receiver.ack(ack_request(G, T, msgs[0].system_properties.receipt_handle))

    async def main() -> None:
        core = await Core(tmp_path).start()
        await phase1(core)
        await core.stop(clean=True)
        core = await Core(tmp_path).start()
        await phase2(core)
        await core.stop(clean=False)  # no compaction: recovery must replay the journal
        core = await Core(tmp_path).start()
        await asyncio.sleep(0.7)
        _, msgs, _ = await receive(core, receive_request(G, T))
        assert bodies(msgs) == [b"m2"] and msgs[0].system_properties.delivery_attempt == 3
        assert core.pop.journal.records_replayed > 0
        await core.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_shutdown_after_a_start_that_never_recovered_keeps_the_state_on_disk(tmp_path):
    """A broker whose start fails before the pop state is recovered (a port taken, say) still shuts down: that must
    neither write the empty state over the one on disk nor raise (which hid the start's own error)."""

    async def main() -> None:
        core = await Core(tmp_path).start()
        core.topic(T)
        core.put(T, b"m0")
        _, msgs, _ = await receive(core, receive_request(G, T, invisible_ms=60_000))
        assert bodies(msgs) == [b"m0"]
        await core.stop(clean=True)
        on_disk = {p.name: p.read_bytes() for p in (tmp_path / "pop").iterdir()}
        await PopService(core.ctx, FAST_POP).shutdown()  # never started
        assert {p.name: p.read_bytes() for p in (tmp_path / "pop").iterdir()} == on_disk
        core = await Core(tmp_path).start()
        st, _, _ = await receive(core, receive_request(G, T))
        assert st.code == Code.MESSAGE_NOT_FOUND, "m0 is still in flight after the restart"
        await core.stop()

    asyncio.run(asyncio.wait_for(main(), 60))


def test_recreated_topic_restarts_the_queue(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T)
        for i in range(3):
            core.put(T, f"old{i}".encode())
        _, msgs, _ = await receive(core, receive_request(G, T))
        await core.receiver.ack(ack_request(G, T, *(m.system_properties.receipt_handle for m in msgs)))
        core.store.delete_topics([T])
        core.put(T, b"new0")
        _, msgs, _ = await receive(core, receive_request(G, T))
        if not msgs:  # the first receive notices the reset queue
            _, msgs, _ = await receive(core, receive_request(G, T))
        assert bodies(msgs) == [b"new0"]

    run(tmp_path, body)


def test_nack_wakes_a_parked_receive(tmp_path):
    """A push consumer long-polls while it processes; its nack must not wait for that poll to time out."""

    async def body(core: Core) -> None:
        core.topic(T)
        core.put(T, b"n")
        _, msgs, _ = await receive(core, receive_request(G, T, invisible_ms=None, auto_renew=True))
        parked = asyncio.create_task(receive(core, receive_request(G, T, polling_s=10)))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        ch = await core.receiver.change_invisible_duration(
            change_request(G, T, msgs[0].system_properties.receipt_handle, 200)
        )
        assert ch.status.code == Code.OK
        _, again, _ = await parked
        assert bodies(again) == [b"n"] and again[0].system_properties.delivery_attempt == 2
        assert time.monotonic() - started < 2.0

    run(tmp_path, body)


def test_external_offset_reset_moves_the_pop_position(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T)
        for i in range(5):
            core.put(T, f"m{i}".encode())
        _, msgs, _ = await receive(core, receive_request(G, T, batch=2))
        assert bodies(msgs) == [b"m0", b"m1"]
        core.ctx.offsets.commit_offset(G, T, 0, 4)  # e.g. UpdateOffset from an admin tool
        _, msgs, _ = await receive(core, receive_request(G, T))
        assert bodies(msgs) == [b"m4"]
        core.ctx.offsets.commit_offset(G, T, 0, 0)  # rewind
        _, msgs, _ = await receive(core, receive_request(G, T))
        assert bodies(msgs) == [b"m0", b"m1", b"m2", b"m3", b"m4"]

    run(tmp_path, body)


def test_fifo_parked_receive_wakes_on_ack_without_spinning(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T)
        core.group(G, orderly=True)
        core.put(T, b"a1", msg_group="A")
        core.put(T, b"a2", msg_group="A")
        _, first, _ = await receive(core, receive_request(G, T, batch=1, queue_id=0))
        assert bodies(first) == [b"a1"]
        pops_before = core.pop.stats.delivered
        parked = asyncio.create_task(receive(core, receive_request(G, T, polling_s=10, queue_id=0)))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        await core.receiver.ack(ack_request(G, T, first[0].system_properties.receipt_handle))
        _, nxt, _ = await parked
        assert bodies(nxt) == [b"a2"] and time.monotonic() - started < 1.0
        assert core.pop.stats.delivered == pops_before + 1

    run(tmp_path, body)


def test_interrupted_receive_releases_its_messages(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T)
        core.put(T, b"lost-in-transit")
        ctx = GrpcContextStub(ends_after_writes=1)  # the call is cancelled before the message goes out
        with pytest.raises(asyncio.CancelledError):
            await core.receiver.receive(receive_request(G, T, invisible_ms=None, auto_renew=True), ctx)
        assert [r.status.code for r in ctx.written] == [Code.OK]
        _, again, _ = await receive(core, receive_request(G, T))
        assert bodies(again) == [b"lost-in-transit"]

    run(tmp_path, body)


def test_a_receive_that_cannot_build_its_answer_releases_its_messages(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("conversion bug")

    async def body(core: Core) -> None:
        core.topic(T)
        core.put(T, b"kept")
        with monkeypatch.context() as m:
            m.setattr("broker.grpc.receive.to_v2_message", broken)
            status, got, responses = await receive(core, receive_request(G, T, invisible_ms=None, auto_renew=True))
        assert status.code == Code.INTERNAL_SERVER_ERROR and "conversion bug" in status.message and got == []
        assert responses[-1].HasField("delivery_timestamp")
        _, again, _ = await receive(core, receive_request(G, T))
        assert bodies(again) == [b"kept"]

    run(tmp_path, body)


def test_unknown_client_is_trusted_only_during_the_startup_grace(tmp_path):
    async def body(core: Core) -> None:
        core.pop.config.defaultInvisibleTimeMills = 1000
        core.topic(T)
        core.put(T, b"g")
        ctx = GrpcContextStub(client_id="ghost")  # never registered with the TelemetryHub
        _, [_msg], _ = await receive(core, receive_request(G, T, invisible_ms=None, auto_renew=True), ctx)
        key = (G, T, 0)
        flight = core.pop.state.queues[key].inflight[0]
        core.pop.config.popClientGraceMs = 60_000
        core.pop.renew(flight.visible_at_ms - 100)
        assert flight.auto_renew  # renewed: still inside the grace period
        core.pop.config.popClientGraceMs = 0
        core.pop.renew(flight.visible_at_ms - 100)
        assert not flight.auto_renew  # no such client: let it come back

    run(tmp_path, body)


def test_retried_receive_with_same_attempt_id_gets_the_same_messages(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T)
        core.put(T, b"once")
        req = receive_request(G, T, invisible_ms=None, auto_renew=True)
        req.attempt_id = "attempt-1"
        _, first, _ = await receive(core, req)
        _, retried, _ = await receive(core, req)  # the client saw an error and retries with the same id
        assert bodies(retried) == [b"once"]
        assert retried[0].system_properties.receipt_handle == first[0].system_properties.receipt_handle
        fresh = receive_request(G, T, invisible_ms=None, auto_renew=True)
        fresh.attempt_id = "attempt-2"
        st, _, _ = await receive(core, fresh)
        assert st.code == Code.MESSAGE_NOT_FOUND
        await core.receiver.ack(ack_request(G, T, first[0].system_properties.receipt_handle))
        st, _, _ = await receive(core, req)  # acked since: nothing to replay
        assert st.code == Code.MESSAGE_NOT_FOUND

    run(tmp_path, body)


def test_a_popped_record_gone_from_the_commitlog_is_dropped_not_redelivered(tmp_path, monkeypatch):
    """Retention can delete a segment between the ConsumeQueue read and the answer: that message is acked (it can
    never be delivered; released, it would be popped again and again) and the others are answered."""

    async def body(core: Core) -> None:
        core.topic(T, queues=1)
        for i in range(3):
            core.put(T, f"g{i}".encode(), queue_id=0)
        real = core.store.look_message_by_offset
        gone: set[int] = set()

        def reading(offset, size=None, queue_offset=None):  # type: ignore[no-untyped-def]
            return None if offset in gone else real(offset, size, queue_offset)

        first = core.store.get_message_spans(G, T, 0, 0, 3).spans
        gone.add(first[1][1])  # the second record's commitlog offset
        monkeypatch.setattr(core.store, "look_message_by_offset", reading)
        st, msgs, _ = await receive(core, receive_request(G, T, batch=3, invisible_ms=10_000))
        assert st.code == Code.OK and bodies(msgs) == [b"g0", b"g2"]
        qs = core.pop.state.queue((G, T, 0))
        assert qs is not None and 1 not in qs.inflight  # acked, not in flight
        monkeypatch.setattr(core.store, "look_message_by_offset", real)
        await core.receiver.ack(ack_request(G, T, *(m.system_properties.receipt_handle for m in msgs)))
        st, again, _ = await receive(core, receive_request(G, T))
        assert st.code == Code.MESSAGE_NOT_FOUND and not again  # nothing comes back, the gone one included

    run(tmp_path, body)


def test_fifo_receive_pops_every_queue_whatever_queue_the_request_names(tmp_path):
    async def body(core: Core) -> None:
        core.topic(T, queues=8)
        core.group(G, orderly=True)
        core.put(T, b"a1", queue_id=5, msg_group="A")
        core.put(T, b"b1", queue_id=2, msg_group="B")
        core.put(T, b"a2", queue_id=5, msg_group="A")
        # the Node.js client always names queue 0; the Python one a route queue in turn
        _, first, _ = await receive(core, receive_request(G, T, batch=8, queue_id=0))
        got = bodies(first)
        assert sorted(got) == [b"a1", b"a2", b"b1"] and got.index(b"a1") < got.index(b"a2")
        st, _, _ = await receive(core, receive_request(G, T, queue_id=3))
        assert st.code == Code.MESSAGE_NOT_FOUND
        core.put(T, b"a3", queue_id=5, msg_group="A")
        st, _, _ = await receive(core, receive_request(G, T, queue_id=6))
        assert st.code == Code.MESSAGE_NOT_FOUND  # group A is in flight: another receiver waits for its acks
        for m in first:
            if m.body.startswith(b"a"):
                await core.receiver.ack(ack_request(G, T, m.system_properties.receipt_handle))
        _, nxt, _ = await receive(core, receive_request(G, T, queue_id=7))
        assert bodies(nxt) == [b"a3"]

    run(tmp_path, body)


def test_ack_of_one_queue_with_one_stale_handle_acks_the_others(tmp_path):
    """Well-formed handles of one queue take the column check; one stale (its invisible time changed since) or
    repeated among them sends the lot through the one-by-one checks: only that one is refused, the rest acked."""

    async def body(core: Core) -> None:
        core.topic(T, queues=1)
        for i in range(6):
            core.put(T, f"s{i}".encode(), queue_id=0)
        st, msgs, _ = await receive(core, receive_request(G, T, batch=6))
        assert st.code == Code.OK and len(msgs) == 6
        handles = [m.system_properties.receipt_handle for m in msgs]
        changed = await core.receiver.change_invisible_duration(change_request(G, T, handles[2], 60_000))
        assert changed.status.code == Code.OK
        failures = core.pop.ack_handles(G, T, handles[:4])
        assert list(failures) == [2] and "expired" in failures[2].message
        assert sorted(core.pop.state.queues[(G, T, 0)].inflight) == [2, 4, 5]
        failures = core.pop.ack_handles(G, T, [handles[4], changed.receipt_handle, handles[4]])
        assert list(failures) == [2] and "twice" in failures[2].message
        assert core.pop.ack_handles(G, T, [handles[5]]) == {}
        assert not core.pop.state.queues[(G, T, 0)].inflight
        assert core.ctx.offsets.offsets_of(G, T)[0] == 6

    run(tmp_path, body)
