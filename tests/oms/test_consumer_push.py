"""The oms push consumer against a real broker: clustering (receive/ack), retries and DLQ, filters, orderly (FIFO
groups), broadcasting with local offsets, start positions, flow control, suspend/resume and shutdown."""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2

import oms
from orbitmq.proto import admin_pb2, admin_pb2_grpc
from tests.oms.helpers import create_topic, pull_all
from tests.waiting import wait_until

FAST = {"rebalance_interval": 500, "persist_consumer_offset_interval": 500}


def create_group(addr: str, group: str, *, retry_max_times: int = 16, orderly: bool = False) -> None:
    with grpc.insecure_channel(addr) as ch:
        cfg = admin_pb2.GroupConfig(
            group_name=group, consume_enable=True, retry_max_times=retry_max_times, consume_message_orderly=orderly
        )
        resp = admin_pb2_grpc.AdminStub(ch).CreateOrUpdateGroup(
            admin_pb2.CreateOrUpdateGroupRequest(config=cfg), timeout=10
        )
        assert resp.status.code == definition_pb2.Code.OK, resp.status


class Recorder:
    """A listener that records bodies (thread-safe) and can fail chosen bodies."""

    def __init__(self, fail: Callable[[oms.BytesMessage], bool] | None = None, delay_s: float = 0.0) -> None:
        self.bodies: list[str] = []
        self.attempts: dict[str, list[int]] = collections.defaultdict(list)
        self.lock = threading.Lock()
        self.fail = fail
        self.delay_s = delay_s

    def __call__(self, message: oms.BytesMessage, context: oms.ConsumeContext) -> object:
        body = message.get_body(str)
        with self.lock:
            self.attempts[body].append(message.reconsume_times)
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.fail is not None and self.fail(message):
            return oms.ConsumeConcurrentlyStatus.RECONSUME_LATER
        with self.lock:
            self.bodies.append(body)
        return oms.ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def count(self) -> int:
        with self.lock:
            return len(self.bodies)


def send(producer: oms.Producer, topic: str, bodies: list[str], **kw: object) -> None:
    producer.send_batch([oms.BytesMessage(b, topic, **kw) for b in bodies])  # type: ignore[arg-type]


@pytest.mark.timeout(60)
def test_concurrent_push_consumer_gets_everything_once_with_hooks(access_point, producer):
    seen: list[tuple[str, int]] = []

    class Hooks:
        def oms_before_consume(self, messages):
            seen.append(("before", len(messages)))

        def oms_after_consume(self, messages, success):
            seen.append(("after" if success else "failed", len(messages)))

    rec = Recorder()
    consumer = access_point.create_push_consumer(consumer_id="GPushOnce", consume_from_where="first", **FAST)
    consumer.attach_queue("OmsPushOnce", rec).add_interceptor(Hooks())
    with consumer:
        expected = [f"m{i}" for i in range(200)]
        send(producer, "OmsPushOnce", expected)
        wait_until(lambda: rec.count() >= 200, what="200 messages")
        time.sleep(0.3)  # a duplicate would show up now
        assert sorted(rec.bodies) == sorted(expected)
        stats = consumer.stats
        assert stats.acked == 200 and stats.consumed_failed == 0
        assert consumer.assignments() == [oms.MessageQueue("OmsPushOnce", "broker-1", -1)]
    assert seen.count(("before", 1)) == 200 and seen.count(("after", 1)) == 200
    names = {t.name for t in threading.enumerate()}
    assert not any(n.startswith(f"oms-consumer-{id(consumer):x}") for n in names), "listener threads stop"


@pytest.mark.timeout(60)
def test_two_consumers_of_one_group_split_the_work(access_point, producer):
    a, b = Recorder(delay_s=0.002), Recorder(delay_s=0.002)
    with (
        access_point.create_push_consumer(consumer_id="GPushSplit", consume_from_where="first", **FAST) as ca,
        access_point.create_push_consumer(consumer_id="GPushSplit", consume_from_where="first", **FAST) as cb,
    ):
        ca.attach_queue("OmsPushSplit", a)
        cb.attach_queue("OmsPushSplit", b)
        expected = [f"s{i}" for i in range(400)]
        for i in range(0, 400, 50):
            send(producer, "OmsPushSplit", expected[i : i + 50])
            time.sleep(0.02)
        wait_until(lambda: a.count() + b.count() >= 400, what="400 messages")
        time.sleep(0.3)
        assert sorted(a.bodies + b.bodies) == sorted(expected), "each message once, in one of the two"
        assert a.count() > 0 and b.count() > 0, (a.count(), b.count())


@pytest.mark.timeout(60)
def test_failing_message_comes_again_with_attempt_plus_one_then_goes_to_the_dlq(shared_broker, access_point, producer):
    create_group(shared_broker.addr, "GPushRetry", retry_max_times=2)  # 3 deliveries, then %DLQ%GPushRetry
    rec = Recorder(fail=lambda m: m.get_body(str) == "bad")
    with access_point.create_push_consumer(
        consumer_id="GPushRetry", consume_from_where="first", retry_backoff_ms=[200, 300], **FAST
    ) as consumer:
        consumer.attach_queue("OmsPushRetry", rec)
        send(producer, "OmsPushRetry", ["ok1", "bad", "ok2"])
        wait_until(lambda: len(rec.attempts["bad"]) >= 3 and rec.count() >= 2, what="three attempts")
        dlq = "%DLQ%GPushRetry"
        wait_until(lambda: any(pull_all(shared_broker.addr, dlq, queues=1).values()), what="the dead letter")
        time.sleep(0.5)
        assert rec.attempts["bad"] == [0, 1, 2], "REDELIVERED_NUMBER counts the deliveries"
        assert sorted(rec.bodies) == ["ok1", "ok2"]
        assert consumer.stats.retried == 2 and consumer.stats.dead_lettered == 1  # the group's max, from Settings
    dead = [m for msgs in pull_all(shared_broker.addr, dlq, queues=1).values() for m in msgs]
    assert [m.body for m in dead] == [b"bad"]


@pytest.mark.timeout(60)
def test_client_side_dead_lettering(shared_broker, access_point, producer):
    """``max_reconsume_times`` below the group's, and ``delay_level_when_next_consume = -1``, forward to the DLQ."""

    def listener(message: oms.BytesMessage, context: oms.ConsumeContext) -> object:
        body = message.get_body(str)
        with lock:
            attempts[body].append(message.reconsume_times)
        if body == "straight-to-dlq":
            context.delay_level_when_next_consume = -1
            return False
        return body != "twice"

    lock = threading.Lock()
    attempts: dict[str, list[int]] = collections.defaultdict(list)
    with access_point.create_push_consumer(
        consumer_id="GPushClientDlq", consume_from_where="first", max_reconsume_times=1, retry_backoff_ms=[100]
    ) as consumer:
        consumer.attach_queue("OmsPushClientDlq", listener)
        send(producer, "OmsPushClientDlq", ["twice", "straight-to-dlq", "fine"])
        wait_until(lambda: consumer.stats.dead_lettered >= 2, what="two dead letters")
    assert attempts == {"twice": [0, 1], "straight-to-dlq": [0], "fine": [0]}
    dead = pull_all(shared_broker.addr, "%DLQ%GPushClientDlq", queues=1)[0]
    assert sorted(m.body for m in dead) == [b"straight-to-dlq", b"twice"]


@pytest.mark.timeout(60)
def test_tag_and_sql92_expressions(access_point, producer):
    tags, sql = Recorder(), Recorder()
    with (
        access_point.create_push_consumer(consumer_id="GPushTags", consume_from_where="first") as by_tag,
        access_point.create_push_consumer(consumer_id="GPushSql", consume_from_where="first") as by_sql,
    ):
        by_tag.attach_queue("OmsPushFilter", tags, "TagA || TagB")
        by_sql.attach_queue("OmsPushFilter", sql, oms.MessageSelector.by_sql("n > 5 AND color = 'red'"))
        for i in range(12):
            tag = ["TagA", "TagB", "TagC"][i % 3]
            msg = oms.BytesMessage(f"{tag}-{i}", "OmsPushFilter", tags=tag)
            msg.put_user_headers("n", i).put_user_headers("color", "red" if i % 2 else "blue")
            producer.send(msg)
        wait_until(lambda: tags.count() >= 8 and sql.count() >= 3, what="filtered messages")
        time.sleep(0.5)
    assert sorted(tags.bodies) == sorted(f"{['TagA', 'TagB', 'TagC'][i % 3]}-{i}" for i in range(12) if i % 3 != 2)
    assert sorted(sql.bodies) == sorted(f"{['TagA', 'TagB', 'TagC'][i % 3]}-{i}" for i in (7, 9, 11))


@pytest.mark.timeout(60)
def test_orderly_consumer_keeps_message_group_order_and_suspend_redelivers_the_same_message(
    shared_broker, access_point, producer
):
    create_topic(shared_broker.addr, "OmsPushOrderly", "FIFO")
    create_group(shared_broker.addr, "GPushOrderly", orderly=True)
    log: list[tuple[str, int, int]] = []  # (group, index, redelivered number) in consumption order
    lock = threading.Lock()

    def listener(message: oms.BytesMessage, context: oms.ConsumeContext) -> object:
        group, index = message.get_body(str).split(":")
        with lock:
            log.append((group, int(index), message.reconsume_times))
        if (group, index) == ("g1", "3") and message.reconsume_times == 0:
            return oms.ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
        time.sleep(0.001)
        return oms.ConsumeOrderlyStatus.SUCCESS

    # sent before the consumer starts: one receive then holds later messages of g1 behind the suspended one
    for i in range(8):
        for g in ("g0", "g1", "g2"):
            producer.send(oms.BytesMessage(f"{g}:{i}", "OmsPushOrderly", sharding_key=g))
    with access_point.create_push_consumer(
        consumer_id="GPushOrderly", orderly=True, consume_from_where="first", suspend_current_queue_time_millis=300
    ) as consumer:
        consumer.attach_queue("OmsPushOrderly", listener)
        assert consumer.policy.fifo
        wait_until(lambda: len(log) >= 25, what="25 consumptions")
        time.sleep(0.3)
        # g1:4.. came in the same receive and went back unconsumed: delivered again, yet REDELIVERED_NUMBER 0
        assert consumer.stats.received > 25
    for g in ("g0", "g1", "g2"):
        done = [(i, r) for grp, i, r in log if grp == g]
        expected = [(i, 0) for i in range(8)]
        if g == "g1":
            expected.insert(4, (3, 1))  # the suspended message again, before g1:4
        assert done == expected, (g, done)


@pytest.mark.timeout(90)
def test_message_group_order_holds_through_failures_and_a_member_leaving(shared_broker, access_point, producer):
    """Two orderly members of a FIFO group; one fails some messages (retried in place), then stops mid-stream; the
    other takes over. Each message group is consumed strictly in order across both, every message at least once."""
    create_topic(shared_broker.addr, "OmsPushFifoRebal", "FIFO")
    create_group(shared_broker.addr, "GPushFifoRebal", orderly=True)
    log: list[tuple[str, str, int]] = []  # (member, group, index) of successful consumptions, in order
    lock = threading.Lock()
    failed_once: set[str] = set()

    def member(name: str) -> Callable[[oms.BytesMessage, oms.ConsumeContext], object]:
        def listener(message: oms.BytesMessage, context: oms.ConsumeContext) -> object:
            body = message.get_body(str)
            group, index = body.split(":")
            if int(index) % 7 == 3 and body not in failed_once:
                failed_once.add(body)
                return oms.ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
            time.sleep(0.002)
            with lock:
                log.append((name, group, int(index)))
            return oms.ConsumeOrderlyStatus.SUCCESS

        return listener

    groups = [f"k{g}" for g in range(6)]
    opts = {"orderly": True, "consume_from_where": "first", "suspend_current_queue_time_millis": 200, **FAST}
    with access_point.create_push_consumer(consumer_id="GPushFifoRebal", **opts) as survivor:
        survivor.attach_queue("OmsPushFifoRebal", member("survivor"))
        # the leaver is another client (its own access point), as another process would be
        with oms.get_messaging_access_point(f"oms:rocketmq://{shared_broker.addr}/") as other_ap:
            leaver = other_ap.create_push_consumer(consumer_id="GPushFifoRebal", **opts)
            leaver.attach_queue("OmsPushFifoRebal", member("leaver"))
            leaver.startup()
            try:
                for i in range(20):
                    for g in groups:
                        producer.send(oms.BytesMessage(f"{g}:{i}", "OmsPushFifoRebal", sharding_key=g))
                wait_until(lambda: len(log) >= 40, what="40 consumptions before the member leaves")
            finally:
                leaver.shutdown()
        for i in range(20, 30):
            for g in groups:
                producer.send(oms.BytesMessage(f"{g}:{i}", "OmsPushFifoRebal", sharding_key=g))
        wait_until(lambda: {(g, i) for _, g, i in log} >= {(g, i) for g in groups for i in range(30)}, 60, "all")
    for g in groups:
        seen = [i for _, grp, i in log if grp == g]
        first = sorted(set(seen), key=seen.index)
        assert first == list(range(30)), (g, seen)  # first consumptions in order, none skipped
        # a message whose ack was cut off by the shutdown may come again right away, never after a later one
        assert all(b >= a for a, b in itertools.pairwise(seen)), (g, seen)
    assert {m for m, _, _ in log} == {"survivor", "leaver"}


@pytest.mark.timeout(30)
def test_orderly_clustering_needs_a_fifo_group(access_point):
    consumer = access_point.create_push_consumer(consumer_id="GPushNotFifo", orderly=True)
    consumer.attach_queue("OmsPushNotFifo", Recorder())
    with pytest.raises(oms.OMSIllegalStateException, match="FIFO group"):
        consumer.startup()
    assert not consumer.is_running


@pytest.mark.timeout(60)
def test_broadcasting_every_consumer_gets_everything_and_offsets_persist_locally(tmp_path, access_point, producer):
    dir_a, dir_b = tmp_path / "a", tmp_path / "b"

    def make(store: Path, rec: Recorder) -> oms.PushConsumer:
        c = access_point.create_push_consumer(
            consumer_id="GPushBroadcast",
            message_model=oms.MessageModel.BROADCASTING,
            consume_from_where="first",
            offset_store_dir=store,
            **FAST,
        )
        return c.attach_queue("OmsPushBroadcast", rec)

    a, b = Recorder(), Recorder()
    first = [f"b{i}" for i in range(20)]
    with make(dir_a, a), make(dir_b, b) as cb:
        send(producer, "OmsPushBroadcast", first)
        wait_until(lambda: a.count() >= 20 and b.count() >= 20, what="both consumers got all")
        assert sorted(a.bodies) == sorted(b.bodies) == sorted(first)
        assert len(cb.assignments()) == 4  # every queue, not an assignment
    stored = json.loads((dir_a / "DEFAULT" / "GPushBroadcast" / "offsets.json").read_text())
    assert sum(item["offset"] for item in stored["offsets"]) == 20, stored
    # a restart continues from the local offsets: only what was sent meanwhile
    second = [f"c{i}" for i in range(10)]
    send(producer, "OmsPushBroadcast", second)
    again = Recorder()
    with make(dir_a, again):
        wait_until(lambda: again.count() >= 10, what="the new messages")
        time.sleep(0.5)
    assert sorted(again.bodies) == sorted(second)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("model", ["CLUSTERING", "BROADCASTING"])
def test_consume_from_first_last_or_timestamp_for_a_new_group(tmp_path, access_point, producer, model):
    topic = f"OmsPushFrom{model.title()}"
    send(producer, topic, [f"old{i}" for i in range(6)])
    time.sleep(0.05)
    middle = int(time.time() * 1000)
    time.sleep(0.05)
    send(producer, topic, [f"new{i}" for i in range(6)])
    recs = {w: Recorder() for w in ("first", "last", "timestamp")}
    consumers = []
    for where, rec in recs.items():
        c = access_point.create_push_consumer(
            consumer_id=f"GPushFrom{model.title()}{where.title()}",
            message_model=model,
            consume_from_where=where,
            consume_timestamp=middle,
            offset_store_dir=tmp_path,
            **FAST,
        )
        consumers.append(c.attach_queue(topic, rec).startup())
    try:
        wait_until(lambda: recs["first"].count() >= 12 and recs["timestamp"].count() >= 6, what="first/timestamp")
        send(producer, topic, [f"late{i}" for i in range(3)])
        wait_until(lambda: recs["last"].count() >= 3 and recs["first"].count() >= 15, what="late messages")
        time.sleep(0.3)
    finally:
        for c in consumers:
            c.shutdown()
    assert sorted(recs["last"].bodies) == sorted(f"late{i}" for i in range(3))
    assert sorted(recs["timestamp"].bodies) == sorted([f"new{i}" for i in range(6)] + [f"late{i}" for i in range(3)])
    assert len(recs["first"].bodies) == 15


@pytest.mark.timeout(60)
def test_flow_control_and_suspend_resume(access_point, producer):
    gate = threading.Event()
    held = Recorder()

    def slow(message: oms.BytesMessage, context: oms.ConsumeContext) -> object:
        gate.wait(20)
        return held(message, context)

    with access_point.create_push_consumer(
        consumer_id="GPushFlow", consume_from_where="first", pull_threshold_for_queue=5, consume_thread_nums=2
    ) as consumer:
        consumer.attach_queue("OmsPushFlow", slow)
        send(producer, "OmsPushFlow", [f"f{i}" for i in range(40)])
        wait_until(lambda: consumer.stats.flow_controlled > 0, what="flow control")
        assert consumer.stats.received <= 5, "no more than pull_threshold_for_queue messages are held"
        consumer.suspend()
        gate.set()
        wait_until(lambda: held.count() == consumer.stats.received, what="held messages consumed")
        time.sleep(0.3)
        paused_at = held.count()
        assert consumer.is_suspended and paused_at < 40
        time.sleep(0.3)
        assert held.count() == paused_at, "a suspended consumer receives nothing"
        consumer.resume()
        wait_until(lambda: held.count() >= 40, what="all after resume")
    assert sorted(held.bodies) == sorted(f"f{i}" for i in range(40))


@pytest.mark.timeout(60)
def test_the_consumer_quick_start_in_docs_runs(shared_broker, producer, capsys):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "oms.md").read_text()
    snippet = doc.split("## Consumers", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    producer.send(oms.BytesMessage(b"for the docs", "TopicTest", tags="TagA"))
    exec(compile(snippet.replace("127.0.0.1:9876", shared_broker.addr), "docs/oms.md", "exec"), {})
    assert "got " in capsys.readouterr().out


@pytest.mark.timeout(90)
def test_assignments_follow_group_membership_across_two_brokers(broker_factory):
    ns = broker_factory.namesrv()
    brokers = [broker_factory.broker(ns, name=n) for n in ("broker-a", "broker-b")]
    topic = "OmsPushMembers"
    for b in brokers:
        create_topic(b.addr, topic)
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap:

        def consumer(rec: Recorder) -> oms.PushConsumer:
            c = ap.create_push_consumer(consumer_id="GPushMembers", consume_from_where="first", rebalance_interval=300)
            return c.attach_queue(topic, rec)

        def brokers_of(c: oms.PushConsumer) -> set[str]:
            return {q.broker_name for q in c.assignments()}

        ra, rb = Recorder(), Recorder()
        with consumer(ra) as a:
            wait_until(lambda: brokers_of(a) == {"broker-a", "broker-b"}, what="route of both brokers")
            with consumer(rb) as b:
                wait_until(lambda: len(brokers_of(a)) == 1 and len(brokers_of(b)) == 1, what="one broker each")
                assert brokers_of(a) != brokers_of(b)
                with ap.create_producer() as p:
                    for i in range(40):
                        p.send(oms.BytesMessage(f"x{i}", topic))
                wait_until(lambda: ra.count() + rb.count() >= 40, what="all messages")
                assert ra.count() > 0 and rb.count() > 0
            wait_until(lambda: len(brokers_of(a)) == 2, what="the remaining consumer takes both brokers again")
        assert sorted(ra.bodies + rb.bodies) == sorted(f"x{i}" for i in range(40))


@pytest.mark.timeout(60)
def test_async_def_listeners_run_on_the_client_loop(access_point, producer):
    got: list[str] = []

    async def listener(message: oms.BytesMessage, context: oms.ConsumeContext) -> object:
        await asyncio.sleep(0.001)
        got.append(message.get_body(str))
        context.ack()
        return None

    with access_point.create_push_consumer(
        consumer_id="GPushAsync", consume_from_where="first", auto_ack=False
    ) as consumer:
        consumer.attach_queue("OmsPushAsync", listener)
        send(producer, "OmsPushAsync", [f"y{i}" for i in range(20)])
        wait_until(lambda: len(got) >= 20, what="20 messages")
        time.sleep(0.2)
        assert consumer.stats.acked == 20
    assert sorted(got) == sorted(f"y{i}" for i in range(20))


@pytest.mark.timeout(60)
def test_a_consumer_started_before_its_topic_gets_it_without_waiting_a_rebalance(broker_factory, caplog):
    ns = broker_factory.namesrv()
    broker_factory.broker(ns)  # through a name server the route exists before the broker has the topic
    topic = "OmsPushTopicLater"
    got: list[bytes] = []
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.resource_manager() as rm:
        wait_until(lambda: len(rm.cluster_list()) == 1, 20, what="the broker registered with the name server")
    with (
        caplog.at_level("DEBUG", logger="oms"),
        oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap,
        # a rebalance round a minute away: only the prompt re-query of a missing topic can deliver in time
        ap.create_push_consumer(consumer_id="GPushEarly", rebalance_interval=60_000) as consumer,
        ap.create_producer() as producer,
    ):
        consumer.attach_queue(topic, lambda m, ctx: got.append(m.body))
        consumer.startup()
        producer.send(oms.BytesMessage(b"after the consumer", topic))
        wait_until(lambda: got == [b"after the consumer"], 20, "the message of a topic created after the consumer")
    transient = [r for r in caplog.records if "TOPIC_NOT_FOUND" in r.getMessage()]
    assert transient, "the consumer did start before the topic existed"
    assert all(r.levelname == "DEBUG" for r in transient), [r.getMessage() for r in transient]
