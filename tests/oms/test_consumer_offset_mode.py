"""The oms push consumer in offset mode (``rmq.consume.mode=PULL``, RocketMQ 4's DefaultMQPushConsumer) against a
real broker: broker-side offsets across restarts, send-back to retry/DLQ, orderly consumption under queue leases
through failures and a rebalance, and an admin reset by time while the consumer runs."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2

import oms
from orbitmq.proto import admin_pb2, admin_pb2_grpc
from tests.conftest import BrokerFactory, BrokerHandle
from tests.oms.helpers import create_topic, pull_all
from tests.waiting import wait_until

# short rebalance/commit/long-polling periods keep the file fast; the broker's lease is 2 s (see the fixture)
FAST = {
    "consume_mode": "PULL",
    "rebalance_interval": 300,
    "persist_consumer_offset_interval": 300,
    "long_polling_timeout": 500,
    "consume_from_where": "first",
}
ONE_SECOND_LEVELS = " ".join(["1s"] * 18)  # every retry comes back after 1 s


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerHandle]:
    factory = BrokerFactory(tmp_path_factory.mktemp("offset-mode-broker"))
    try:
        # a killed member leaves the group 1.5 s after its streams closed; its leases expire after 2 s
        options = {"rebalanceLockMaxLiveTime": "2000", "messageDelayLevel": ONE_SECOND_LEVELS, "clientExpireMs": "1500"}
        yield factory.broker(options=options)
    finally:
        factory.stop_all()


@pytest.fixture
def ap(broker: BrokerHandle) -> Iterator[oms.MessagingAccessPoint]:
    with oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as access_point:
        yield access_point


@pytest.fixture
def producer(ap: oms.MessagingAccessPoint) -> Iterator[oms.Producer]:
    with ap.create_producer(operation_timeout=10_000) as p:
        yield p


def send(producer: oms.Producer, topic: str, bodies: list[str]) -> None:
    producer.send_batch([oms.BytesMessage(b, topic) for b in bodies])  # type: ignore[arg-type]


def reset_by_time(addr: str, group: str, topic: str, timestamp_ms: int) -> dict[int, int]:
    with grpc.insecure_channel(addr) as ch:
        request = admin_pb2.ResetOffsetByTimeRequest(group=group, topic=topic, timestamp_ms=timestamp_ms)
        resp = admin_pb2_grpc.AdminStub(ch).ResetOffsetByTime(request, timeout=10)
    assert resp.status.code == definition_pb2.Code.OK, resp.status
    return dict(resp.offsets)


class Counter:
    """A concurrent listener counting bodies; ``fail`` bodies answer RECONSUME_LATER."""

    def __init__(self, fail: Callable[[str], bool] = lambda body: False) -> None:
        self.ok: collections.Counter[str] = collections.Counter()
        self.attempts: dict[str, list[int]] = collections.defaultdict(list)
        self.lock = threading.Lock()
        self.fail = fail

    def __call__(self, message: oms.BytesMessage, context: oms.ConsumeContext) -> object:
        body = message.get_body(str)
        with self.lock:
            self.attempts[body].append(message.reconsume_times)
        if self.fail(body):
            return oms.ConsumeConcurrentlyStatus.RECONSUME_LATER
        with self.lock:
            self.ok[body] += 1
        return oms.ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def total(self) -> int:
        with self.lock:
            return sum(self.ok.values())


@pytest.mark.timeout(60)
def test_concurrent_offset_consumer_gets_everything_once_and_offsets_survive_a_restart(broker, ap, producer):
    topic, group = "OffModeOnce", "GOffModeOnce"
    create_topic(broker.addr, topic)
    first = [f"a{i}" for i in range(100)]
    rec = Counter()
    with ap.create_push_consumer(consumer_id=group, **FAST) as consumer:
        consumer.attach_queue(topic, rec)
        send(producer, topic, first)
        wait_until(lambda: rec.total() >= 100, what="100 messages")
        time.sleep(0.5)  # a duplicate would show up now
        assert {q.queue_id for q in consumer.assignments() if q.topic == topic} == {0, 1, 2, 3}
    assert rec.ok == collections.Counter(first)

    # the broker kept the offsets: a new consumer of the group starts after them, not at "first"
    second = [f"b{i}" for i in range(50)]
    send(producer, topic, second)
    again = Counter()
    with ap.create_push_consumer(consumer_id=group, **FAST) as consumer:
        consumer.attach_queue(topic, again)
        wait_until(lambda: again.total() >= 50, what="the 50 new messages")
        time.sleep(0.5)
    assert again.ok == collections.Counter(second)


@pytest.mark.timeout(60)
def test_failed_messages_are_sent_back_retried_and_dead_lettered(broker, ap, producer):
    topic, group = "OffModeRetry", "GOffModeRetry"
    create_topic(broker.addr, topic)
    rec = Counter(fail=lambda body: body == "bad" or (body == "flaky" and not rec.attempts["flaky"][1:]))
    with ap.create_push_consumer(consumer_id=group, max_reconsume_times=2, **FAST) as consumer:
        consumer.attach_queue(topic, rec)
        send(producer, topic, ["ok", "bad", "flaky"])
        wait_until(lambda: consumer.stats.dead_lettered >= 1 and rec.ok["flaky"] >= 1, what="dead letter and retry")
        assert any(q.topic == f"%RETRY%{group}" for q in consumer.assignments())  # subscribed automatically
    assert rec.attempts["bad"] == [0, 1, 2]  # the retry copies carry the reconsume count
    assert rec.attempts["flaky"] == [0, 1]
    assert rec.ok == collections.Counter({"ok": 1, "flaky": 1})
    dlq = [m for msgs in pull_all(broker.addr, f"%DLQ%{group}", queues=1).values() for m in msgs]
    assert [m.body for m in dlq] == [b"bad"]


class OrderlyProbe:
    """Orderly listeners of several members that record (queue, offset, member) and catch two members at once on
    one queue. ``poison`` offsets always fail (dead-lettered), ``suspend_once`` offsets fail on their first try."""

    def __init__(self, poison: set[tuple[int, int]], suspend_once: set[tuple[int, int]]) -> None:
        self.lock = threading.Lock()
        self.consumed: list[tuple[int, int, str]] = []
        self.active: dict[int, str] = {}
        self.overlaps: list[tuple[int, str, str]] = []
        self.tries: collections.Counter[tuple[int, int]] = collections.Counter()
        self.poison = poison
        self.suspend_once = suspend_once

    def listener(self, member: str) -> Callable[[oms.BytesMessage, oms.ConsumeContext], object]:
        def on(message: oms.BytesMessage, context: oms.ConsumeContext) -> object:
            key = (int(message.queue_id or 0), int(message.queue_offset or 0))
            with self.lock:
                other = self.active.get(key[0])
                if other is not None and other != member:
                    self.overlaps.append((key[0], other, member))
                self.active[key[0]] = member
                self.tries[key] += 1
                first_try = self.tries[key] == 1
            try:
                time.sleep(0.005)
                if key in self.poison or (key in self.suspend_once and first_try):
                    return oms.ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                with self.lock:
                    self.consumed.append((key[0], key[1], member))
                return oms.ConsumeOrderlyStatus.SUCCESS
            finally:
                with self.lock:
                    self.active.pop(key[0], None)

        return on

    def count(self) -> int:
        with self.lock:
            return len(self.consumed)


@pytest.mark.timeout(60)
def test_orderly_members_keep_queue_order_through_failures_and_a_rebalance(broker, ap, producer):
    topic, group, per_queue = "OffModeOrderly", "GOffModeOrderly", 40
    create_topic(broker.addr, topic)
    poison = {(1, 5)}
    probe = OrderlyProbe(poison, suspend_once={(0, 3), (2, 10), (3, 30)})
    orderly = {**FAST, "orderly": True, "suspend_current_queue_time_millis": 100, "max_reconsume_times": 2}
    for i in range(4):  # a batch goes to one queue; the producer round-robins batches
        send(producer, topic, [f"o{i}-{n}" for n in range(per_queue)])
    assert all(len(v) == per_queue for v in pull_all(broker.addr, topic).values())
    b = ap.create_push_consumer(consumer_id=group, pull_batch_size=8, **orderly)
    b.attach_queue(topic, probe.listener("B"))
    with ap.create_push_consumer(consumer_id=group, pull_batch_size=8, **orderly) as a:
        a.attach_queue(topic, probe.listener("A"))
        b.startup()
        try:
            wait_until(lambda: len(a.assignments()) and len(b.assignments()), what="both members assigned")
            wait_until(lambda: probe.count() >= 40, what="40 messages before the stop")
        finally:
            a.shutdown()  # mid-stream: B takes A's queues after A committed and unlocked them
        assert probe.count() < per_queue * 4 - len(poison)
        wait_until(lambda: probe.count() >= per_queue * 4 - len(poison), timeout=30, what="every message")
        time.sleep(0.5)  # a duplicate would show up now
        assert b.stats.dead_lettered == 1
    b.shutdown()

    assert probe.overlaps == []  # never two members on one queue at a time
    members = {m for _, _, m in probe.consumed}
    assert members == {"A", "B"}
    for qid in range(4):
        offsets = [o for q, o, _ in probe.consumed if q == qid]
        expected = [o for o in range(per_queue) if (qid, o) not in poison]
        assert offsets == expected, f"queue {qid} out of order or incomplete"
    # max_reconsume_times = 2: 3 tries by the member that dead-letters it (the count is local, as in RocketMQ, so
    # tries of a member that gave the queue up come on top)
    assert 3 <= probe.tries[(1, 5)] <= 6
    dlq = [m for msgs in pull_all(broker.addr, f"%DLQ%{group}", queues=1).values() for m in msgs]
    assert len(dlq) == 1


@pytest.mark.timeout(60)
def test_reset_by_time_while_running_re_consumes_from_the_new_position(broker, ap, producer):
    topic, group = "OffModeReset", "GOffModeReset"
    create_topic(broker.addr, topic)
    send(producer, topic, [f"old{i}" for i in range(20)])
    time.sleep(0.05)
    t0 = int(time.time() * 1000)
    time.sleep(0.05)
    newer = [f"new{i}" for i in range(20)]
    send(producer, topic, newer)
    rec = Counter()
    with ap.create_push_consumer(consumer_id=group, **FAST) as consumer:
        consumer.attach_queue(topic, rec)
        wait_until(lambda: rec.total() >= 40, what="40 messages")
        time.sleep(0.5)
        assert all(n == 1 for n in rec.ok.values())
        offsets = reset_by_time(broker.addr, group, topic, t0)
        assert sum(offsets.values()) == 20  # the older 20 stay behind the new position
        wait_until(lambda: all(rec.ok[b] >= 2 for b in newer), what="the newer messages again")
        time.sleep(0.5)
        assert consumer.stats.extra.get("offset_resets", 0) >= 1
    assert all(rec.ok[f"old{i}"] == 1 for i in range(20))  # before the reset time: not consumed again
    assert all(rec.ok[b] == 2 for b in newer)


CRASHING_MEMBER = textwrap.dedent(
    """
    import sys, time
    import oms

    addr, group, topic, out = sys.argv[1:5]
    log = open(out, "a", buffering=1)

    def on(message, context):
        log.write(f"{message.queue_id} {message.queue_offset} {time.monotonic()}\\n")
        time.sleep(0.01)
        return oms.ConsumeOrderlyStatus.SUCCESS

    with oms.get_messaging_access_point(f"oms:rocketmq://{addr}/") as ap:
        consumer = ap.create_push_consumer(
            consumer_id=group, consume_mode="PULL", orderly=True, consume_from_where="first", pull_batch_size=4,
            rebalance_interval=300, persist_consumer_offset_interval=300, long_polling_timeout=500,
        )
        consumer.attach_queue(topic, on)
        consumer.startup()
        time.sleep(120)  # until killed
    """
)


@pytest.mark.timeout(60)
def test_orderly_member_killed_its_queues_move_after_the_lease_in_order(broker, ap, producer, tmp_path: Path):
    """A member dies without unlocking (SIGKILL): the survivor gets its queues only after the leases expired,
    re-reads the committed offsets, and every queue is consumed in order (at least once)."""
    topic, group, per_queue = "OffModeCrash", "GOffModeCrash", 60
    create_topic(broker.addr, topic)
    for i in range(4):
        send(producer, topic, [f"c{i}-{n}" for n in range(per_queue)])
    out = tmp_path / "killed.log"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    args = [sys.executable, "-c", CRASHING_MEMBER, broker.addr, group, topic, str(out)]
    proc = subprocess.Popen(args, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    survivor: list[tuple[int, int, float]] = []
    lock = threading.Lock()

    def on(message: oms.BytesMessage, context: oms.ConsumeContext) -> object:
        with lock:
            survivor.append((int(message.queue_id or 0), int(message.queue_offset or 0), time.monotonic()))
        return oms.ConsumeOrderlyStatus.SUCCESS

    def killed_lines() -> list[tuple[int, int, float]]:
        text = out.read_text() if out.exists() else ""
        return [(int(q), int(o), float(t)) for q, o, t in (line.split() for line in text.splitlines() if line)]

    orderly = {**FAST, "orderly": True}
    try:
        wait_until(lambda: len(killed_lines()) >= 10, timeout=30, what="the first member consuming")
        with ap.create_push_consumer(consumer_id=group, pull_batch_size=4, **orderly) as b:
            b.attach_queue(topic, on)
            wait_until(lambda: len(b.assignments()) > 0 and len(killed_lines()) >= 30, what="both members")
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            killed_at = time.monotonic()
            wait_until(
                lambda: {(q, o) for q, o, _ in survivor} >= {(q, o) for q in range(4) for o in range(per_queue)},
                timeout=30,
                what="every message after the kill",
            )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    dead = killed_lines()
    taken_after_kill = 0
    for qid in range(4):
        theirs = [(o, t) for q, o, t in dead if q == qid]
        mine = [(o, t) for q, o, t in survivor if q == qid]
        for name, seq in (("killed", theirs), ("survivor", mine)):
            offsets = [o for o, _ in seq]
            assert offsets == sorted(set(offsets)), f"queue {qid} out of order at the {name} member"
        assert {o for o, _ in theirs} | {o for o, _ in mine} == set(range(per_queue))
        if theirs and mine:
            # one member after the other (the first started first), never both at once; no gap at the handover
            assert max(t for _, t in theirs) < min(t for _, t in mine), f"queue {qid}: two members at once"
            assert mine[0][0] <= theirs[-1][0] + 1
            taken_after_kill += min(t for _, t in mine) > killed_at
    assert taken_after_kill >= 1  # the killed member's queues moved to the survivor
