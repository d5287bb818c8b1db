"""kombu against the rocketmq transport and a real broker: the scenarios kombu's own integration suite runs on every
transport (basic use, exchange types, TTL, priority, ack/reject/requeue), plus invisibility, ETA and bad input."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kombu import Connection, Consumer, Exchange, Producer, Queue

import oms
from tests.celery.conftest import BROKER_OPTIONS, INVISIBLE_S
from tests.conftest import BrokerFactory, BrokerHandle
from tests.waiting import wait_until
from transports.celery.options import TransportOptions, topic_for_queue
from transports.celery.transport import BrokerUnreachable, CreditWaiter, PublishFailed, Settle

pytestmark = pytest.mark.integration

OPTIONS = {"invisible_time": INVISIBLE_S, "polling_timeout": 1.0, "binding_cache": 0.2}


@pytest.fixture
def conn(broker_url: str) -> Iterator[Connection]:
    with Connection(broker_url, transport_options=OPTIONS) as c:
        c.connect()
        yield c


def _collect(conn: Connection, queue: Queue, n: int, timeout: float = 10.0, **consumer_kw: Any) -> list[Any]:
    got: list[Any] = []
    with Consumer(conn, [queue], callbacks=[lambda body, m: got.append((body, m))], **consumer_kw):
        deadline = time.monotonic() + timeout
        while len(got) < n and time.monotonic() < deadline:
            try:
                conn.drain_events(timeout=max(0.05, deadline - time.monotonic()))
            except TimeoutError:
                break
    return got


def _ack_all(got: list[Any]) -> None:
    for _, message in got:
        message.ack()


def _drain_until(conn: Connection, done: Callable[[], bool], deadline: float) -> None:
    """Deliver to ``conn``'s consumers until ``done()`` or ``deadline`` (``time.monotonic()``), riding out the
    connection errors of a broker that is being restarted."""
    while not done() and time.monotonic() < deadline:
        with contextlib.suppress(TimeoutError, *conn.connection_errors):
            conn.drain_events(timeout=1)


@contextlib.contextmanager
def _own_broker(
    tmp_path: Path, qname: str, options: dict[str, Any] | None = None
) -> Iterator[tuple[BrokerHandle, Queue, Connection]]:
    """A broker of the test's own (to kill and start), the queue ``qname`` on a direct exchange, a connection."""
    factory = BrokerFactory(tmp_path)
    try:
        broker = factory.broker(options=BROKER_OPTIONS)
        queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
        with Connection(f"rocketmq://{broker.addr}", transport_options=options or OPTIONS) as c:
            c.connect()
            yield broker, queue, c
    finally:
        factory.stop_all()


# -- basic functionality ---------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_publish_consume_keeps_body_headers_and_properties(conn: Connection, qname: str) -> None:
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    with Producer(conn) as producer:
        producer.publish(
            {"n": 1, "text": "héllo"},
            exchange=queue.exchange,
            routing_key=qname,
            declare=[queue],
            headers={"trace": "abc"},
            correlation_id="c-1",
        )
    got = _collect(conn, queue, 1)
    assert len(got) == 1
    body, message = got[0]
    assert body == {"n": 1, "text": "héllo"}
    assert message.headers["trace"] == "abc"
    assert message.properties["correlation_id"] == "c-1"
    assert message.delivery_tag.startswith("OMQ")  # the broker's receipt handle
    assert message.delivery_info["routing_key"] == qname
    message.ack()


@pytest.mark.timeout(60)
def test_header_values_kombu_tags_come_back_as_they_were_sent(conn: Connection, qname: str) -> None:
    """kombu's JSON encoder tags a datetime, a UUID or bytes (``__type__``); the envelope is decoded with kombu's
    decoder when a tag is there and with the plain one when none is: both give back what was sent."""
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    when = dt.datetime(2026, 11, 28, 12, 30, tzinfo=dt.UTC)
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    sent = [
        {"when": when, "id": ident, "raw": b"\x00\x01"},
        {"text": 'a "__type__" inside a string', "n": 1.5},
        {"plain": "nothing tagged", "nested": {"list": [1, 2]}},
    ]
    with Producer(conn) as producer:
        for i, headers in enumerate(sent):
            producer.publish({"i": i}, exchange=queue.exchange, routing_key=qname, declare=[queue], headers=headers)
    got = sorted(_collect(conn, queue, 3), key=lambda g: g[0]["i"])
    assert [{k: m.headers[k] for k in h} for (_, m), h in zip(got, sent, strict=True)] == sent
    _ack_all(got)


@pytest.mark.timeout(60)
def test_empty_queue_gives_nothing_and_drain_times_out(conn: Connection, qname: str) -> None:
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    channel = conn.default_channel
    queue(channel).declare()
    assert queue(channel).get() is None
    started = time.monotonic()
    with Consumer(conn, [queue], callbacks=[lambda body, m: None]), pytest.raises((TimeoutError, socket.timeout)):
        conn.drain_events(timeout=0.5)
    assert 0.4 < time.monotonic() - started < 5


@pytest.mark.timeout(60)
def test_simple_queue_and_simple_buffer(conn: Connection, qname: str) -> None:
    with conn.SimpleQueue(qname) as sq:
        for i in range(3):
            sq.put({"i": i})
        assert sq.qsize() == 3
        received = []
        for _ in range(3):
            m = sq.get(timeout=10)
            received.append(m.payload["i"])
            m.ack()
        assert sorted(received) == [0, 1, 2]
        with pytest.raises(sq.Empty):
            sq.get(timeout=0.5)
        with pytest.raises(sq.Empty):
            sq.get_nowait()
    with conn.SimpleBuffer(qname + "-buf") as buf:
        buf.put("no-ack")
        assert buf.get(timeout=10).payload == "no-ack"  # no_ack: nothing to settle, and it never comes back
        time.sleep(INVISIBLE_S + 1)
        with pytest.raises(buf.Empty):
            buf.get(timeout=0.5)


# -- exchange types --------------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_direct_exchange_routes_by_key(conn: Connection, qname: str) -> None:
    exchange = Exchange(qname, "direct")
    red, blue = Queue(qname + "-red", exchange, routing_key="red"), Queue(qname + "-blue", exchange, routing_key="blue")
    with Producer(conn, exchange=exchange) as producer:
        producer.publish("r1", routing_key="red", declare=[red, blue])
        producer.publish("b1", routing_key="blue")
        producer.publish("r2", routing_key="red")
        producer.publish("nobody", routing_key="green")  # no binding: dropped, as AMQP does
    got_red = _collect(conn, red, 2)
    got_blue = _collect(conn, blue, 1)
    assert sorted(b for b, _ in got_red) == ["r1", "r2"]
    assert [b for b, _ in got_blue] == ["b1"]
    _ack_all(got_red + got_blue)


@pytest.mark.timeout(60)
def test_topic_exchange_matches_patterns(conn: Connection, qname: str) -> None:
    exchange = Exchange(qname, "topic")
    stock = Queue(qname + "-stock", exchange, routing_key="stock.*")
    anything_eu = Queue(qname + "-eu", exchange, routing_key="#.eu")
    with Producer(conn, exchange=exchange) as producer:
        producer.publish("s-us", routing_key="stock.us", declare=[stock, anything_eu])
        producer.publish("s-eu", routing_key="stock.eu")
        producer.publish("bond-eu", routing_key="bond.gov.eu")
    got_stock = _collect(conn, stock, 2)
    got_eu = _collect(conn, anything_eu, 2)
    assert sorted(b for b, _ in got_stock) == ["s-eu", "s-us"]
    assert sorted(b for b, _ in got_eu) == ["bond-eu", "s-eu"]
    _ack_all(got_stock + got_eu)


@pytest.mark.timeout(60)
def test_fanout_reaches_queues_bound_by_another_connection(conn: Connection, broker_url: str, qname: str) -> None:
    exchange = Exchange(qname, "fanout")
    queues = [Queue(f"{qname}-{i}", exchange) for i in range(2)]
    for q in queues:
        q(conn.default_channel).declare()  # bindings made here...
    with Connection(broker_url, transport_options=OPTIONS) as publisher, Producer(publisher) as producer:
        # ...are stored in the broker, so this connection (another process, as far as kombu knows) sees them
        producer.publish({"to": "all"}, exchange=exchange, routing_key="ignored")
    for q in queues:
        got = _collect(conn, q, 1)
        assert [b for b, _ in got] == [{"to": "all"}]
        _ack_all(got)


# -- time to live, priority ------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_message_expiration_and_queue_message_ttl(conn: Connection, qname: str) -> None:
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    short = Queue(qname + "-ttl", Exchange(qname + "-ttl", "direct"), routing_key="k", message_ttl=0.5)
    with Producer(conn) as producer:
        producer.publish("expires", exchange=queue.exchange, routing_key=qname, declare=[queue], expiration=0.5)
        producer.publish("stays", exchange=queue.exchange, routing_key=qname)
        producer.publish("queue-ttl", exchange=short.exchange, routing_key="k", declare=[short])
    time.sleep(1.0)
    got = _collect(conn, queue, 2, timeout=3)
    assert [b for b, _ in got] == ["stays"]
    assert _collect(conn, short, 1, timeout=2) == []
    _ack_all(got)


@pytest.mark.timeout(60)
def test_priority_higher_number_first(conn: Connection, qname: str) -> None:
    """The rule: on a queue declared with x-max-priority, higher numbers are served first (AMQP's order), in the
    buckets 0-2, 3-5, 6-8 and 9; within a bucket, in publish order."""
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname, max_priority=9)
    with Producer(conn) as producer:
        for p in (0, 9, 3, 6, 1, 7):
            producer.publish({"p": p}, exchange=queue.exchange, routing_key=qname, declare=[queue], priority=p)
    order = []
    channel = conn.channel()
    for _ in range(6):
        m = queue(channel).get()
        assert m is not None
        order.append(m.payload["p"])
        m.ack()
    buckets = [p // 3 for p in order]
    assert buckets == sorted(buckets, reverse=True), order
    assert order[0] == 9
    channel.close()


# -- ack / reject / requeue ------------------------------------------------------------------------------------


@pytest.mark.timeout(90)
def test_ack_reject_requeue(conn: Connection, broker_url: str, qname: str) -> None:
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    with Producer(conn) as producer:
        for body in ("acked", "requeued", "dead"):
            producer.publish(body, exchange=queue.exchange, routing_key=qname, declare=[queue])
    first = {b: m for b, m in _collect(conn, queue, 3)}
    assert set(first) == {"acked", "requeued", "dead"}
    assert not any(m.delivery_info.get("redelivered") or m._raw.get("redelivered") for m in first.values())
    first["acked"].ack()
    first["requeued"].reject(requeue=True)
    first["dead"].reject(requeue=False)
    again = _collect(conn, queue, 1, timeout=3)
    assert [b for b, _ in again] == ["requeued"]  # at once, not after the invisible time
    assert again[0][1].delivery_info.get("redelivered") or again[0][1]._raw["redelivered"]
    again[0][1].ack()
    # nothing else comes back once the invisible time has passed: the ack held, the rejected one is dead-lettered
    time.sleep(INVISIBLE_S + 1)
    assert _collect(conn, queue, 1, timeout=1.5) == []
    group = f"kombu_{topic_for_queue(qname)}"
    with oms.get_messaging_access_point(f"oms:rocketmq://{broker_url.split('://')[1]}/") as ap:
        dlq = ap.create_pull_consumer(consumer_id=f"dlq-reader-{qname}"[:60], consume_from_where="first")
        dlq.attach_queue(f"%DLQ%{group}")
        dlq.startup()
        letters = dlq.batch_receive(8, 5)
    assert len(letters) == 1
    stored = json.loads(letters[0].body)
    assert base64.b64decode(stored["body"]) == b"dead"


@pytest.mark.timeout(90)
def test_held_message_stays_invisible_then_returns_when_channel_closes(conn: Connection, broker_url: str) -> None:
    qname = "held-renewed"
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    with Producer(conn) as producer:
        producer.publish("long task", exchange=queue.exchange, routing_key=qname, declare=[queue])
    holder = conn.channel()
    m = queue(holder).get()
    assert m is not None and m.payload == "long task"
    with Connection(broker_url, transport_options=OPTIONS) as other:
        time.sleep(INVISIBLE_S * 2.5)  # the renewer keeps it invisible past its invisible time
        assert queue(other.default_channel).get() is None
        holder.close()  # a closing channel (warm shutdown) makes what it held visible at once
        deadline = time.monotonic() + 3
        back = None
        while back is None and time.monotonic() < deadline:
            back = queue(other.default_channel).get()
        assert back is not None and back.payload == "long task"
        back.ack()


@pytest.mark.timeout(60)
def test_prefetch_one_holds_one(conn: Connection, qname: str) -> None:
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    with Producer(conn) as producer:
        for i in range(5):
            producer.publish(i, exchange=queue.exchange, routing_key=qname, declare=[queue])
    got: list[Any] = []
    channel = conn.channel()
    with Consumer(channel, [queue], callbacks=[lambda b, m: got.append(m)], prefetch_count=1):
        conn.drain_events(timeout=10)
        time.sleep(1.0)  # a fetcher ignoring prefetch would have brought more by now
        with pytest.raises((TimeoutError, socket.timeout)):
            conn.drain_events(timeout=0.5)
        assert len(got) == 1
        assert len(channel._held) == 1
        got[0].ack()
        conn.drain_events(timeout=10)
        assert len(got) == 2
        got[1].ack()
    channel.close()


@pytest.mark.timeout(60)
def test_freed_credit_wakes_every_fetcher_waiting_for_it_and_only_then(conn: Connection) -> None:
    """Fetchers (one per consumed queue) wait on the I/O loop for their channel's credit; the thread that frees credit
    wakes each of them once what it waits for is free, and no earlier (a wake-up per ack is what this design saves)."""
    channel = conn.channel()
    channel.basic_qos(0, 4, False)
    io = conn.transport._io_loop()
    a, b = CreditWaiter(io), CreditWaiter(io)
    assert channel._take_credits(4, False, a) == 4  # a receive in flight may bring all four
    assert channel._take_credits(4, False, a) == 0 and a.need == 1
    assert channel._take_credits(4, False, b) == 0 and b.need == 1

    async def woken(waiter: CreditWaiter) -> bool:
        try:
            await asyncio.wait_for(waiter.event.wait(), 2.0)
        except TimeoutError:
            return False
        return True

    channel._received(4, [], buffered=True)  # the receive brought nothing: its credit comes back to both waiters
    assert io.submit(woken(a)).result(5) and io.submit(woken(b)).result(5)
    assert not channel._credit_waiters

    # with one credit free, a waiter lingers for half the prefetch: freeing nothing more must not wake it
    channel._reserved = 3
    a.event.clear()
    assert channel._take_credits(4, False, a) == 0 and a.need == 2
    channel._settle("not-held", Settle.ACK)  # settles nothing: the credit is unchanged
    assert not io.submit(woken(a)).result(5)
    channel._reserved = 2  # a second credit comes back
    channel._settle("not-held", Settle.ACK)
    assert io.submit(woken(a)).result(5)
    assert channel._take_credits(4, False, a) == 2  # half the prefetch: taken without lingering
    channel._reserved = 0
    channel.close()


# -- ETA on the broker -----------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_eta_header_waits_on_the_broker(conn: Connection, qname: str) -> None:
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    eta = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=3)
    with Producer(conn) as producer:
        producer.publish("later", exchange=queue.exchange, routing_key=qname, declare=[queue], headers={"eta": eta})
        producer.publish("now", exchange=queue.exchange, routing_key=qname)
    early = _collect(conn, queue, 2, timeout=2)
    assert [b for b, _ in early] == ["now"]
    _ack_all(early)
    late = _collect(conn, queue, 1, timeout=10)
    assert [b for b, _ in late] == ["later"]
    assert dt.datetime.now(dt.UTC) >= eta - dt.timedelta(milliseconds=50)
    _ack_all(late)


# -- queue management ------------------------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_purge_size_delete(conn: Connection, qname: str) -> None:
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    with Producer(conn) as producer:
        for i in range(4):
            producer.publish(i, exchange=queue.exchange, routing_key=qname, declare=[queue])
    bound = queue(conn.default_channel)
    assert bound.queue_declare(passive=True).message_count == 4
    assert bound.purge() == 4
    assert bound.get() is None
    bound.delete()
    with pytest.raises(conn.channel_errors):
        bound.queue_declare(passive=True)


@pytest.mark.timeout(60)
def test_abandoned_queue_with_expires_is_deleted(broker_url: str, qname: str) -> None:
    options = {**OPTIONS, "expiry_check_interval": 0.5}
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname, expires=1.0)
    with Connection(broker_url, transport_options=options) as c:
        queue(c.default_channel).declare()
        assert queue(c.default_channel).queue_declare(passive=True)
        time.sleep(3.0)  # nobody consumes it for longer than x-expires: the keeper deletes it
        with pytest.raises(c.channel_errors):
            c.transport._meta.clear()
            queue(c.default_channel).queue_declare(passive=True)


@pytest.mark.timeout(60)
def test_expired_queue_declared_again_gets_its_bindings_back(broker_url: str, qname: str) -> None:
    """A long-lived client (Flower, a reply queue) whose expiring queue another process deleted while it was idle
    declares it again: publishers elsewhere route to it again, though kombu does not bind what it bound once."""
    exchange = Exchange(qname, "direct")
    queue = Queue(qname, exchange, routing_key="k", expires=1.0)
    with (
        Connection(broker_url, transport_options={**OPTIONS, "expiry_check_interval": 600}) as owner,
        Connection(broker_url, transport_options={**OPTIONS, "expiry_check_interval": 0.5}) as other,
    ):
        queue(owner.default_channel).declare()
        other.connect()
        time.sleep(3.0)  # the other connection's keeper deletes the idle queue meanwhile
        assert other.transport._queue_meta(qname, create=False) is None
        queue(owner.default_channel).declare()
        with Producer(other) as producer:
            producer.publish("again", exchange=exchange, routing_key="k")
        got = _collect(owner, queue, 1, timeout=5)
        assert [b for b, _ in got] == ["again"]
        _ack_all(got)


@pytest.mark.timeout(60)
def test_transport_selected_by_path_without_the_alias(celery_broker: BrokerHandle, qname: str) -> None:
    """``broker_transport = "transports.celery.transport:Transport"`` needs no alias: a scheme kombu does not know
    fails on its own, and works once the transport is given by path."""
    url = f"orbitmq://{celery_broker.addr}"
    with pytest.raises(KeyError, match="orbitmq"):
        Connection(url).connect()
    path = "transports.celery.transport:Transport"
    with Connection(url, transport=path, transport_options=OPTIONS) as c:
        sq = c.SimpleQueue(qname)
        sq.put("by path")
        m = sq.get(timeout=10)
        assert m.payload == "by path"
        m.ack()
        sq.close()


# -- bad input -------------------------------------------------------------------------------------------------


def test_unknown_transport_option_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown option 'visiblity_timeout'"):
        TransportOptions.parse({"visiblity_timeout": 3})
    with pytest.raises(ValueError, match=r"invisible_time=1.0 is outside \[3.0"):
        TransportOptions.parse({"invisible_time": 1})
    with pytest.raises(ValueError, match="priority_steps"):
        TransportOptions.parse({"priority_steps": [3, 6]})
    assert TransportOptions.parse({"visibility_timeout": 3600}).invisible_time == 30.0  # Redis's: ignored
    with pytest.raises(ValueError, match=r"publish_retry_timeout=-1.0 is outside \[0.0, 3600.0\]"):
        TransportOptions.parse({"publish_retry_timeout": -1})


@pytest.mark.timeout(60)
def test_unknown_url_option_and_bad_host(celery_broker: BrokerHandle) -> None:
    with pytest.raises(ValueError, match="unknown option 'groop'"):
        Connection(f"rocketmq://{celery_broker.addr}", transport_options={"groop": "x"}).connect()
    with pytest.raises(TypeError, match="unexpected keyword"):
        Connection(f"rocketmq://{celery_broker.addr}?groop=x").connect()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(BrokerUnreachable, match=f"127.0.0.1:{port}"):
        Connection(f"rocketmq://127.0.0.1:{port}", transport_options={"operation_timeout": 1}).connect()


@pytest.mark.timeout(60)
def test_a_lone_publish_is_stored_when_it_returns_and_a_burst_after_it_is_all_delivered(
    conn: Connection, qname: str
) -> None:
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    sender = conn.transport._sender
    with Producer(conn) as producer:
        producer.publish("first", exchange=queue.exchange, routing_key=qname, declare=[queue])
        sender.flush(10)
        time.sleep(0.05)  # idle: the next publish is sent and answered on this thread
        producer.publish("lone", exchange=queue.exchange, routing_key=qname)
        assert (len(sender._pending), sender._busy, sender._direct) == (0, 0, 0)  # answered before publish returned
        assert conn.default_channel._size(qname) == 2
        for i in range(200):  # back to back: not idle, handed over (sent in batches, answered later)
            producer.publish(f"burst-{i}", exchange=queue.exchange, routing_key=qname)
        sender.flush(10)
    bodies: list[str] = []
    with Consumer(conn, [queue], callbacks=[lambda body, m: (bodies.append(body), m.ack())]):
        deadline = time.monotonic() + 20
        while len(bodies) < 202 and time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                conn.drain_events(timeout=1)
    assert sorted(bodies) == sorted(["first", "lone", *(f"burst-{i}" for i in range(200))])


@pytest.mark.timeout(120)
def test_a_lone_publish_to_a_dead_broker_raises_a_connection_error_at_once(tmp_path: Path, qname: str) -> None:
    with _own_broker(tmp_path, qname) as (broker, queue, c):
        with Producer(c) as producer:
            producer.publish("before", exchange=queue.exchange, routing_key=qname, declare=[queue])
            broker.kill()
            time.sleep(0.05)  # idle: the next publish is sent on this thread, and its failure raises here
            with pytest.raises(c.connection_errors):
                producer.publish("lost", exchange=queue.exchange, routing_key=qname)
            broker.start()
            deadline = time.monotonic() + 30
            while True:  # what Celery's publish retry policy does: the broker is back, the publish goes through
                try:
                    producer.publish("after", exchange=queue.exchange, routing_key=qname)
                    break
                except c.connection_errors:
                    assert time.monotonic() < deadline, "publish did not go through after the broker restart"
                    time.sleep(0.2)
        got = _collect(c, queue, 2, timeout=10)
        assert sorted(b for b, _ in got) == ["after", "before"]
        _ack_all(got)


@pytest.mark.timeout(180)
def test_a_burst_of_publishes_across_a_broker_kill_loses_nothing_it_acknowledged(tmp_path: Path, qname: str) -> None:
    """Publishes in a burst go out in batches from the sender thread: a batch the broker cannot take (killed, then
    started again) is sent again until it is back, with the publishers waiting meanwhile, so every publish that
    returned is delivered (a batch lost there would only have made a later publish raise)."""
    with _own_broker(tmp_path, qname) as (broker, queue, c):
        acknowledged: list[str] = []
        stop = threading.Event()

        def publish_burst() -> None:
            with Producer(c) as producer:
                producer.publish("first", exchange=queue.exchange, routing_key=qname, declare=[queue])
                acknowledged.append("first")
                i = 0
                while not stop.is_set():
                    i += 1
                    try:
                        producer.publish(f"m-{i}", exchange=queue.exchange, routing_key=qname)
                    except c.connection_errors:  # refused to the caller: not acknowledged
                        time.sleep(0.05)
                        continue
                    acknowledged.append(f"m-{i}")

        publisher = threading.Thread(target=publish_burst)
        publisher.start()
        try:
            wait_until(lambda: len(acknowledged) > 500, 30, "a burst under way")
            broker.kill()
            time.sleep(1.0)  # publishes go on meanwhile
            broker.start()
            during = len(acknowledged)
            wait_until(lambda: len(acknowledged) > during + 500, 60, "publishes after the broker came back")
        finally:
            stop.set()
            publisher.join(60)
        c.transport._sender.flush(30)
        bodies: set[str] = set()
        with Consumer(c, [queue], callbacks=[lambda body, m: (bodies.add(body), m.ack())]):
            _drain_until(c, lambda: set(acknowledged) <= bodies, time.monotonic() + 60)
        missing = set(acknowledged) - bodies
        assert not missing, f"{len(missing)} of {len(acknowledged)} acknowledged publishes were lost"


@pytest.mark.timeout(120)
def test_a_burst_the_broker_never_takes_is_reported_after_the_retry_time(tmp_path: Path, qname: str) -> None:
    """With the broker gone for good, a burst's batch is sent again for publish_retry_timeout, then reported lost: a
    later publish raises PublishFailed (a connection error, for Celery's retry policy) naming the failure."""
    options = {**OPTIONS, "publish_retry_timeout": 1.0}
    with _own_broker(tmp_path, qname, options) as (broker, queue, c), Producer(c) as producer:
        producer.publish("first", exchange=queue.exchange, routing_key=qname, declare=[queue])
        broker.kill()
        started = time.monotonic()
        reported: PublishFailed | None = None
        while reported is None and time.monotonic() - started < 60:
            try:
                producer.publish("lost", exchange=queue.exchange, routing_key=qname)
            except PublishFailed as exc:
                reported = exc
            except c.connection_errors:  # a lone publish's own failure raises at once: not this path
                pass
        assert reported is not None and "an earlier publish failed on the broker" in str(reported)
        assert time.monotonic() - started >= 1.0, "reported before the retry time was up"
        assert isinstance(reported, c.connection_errors)  # Celery's publish retry policy sees it


@pytest.mark.timeout(120)
@pytest.mark.parametrize("settle", ["ack", "requeue"])
def test_a_settle_the_killed_broker_missed_is_made_again(tmp_path: Path, qname: str, settle: str) -> None:
    """Receipt handles outlive a broker restart: an ack or a requeue that failed while the broker was down is made
    again once it is back. An acked message is not delivered a second time when its invisible time passes; a
    requeued one is delivered again then, not only when its invisible time passes."""
    invisible = 8.0 if settle == "ack" else 30.0
    with _own_broker(tmp_path, qname, {**OPTIONS, "invisible_time": invisible}) as (broker, queue, c):
        with Producer(c) as producer:
            producer.publish(settle, exchange=queue.exchange, routing_key=qname, declare=[queue])
        got: list[Any] = []
        with Consumer(c, [queue], callbacks=[lambda body, m: got.append((body, m))]):  # one consumer, as a worker
            _drain_until(c, lambda: bool(got), time.monotonic() + 10)
            assert [b for b, _ in got] == [settle]
            received = time.monotonic()
            broker.kill()
            getattr(got[0][1], settle)()  # the settler's AckBatch / ChangeInvisibleDuration finds no broker
            time.sleep(0.3)
            broker.start()
            # an ack: until past when the message would be visible again; a requeue: well before that
            until = received + (invisible + 2.0 if settle == "ack" else invisible / 2)
            _drain_until(c, lambda: len(got) > 1, until)
        again = got[1:]
        _ack_all(again)
    if settle == "ack":
        assert not again, "the acked message was delivered again: its ack was dropped while the broker was down"
    else:
        assert [b for b, _ in again] == [settle], "the requeued message waited out its invisible time"


@pytest.mark.timeout(60)
def test_over_limit_message_is_refused_at_publish_and_nothing_is_lost(conn: Connection, qname: str) -> None:
    queue = Queue(qname, Exchange(qname, "direct"), routing_key=qname)
    with Producer(conn) as producer:
        producer.publish("before", exchange=queue.exchange, routing_key=qname, declare=[queue])
        with pytest.raises(oms.OMSMessageFormatException, match="limit"):
            producer.publish("x" * (5 * 1024 * 1024), exchange=queue.exchange, routing_key=qname)
        producer.publish("after", exchange=queue.exchange, routing_key=qname)
    got = _collect(conn, queue, 3, timeout=3)
    assert sorted(b for b, _ in got) == ["after", "before"]
    _ack_all(got)


@pytest.mark.timeout(60)
def test_oms_ack_batch_acks_in_one_call_and_names_refusals(celery_broker: BrokerHandle, qname: str) -> None:
    """``AsyncPullConsumer.ack_batch`` (added for this transport): acked messages stay acked, an unknown handle is
    refused without losing the others."""
    import asyncio

    with oms.get_messaging_access_point(f"oms:rocketmq://{celery_broker.addr}/") as ap:
        with ap.create_producer() as producer:
            for i in range(3):
                producer.send(oms.BytesMessage(f"m{i}", qname))
        consumer = ap.create_pull_consumer(
            {"rmq.invisible.time": 3000, "rmq.pull.batch.size": 1}, consumer_id=f"acker-{qname}"[:60],
            consume_from_where="first",
        )  # fmt: skip
        consumer.attach_queue(qname)
        consumer.startup()
        got: list[oms.BytesMessage] = []
        deadline = time.monotonic() + 10
        while len(got) < 3 and time.monotonic() < deadline:
            got += consumer.batch_receive(3 - len(got), 2)
        assert len(got) == 3
        refused = asyncio.run(consumer.aio().ack_batch([*got, "OMQ2.not-a-handle"]))
        assert [t for t, _ in refused] == ["OMQ2.not-a-handle"]
        assert "unknown receipt handle" in str(refused[0][1])
        time.sleep(3.5)  # past the invisible time: nothing comes back
        assert consumer.batch_receive(3, 1) == []
        consumer.shutdown()
