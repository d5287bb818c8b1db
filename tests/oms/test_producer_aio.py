"""The asyncio producer (``Producer.aio()``, ``create_async_producer``) against a real broker process: sends,
batches, one-way, ordered sends, hooks, errors and lifecycle, each checked by reading the broker back."""

from __future__ import annotations

import asyncio
import collections

import pytest

import oms
from tests.oms.helpers import bodies, create_topic, pull_all
from tests.waiting import wait_until


def run(coro, timeout: float = 30):
    """Every test body runs in a fresh event loop, bounded by ``timeout``."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


@pytest.mark.timeout(60)
def test_send_batch_and_oneway_are_stored(shared_broker, access_point):
    async def main() -> tuple[oms.SendResult, list[oms.SendResult]]:
        async with access_point.create_async_producer(operation_timeout=10_000) as p:
            assert p.is_running
            msg = oms.BytesMessage(b"aio-one", "OmsAio", tags="TagA", keys=["k-1"], user_headers={"c": "red"})
            one = await p.send(msg)
            assert one.message_id == msg.message_id
            batch = await p.send_batch(oms.BytesMessage(f"aio-b{i}", "OmsAio") for i in range(50))
            # the caller's loop keeps running while sends are in flight
            ticks = 0

            async def ticker() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            task = asyncio.create_task(ticker())
            await asyncio.gather(*(p.send(oms.BytesMessage(f"aio-c{i}", "OmsAio")) for i in range(20)))
            task.cancel()
            assert ticks > 20, "the loop ran other tasks while the sends waited for the broker"
            await p.send_oneway(oms.BytesMessage(b"aio-oneway", "OmsAio"))
        assert not p.is_running
        return one, batch

    one, batch = run(main())
    assert one.ok and one.topic == "OmsAio" and one.queue.broker_name == "broker-1"
    assert len(batch) == 50 and all(r.ok for r in batch)
    assert len({r.message_id for r in batch}) == 50
    # shutdown waited for the one-way send: it is stored too
    stored = [m for msgs in pull_all(shared_broker.addr, "OmsAio").values() for m in msgs]
    by_body = {m.body: m for m in stored}
    assert set(by_body) == {
        b"aio-one",
        b"aio-oneway",
        *(f"aio-b{i}".encode() for i in range(50)),
        *(f"aio-c{i}".encode() for i in range(20)),
    }
    first = by_body[b"aio-one"]
    assert first.system_properties.tag == "TagA" and list(first.system_properties.keys) == ["k-1"]
    assert dict(first.user_properties) == {"c": "red"}
    assert first.system_properties.message_id == one.message_id


@pytest.mark.timeout(60)
def test_ordered_sends_hooks_and_errors(shared_broker, access_point):
    create_topic(shared_broker.addr, "OmsAioFifo", "FIFO")
    calls: list[tuple[str, str, object]] = []

    class Recorder:
        def oms_before_send(self, message):
            calls.append(("before", message.get_body(str), None))

        def oms_after_send(self, message, result, error):
            calls.append(("after", message.get_body(str), result.message_id if result else type(error).__name__))

    producer = access_point.create_producer(operation_timeout=10_000).add_interceptor(Recorder())

    async def main() -> dict[str, set[int]]:
        queue_of: dict[str, set[int]] = collections.defaultdict(set)
        async with producer.aio() as p:
            for seq in range(5):
                for order in ("a", "b", "c"):
                    r = await p.send(
                        oms.BytesMessage(f"{order}:{seq}", "OmsAioFifo"),
                        selector=oms.SelectMessageQueueByHash(),
                        arg=order,
                    )
                    queue_of[order].add(r.queue.queue_id)
            last = await p.send(oms.BytesMessage(b"last", "OmsAioFifo"), selector=lambda qs, m, arg: qs[-1])
            assert last.queue.queue_id == 3
            # a NORMAL topic: the message is stored plain in the queue the selector chose (partition order)
            pinned = await p.send(oms.BytesMessage(b"y", "OmsAioNormal"), selector=lambda qs, m, arg: qs[arg], arg=2)
            assert pinned.queue.queue_id == 2
            with pytest.raises(oms.OMSMessageFormatException):
                await p.send(oms.BytesMessage(b"badtag", "OmsAioFifo", tags="a|b"))
            with pytest.raises(oms.OMSMessageFormatException):  # one bad member: nothing of the batch is sent
                await p.send_batch([oms.BytesMessage(b"ok", "OmsAioFifo"), oms.BytesMessage(b"bad", "bad topic!")])
            await p.send_oneway(oms.BytesMessage(b"bad", "bad topic!"))  # logged, never raised
        return queue_of

    queue_of = run(main())
    assert all(len(q) == 1 for q in queue_of.values()), "one queue per key"
    stored = pull_all(shared_broker.addr, "OmsAioFifo")
    seen: dict[str, list[int]] = collections.defaultdict(list)
    for qid, msgs in stored.items():
        for m in msgs:
            if m.body == b"last":
                assert qid == 3
                continue
            order, seq = m.body.decode().split(":")
            assert qid in queue_of[order]
            seen[order].append(int(seq))
    assert seen == {o: list(range(5)) for o in "abc"}, "every message, in send order per key"
    assert ("after", "badtag", "OMSMessageFormatException") in calls
    assert ("after", "ok", "OMSMessageFormatException") in calls, "the batch's members heard why"
    assert ("after", "bad", "OMSMessageFormatException") in calls, "the one-way refusal reached the hooks"
    a0 = [c for c in calls if c[1] == "a:0"]
    assert [c[0] for c in a0] == ["before", "after"] and isinstance(a0[1][2], str) and len(a0[1][2]) == 34


@pytest.mark.timeout(60)
def test_lifecycle_and_timeouts(shared_broker, access_point):
    producer = access_point.create_producer(operation_timeout=10_000)
    aio = producer.aio()

    async def before_start() -> None:
        with pytest.raises(oms.OMSIllegalStateException, match="not started"):
            await aio.send(oms.BytesMessage(b"x", "OmsAioLife"))
        with pytest.raises(oms.OMSIllegalStateException):
            await aio.send_batch([oms.BytesMessage(b"x", "OmsAioLife")])

    run(before_start())
    producer.startup()  # the blocking producer and its asyncio face share one core

    async def main() -> None:
        r = await aio.send(oms.BytesMessage(b"shared", "OmsAioLife"), timeout=5)
        assert r.ok and (await aio.send_batch([])) == []
        with pytest.raises(ValueError):
            await aio.send(oms.BytesMessage(b"x", "OmsAioLife"), timeout=0)
        await aio.shutdown()
        with pytest.raises(oms.OMSIllegalStateException, match="shut down"):
            await aio.send(oms.BytesMessage(b"late", "OmsAioLife"))

    run(main())
    assert not producer.is_running
    wait_until(lambda: bodies(shared_broker.addr, "OmsAioLife") == [b"shared"], 10, what="the one send stored")
