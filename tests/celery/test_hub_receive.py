"""Queues consumed on a kombu hub (as Celery's worker does) are read on the hub's thread over a frame connection of
their own (transports/celery/hub.py): the guarantees of the client-loop fetchers hold there too."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kombu import Connection, Consumer, Exchange, Producer, Queue
from kombu.asynchronous import Hub

from tests.celery.conftest import INVISIBLE_S
from tests.conftest import BrokerHandle
from transports.celery.hub import HubFetcher
from transports.celery.transport import Transport

pytestmark = pytest.mark.integration

OPTIONS = {"invisible_time": INVISIBLE_S, "polling_timeout": 1.0}


@pytest.fixture
def hub_conn(broker_url: str) -> Iterator[tuple[Connection, Hub]]:
    hub = Hub()
    with Connection(broker_url, transport_options=OPTIONS) as conn:
        conn.connect()
        conn.transport.register_with_event_loop(conn.connection, hub)
        try:
            yield conn, hub
        finally:
            hub.close()


def _run(hub: Hub, until: Callable[[], bool], timeout: float) -> bool:
    """Turn the hub until ``until()`` or ``timeout`` s passed."""
    loop = hub.create_loop()
    deadline = time.monotonic() + timeout
    while not until() and time.monotonic() < deadline:
        next(loop)
    return until()


def _publish(conn: Connection, queue: Queue, bodies: list[Any], **kw: Any) -> None:
    with Producer(conn) as producer:
        for body in bodies:
            producer.publish(body, exchange=queue.exchange, routing_key=queue.routing_key, declare=[queue], **kw)
    conn.transport._sender.flush(10)


def _count_loop_receives(transport: Transport, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = transport._receive_async

    async def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return await real(*args, **kwargs)

    monkeypatch.setattr(transport, "_receive_async", counted)
    return calls


def _record_in_flight(fetcher: HubFetcher, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many receives the fetcher has in flight after each one it sends."""
    counts: list[int] = []
    send_next = fetcher._send_next

    def counted(r: Any) -> None:
        send_next(r)
        counts.append(len(fetcher._rounds))

    monkeypatch.setattr(fetcher, "_send_next", counted)
    return counts


@pytest.mark.timeout(60)
def test_consumed_on_the_hub_prefetch_is_exact_and_receives_skip_the_client_loop(
    hub_conn: tuple[Connection, Hub], qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    conn, hub = hub_conn
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    _publish(conn, queue, list(range(12)))
    loop_receives = _count_loop_receives(conn.transport, monkeypatch)
    got: list[Any] = []
    channel = conn.channel()
    with Consumer(channel, [queue], callbacks=[lambda b, m: got.append(m)], prefetch_count=3):
        assert isinstance(channel._fetchers[qname], HubFetcher)
        assert _run(hub, lambda: len(got) >= 3, 10)
        _run(hub, lambda: False, 1.0)  # a fetcher ignoring prefetch would have brought more by now
        assert len(got) == 3 and len(channel._held) == 3
        seen = 3
        while seen < 12:
            for m in got[seen - 3 : seen]:
                m.ack()
            assert _run(hub, lambda n=seen: len(got) >= n + 3, 10), len(got)
            seen += 3
            assert len(channel._held) <= 3
        for m in got[-3:]:
            m.ack()
    assert sorted(m.payload for m in got) == list(range(12))
    assert loop_receives[0] == 1  # the first receive learns the route and frame listener; the rest go on the hub
    channel.close()


@pytest.mark.timeout(60)
def test_priority_buckets_on_the_hub_serve_higher_numbers_first(hub_conn: tuple[Connection, Hub], qname: str) -> None:
    conn, hub = hub_conn
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname, max_priority=9)
    got: list[Any] = []
    channel = conn.channel()
    with Consumer(channel, [queue], callbacks=[lambda b, m: got.append(m)], prefetch_count=1):
        _run(hub, lambda: False, 1.5)  # the first receive (through the client) is over: the next ones are framed
        for p in (0, 9, 3, 6, 1, 7):
            _publish(conn, queue, [{"p": p}], priority=p)
        _run(hub, lambda: False, 1.5)  # the idle long poll of the lowest bucket ends with the 0
        order = []
        while len(order) < 6:
            assert _run(hub, lambda: len(got) > len(order), 10), order
            order.append(got[len(order)].payload["p"])
            got[len(order) - 1].ack()
    assert sorted(order) == [0, 1, 3, 6, 7, 9]
    buckets = [p // 3 for p in order[1:]]  # the first: what the idle long poll of the lowest bucket took
    assert buckets == sorted(buckets, reverse=True), order
    channel.close()


@pytest.mark.timeout(60)
def test_cancelled_consumer_gives_back_what_its_receive_in_flight_brings(
    hub_conn: tuple[Connection, Hub], broker_url: str, qname: str
) -> None:
    conn, hub = hub_conn
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    channel = conn.channel()
    consumer = Consumer(channel, [queue], callbacks=[lambda b, m: pytest.fail("delivered after cancel")])
    consumer.consume()
    _run(hub, lambda: False, 1.5)  # now in a framed long poll
    fetcher = channel._fetchers[qname]
    assert isinstance(fetcher, HubFetcher)
    consumer.cancel()
    _publish(conn, queue, ["late"])
    assert _run(hub, lambda: not fetcher._rounds, 5)  # the long poll answered with the message: given back
    with Connection(broker_url, transport_options=OPTIONS) as other:
        deadline = time.monotonic() + 5
        back = None
        while back is None and time.monotonic() < deadline:
            back = queue(other.default_channel).get()
        assert back is not None and back.payload == "late"  # at once, not after the invisible time
        back.ack()
    channel.close()


@pytest.mark.timeout(120)
def test_hub_consumer_goes_on_after_a_broker_restart(
    hub_conn: tuple[Connection, Hub], celery_broker: BrokerHandle, qname: str
) -> None:
    conn, hub = hub_conn
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    got: list[Any] = []

    def on_message(body: Any, message: Any) -> None:
        got.append(body)
        message.ack()

    channel = conn.channel()
    with Consumer(channel, [queue], callbacks=[on_message], prefetch_count=4):
        _publish(conn, queue, ["before"])
        assert _run(hub, lambda: "before" in got, 10)
        celery_broker.restart()
        deadline = time.monotonic() + 60
        while "after" not in got and time.monotonic() < deadline:
            try:  # the publisher's own reconnect may fail a send or two (Celery retries its publishes)
                _publish(conn, queue, ["after"])
            except ConnectionError:
                continue
            _run(hub, lambda: "after" in got, 5)
        assert "after" in got, got
        fetcher = channel._fetchers[qname]
        assert isinstance(fetcher, HubFetcher)
        # back on a connection of its own once the client knows the frame listener again (asked 0.5 s after a loss)
        assert _run(hub, lambda: bool(fetcher._rounds), 20)
    channel.close()


@pytest.mark.timeout(60)
def test_acks_deferred_like_celery_keep_a_second_receive_in_flight_and_never_wait_for_a_timer(
    hub_conn: tuple[Connection, Hub], qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Celery acks a task it was handed with ``hub.call_soon``: the acks of a batch run after it, so the next receive
    goes out while the previous one is still in flight (the worker never idles for a round trip), and after the
    first receive (through the client's loop, delivered from the hub's ready callbacks) the hub does not sit on
    those acks until its next timer. Once the queue is idle, one receive waits there, not two."""
    conn, hub = hub_conn
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    _publish(conn, queue, list(range(40)))
    got: list[Any] = []
    held_at_delivery: list[int] = []
    channel = conn.channel()

    def on_message(body: Any, message: Any) -> None:
        got.append(body)
        held_at_delivery.append(len(channel._held))
        hub.call_soon(message.ack)

    slow_polls: list[float] = []
    poll = hub.poller.poll

    def timed_poll(timeout: float | None) -> Any:
        pending = bool(hub._ready)  # callbacks queued for after this poll
        start = time.monotonic()
        events = poll(timeout)
        if pending and time.monotonic() - start >= 0.5:
            slow_polls.append(time.monotonic() - start)
        return events

    with Consumer(channel, [queue], callbacks=[on_message], prefetch_count=4):
        fetcher = channel._fetchers[qname]
        assert isinstance(fetcher, HubFetcher)
        in_flight = _record_in_flight(fetcher, monkeypatch)
        monkeypatch.setattr(hub.poller, "poll", timed_poll)
        assert _run(hub, lambda: len(got) == 40, 20), len(got)
        assert _run(hub, lambda: not channel._held, 5)
        # At an idle queue one receive waits (two would both be woken by every message). The two in flight when
        # the backlog ran out end with the polling timeout (1 s here), empty: then one goes out again.
        assert _run(hub, lambda: len(fetcher._rounds) == 1 and not fetcher._backlog, 5), len(fetcher._rounds)
        assert not _run(hub, lambda: len(fetcher._rounds) != 1, 1.5), len(fetcher._rounds)
        _publish(conn, queue, [40])
        assert _run(hub, lambda: len(got) == 41 and not channel._held, 10)
        assert not _run(hub, lambda: len(fetcher._rounds) != 1, 0.5), len(fetcher._rounds)
    assert sorted(got) == list(range(41))  # each once
    assert max(held_at_delivery) <= 4  # the prefetch, exactly
    assert max(in_flight) == 2, in_flight  # half the prefetch free again: a second receive while one is answered
    assert not slow_polls, slow_polls  # the hub slept with acks waiting (a second: its next timer)
    channel.close()


@pytest.mark.timeout(120)
def test_a_broker_restart_mid_drain_with_receives_in_flight_loses_nothing(
    hub_conn: tuple[Connection, Hub], celery_broker: BrokerHandle, qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL while the fetcher has two receives in flight (a backlog) that the broker never answered: their credit
    comes back, the fetcher goes on after the restart, and every message is delivered (the unacked ones again: at
    least once)."""
    conn, hub = hub_conn
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    _publish(conn, queue, list(range(600)))  # in the commit log's mapped pages: a SIGKILL does not lose them
    got: list[Any] = []
    channel = conn.channel()

    def on_message(body: Any, message: Any) -> None:
        got.append(body)
        hub.call_soon(message.ack)

    with Consumer(channel, [queue], callbacks=[on_message], prefetch_count=4):
        fetcher = channel._fetchers[qname]
        assert isinstance(fetcher, HubFetcher)
        in_flight = _record_in_flight(fetcher, monkeypatch)
        # the first receive goes through the client's loop; then two on the hub at once
        assert _run(hub, lambda: len(fetcher._rounds) == 2, 20), (len(got), in_flight[-5:])
        os.kill(celery_broker.process.pid, signal.SIGSTOP)  # answers nothing from here on
        _run(hub, lambda: False, 0.5)  # what it answered before is taken, and the next receives go out unanswered
        assert len(fetcher._rounds) == 2, (len(fetcher._rounds), in_flight[-5:])
        celery_broker.restart(signal.SIGKILL)
        assert _run(hub, lambda: set(got) >= set(range(600)), 60), sorted(set(range(600)) - set(got))[:10]
        assert _run(hub, lambda: not channel._held, 10)

        # the lost receives' credit came back: one receive ends up waiting at the idle queue (on the hub again)
        # with all the prefetch, and nothing else is reserved
        def one_with_all() -> bool:
            rounds = list(fetcher._rounds.values())
            return fetcher._loop_receive is None and len(rounds) == 1 and rounds[0].reserved == 4

        assert _run(hub, one_with_all, 20), [r.reserved for r in fetcher._rounds.values()]
        assert channel._reserved == 4
    channel.close()


@pytest.mark.timeout(60)
def test_at_an_idle_queue_the_next_receive_waits_for_the_hand_over(
    hub_conn: tuple[Connection, Hub], qname: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lone task's next receive goes out once Celery handed the task over (its ack: acks early, or the solo pool
    ran it), not while the task starts; a task that is not acked (``acks_late``) holds it back HAND_OVER_S at the
    most. The next message is delivered either way."""
    conn, hub = hub_conn
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    _publish(conn, queue, ["first"])
    events: list[str] = []
    got: list[Any] = []
    ack_later = {"late"}  # bodies left unacked (acks_late) until the test acks them
    channel = conn.channel()

    def on_message(body: Any, message: Any) -> None:
        events.append(f"delivered {body}")
        got.append(message)
        if body not in ack_later:
            hub.call_soon(lambda: (events.append(f"acked {body}"), message.ack()))

    with Consumer(channel, [queue], callbacks=[on_message], prefetch_count=4):
        fetcher = channel._fetchers[qname]
        assert isinstance(fetcher, HubFetcher)
        # the first receive (through the client's loop) brings "first"; then one waits at the idle queue on the hub
        assert _run(hub, lambda: len(got) == 1 and len(fetcher._rounds) == 1 and not channel._held, 20)
        send_next = fetcher._send_next

        def recorded(r: Any) -> None:
            events.append("receive")
            send_next(r)

        monkeypatch.setattr(fetcher, "_send_next", recorded)
        for body in ("lone", "late", "after"):
            events.clear()
            _publish(conn, queue, [body])
            assert _run(hub, lambda: len(fetcher._rounds) == 1 and "receive" in events, 10), events
            if body != "late":
                assert events == [f"delivered {body}", f"acked {body}", "receive"], events
            else:  # never acked: the receive went out anyway, with the task still held
                assert events == ["delivered late", "receive"] and len(channel._held) == 1, events
        assert _run(hub, lambda: len(channel._held) == 1, 5)  # "after" acked, "late" still held
        got[2].ack()
    assert [m.payload for m in got] == ["first", "lone", "late", "after"]
    channel.close()
