"""The oms producer against a real broker process: every send form, read back with raw PullMessage."""

from __future__ import annotations

import collections
import threading
import time
from pathlib import Path

import pytest
from rocketmq.grpc_protocol import definition_pb2

import oms
from orbitmq.errors import Code
from tests.oms.helpers import bodies, create_topic, pull_all
from tests.pop.client_helpers import receive_until, simple_consumer

MiB = 1024 * 1024


@pytest.mark.timeout(60)
def test_sync_send_is_stored_with_its_headers(shared_broker, producer):
    msg = oms.BytesMessage(b"hello", "OmsSync", tags="TagA", keys=["order-1"], user_headers={"color": "red"})
    result = producer.send(msg)
    assert result.ok and result.status is oms.SendStatus.SEND_OK
    assert result.message_id == msg.message_id and result.topic == "OmsSync"
    assert result.queue.broker_name == "broker-1" and result.queue_offset >= 0
    stored = [m for msgs in pull_all(shared_broker.addr, "OmsSync").values() for m in msgs]
    assert len(stored) == 1
    got = stored[0]
    assert got.body == b"hello" and got.system_properties.message_id == result.message_id
    assert got.system_properties.tag == "TagA" and list(got.system_properties.keys) == ["order-1"]
    assert dict(got.user_properties) == {"color": "red"}
    assert got.system_properties.queue_offset == result.queue_offset


@pytest.mark.timeout(60)
def test_async_send_listeners_and_oneway(shared_broker, producer):
    listened: list[str] = []
    lock = threading.Lock()

    def listener(future: oms.Future[oms.SendResult]) -> None:
        with lock:
            listened.append(future.get().message_id)

    futures = [producer.send_async(oms.BytesMessage(f"a{i}", "OmsAsync")) for i in range(50)]
    for f in futures:
        f.add_listener(listener)
    ids = {f.get(20).message_id for f in futures}
    assert len(ids) == 50 and all(f.get_throwable() is None for f in futures)
    deadline = time.monotonic() + 10
    while len(listened) < 50 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(listened) == sorted(ids)  # each listener exactly once
    producer.send_oneway(oms.BytesMessage(b"oneway", "OmsAsync"))
    producer.send_oneway(oms.BytesMessage(b"", "OmsAsync"))  # invalid: logged, never raised
    deadline = time.monotonic() + 10
    while b"oneway" not in bodies(shared_broker.addr, "OmsAsync") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(bodies(shared_broker.addr, "OmsAsync")) == sorted([f"a{i}".encode() for i in range(50)] + [b"oneway"])


@pytest.mark.timeout(60)
def test_async_failure_reaches_the_future(access_point):
    with access_point.create_producer() as p:
        future = p.send_async(oms.BytesMessage(b"x", "OmsAsyncFail"), timeout=5)
        assert future.get(10).ok
        with pytest.raises(oms.OMSMessageFormatException):
            p.send_async(oms.BytesMessage(b"x", "bad topic"))  # invalid input raises at once


@pytest.mark.timeout(90)
def test_batch_send_splits_over_4_mib_and_keeps_order(shared_broker, producer):
    big = [oms.BytesMessage(bytes([i]) * MiB, "OmsBatch", user_headers={"i": i}) for i in range(9)]
    small = [oms.BytesMessage(f"s{i}", "OmsBatch2") for i in range(10)]
    mixed = [big[0], small[0], *big[1:], *small[1:]]
    # 1 MiB of a repeated byte compresses to almost nothing: turn compression off so 9 MiB really travel
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{shared_broker.addr}/") as ap,
        ap.create_producer(compress_msg_body_over_howmuch=0, operation_timeout=20_000) as p,
    ):
        results = p.send_batch(mixed)
    assert [r.message_id for r in results] == [m.message_id for m in mixed]
    assert all(r.ok for r in results)
    stored = pull_all(shared_broker.addr, "OmsBatch")
    got = sorted((int(m.user_properties["i"]), len(m.body)) for msgs in stored.values() for m in msgs)
    assert got == [(i, MiB) for i in range(9)]
    assert sorted(bodies(shared_broker.addr, "OmsBatch2")) == sorted(f"s{i}".encode() for i in range(10))
    # a batch request is stored in one queue: 9 MiB went as 3 requests (4 + 4 + 1)
    assert sorted(len(msgs) for msgs in stored.values() if msgs) == [1, 4, 4]


@pytest.mark.timeout(90)
def test_ordered_sends_keep_each_key_on_one_queue_in_order(shared_broker, producer):
    create_topic(shared_broker.addr, "OmsOrdered", "FIFO")
    selector = oms.SelectMessageQueueByHash()
    sent: dict[str, list[int]] = collections.defaultdict(list)
    queue_of: dict[str, set[int]] = collections.defaultdict(set)
    for seq in range(40):
        for order in ("order-a", "order-b", "order-c", "order-d", "order-e"):
            msg = oms.BytesMessage(f"{order}:{seq}", "OmsOrdered")
            result = producer.send(msg, selector=selector, arg=order)
            sent[order].append(seq)
            queue_of[order].add(result.queue.queue_id)
    assert all(len(q) == 1 for q in queue_of.values())  # the result reports one queue per key
    stored = pull_all(shared_broker.addr, "OmsOrdered")
    seen: dict[str, list[int]] = collections.defaultdict(list)
    for qid, msgs in stored.items():
        for m in msgs:
            order, seq = m.body.decode().split(":")
            assert qid in queue_of[order], "stored on the queue the selector chose"
            seen[order].append(int(seq))
    assert seen == sent  # per key: every message, in send order
    custom = producer.send(oms.BytesMessage(b"last", "OmsOrdered"), selector=lambda qs, m, arg: qs[-1])
    assert custom.queue.queue_id == 3 and stored[3] is not None
    assert [m.body for m in pull_all(shared_broker.addr, "OmsOrdered")[3]][-1] == b"last"


@pytest.mark.timeout(60)
def test_selector_sends_to_a_normal_topic_keep_rocketmq4_partition_order(shared_broker, producer):
    # the seeds' ordered example as written: TopicTest is a plain topic, the selector picks id % len(queues)
    topic = "OmsPartitionOrder"
    producer.send(oms.BytesMessage(b"created", topic))  # auto-created NORMAL, as the seeds' other examples do

    def by_order_id(queues: list[oms.MessageQueue], message: oms.BytesMessage, order_id: int) -> oms.MessageQueue:
        return queues[order_id % len(queues)]

    sent: dict[int, list[str]] = collections.defaultdict(list)
    for step in ("created", "paid", "shipped", "done"):
        for order_id in range(6):
            body = f"{order_id}:{step}"
            result = producer.send(oms.BytesMessage(body, topic, tags=step), selector=by_order_id, arg=order_id)
            assert result.queue.queue_id == order_id % 4, "the result names the queue the selector chose"
            sent[order_id].append(body)
    stored = pull_all(shared_broker.addr, topic)
    seen: dict[int, list[str]] = collections.defaultdict(list)
    for qid, msgs in stored.items():
        for m in msgs:
            if m.body == b"created":
                continue
            order_id = int(m.body.decode().split(":")[0])
            assert qid == order_id % 4, "stored in the chosen queue"
            assert not m.system_properties.HasField("message_group")  # a plain message, as RocketMQ 4 stores it
            seen[order_id].append(m.body.decode())
    assert seen == sent  # each queue read in order gives each order's steps in order
    batch = [oms.BytesMessage(f"9:b{i}", topic) for i in range(5)]  # RocketMQ's send(msgs, mq): one queue, in order
    results = producer.send_batch(batch, selector=by_order_id, arg=9)
    assert {r.queue.queue_id for r in results} == {1}
    in_q1 = [m.body for m in pull_all(shared_broker.addr, topic)[1] if m.body.startswith(b"9:")]
    assert in_q1 == [f"9:b{i}".encode() for i in range(5)]
    big = b"compressible " * 1000  # over the compression threshold: a plain message cannot carry it compressed
    with pytest.raises(oms.OMSNotSupportedException, match="compress"):
        producer.send(oms.BytesMessage(big, topic), selector=by_order_id, arg=1)


@pytest.mark.timeout(60)
def test_max_message_size_is_checked_before_sending(shared_broker, access_point):
    with access_point.create_producer(max_message_size=1024) as p:
        with pytest.raises(oms.OMSMessageFormatException) as err:
            p.send(oms.BytesMessage(b"x" * 1025, "OmsTooBig"))
        assert err.value.code == Code.MESSAGE_BODY_TOO_LARGE and "1024 bytes" in str(err.value)
        with pytest.raises(oms.OMSMessageFormatException):
            p.send_batch([oms.BytesMessage(b"ok", "OmsTooBig"), oms.BytesMessage(b"x" * 2000, "OmsTooBig")])
    assert bodies(shared_broker.addr, "OmsTooBig") == []  # nothing of the refused batch was sent


@pytest.mark.timeout(90)
def test_compressed_body_is_read_back_decompressed_by_the_official_consumer(shared_broker, producer):
    body = b"compress me " * 2000  # 24 KB, compresses well
    result = producer.send(oms.BytesMessage(body, "OmsZip", tags="z"))
    [stored] = [m for msgs in pull_all(shared_broker.addr, "OmsZip").values() for m in msgs]
    assert len(stored.body) < len(body)  # it travelled and was stored compressed
    assert stored.system_properties.body_encoding == definition_pb2.GZIP
    with simple_consumer(shared_broker.addr, "OmsZipReader", "OmsZip") as consumer:
        [got] = receive_until(consumer, 1, invisible_s=20)
        assert got.body == body and got.message_id == result.message_id
        consumer.ack(got)


@pytest.mark.timeout(60)
def test_bad_input_and_unknown_topics_raise_typed_exceptions(broker_factory):
    b = broker_factory.broker(options={"autoCreateTopicEnable": "false"})
    with oms.get_messaging_access_point(f"oms:rocketmq://{b.addr}/") as ap, ap.create_producer() as p:
        with pytest.raises(oms.OMSResourceNotExistException) as err:
            p.send(oms.BytesMessage(b"x", "NoSuchTopic"))
        assert err.value.code == Code.TOPIC_NOT_FOUND and "NoSuchTopic" in str(err.value)
        with pytest.raises(oms.OMSMessageFormatException) as err2:
            p.send(oms.BytesMessage(b"x", "bad/topic"))
        assert err2.value.code == Code.ILLEGAL_TOPIC
        future = p.send_async(oms.BytesMessage(b"x", "NoSuchTopic"))
        assert isinstance(future.get_throwable() or _wait_error(future), oms.OMSResourceNotExistException)


def _wait_error(future: oms.Future[oms.SendResult]) -> BaseException | None:
    try:
        future.get(10)
    except oms.OMSException as exc:
        return exc
    return None


@pytest.mark.timeout(60)
def test_interceptors_and_access_point_plugins_see_every_send(shared_broker, access_point):
    calls: list[tuple[str, str, object]] = []

    class Recorder:
        def oms_before_send(self, message):
            assert message.message_id  # ids are assigned before the hooks run
            calls.append(("before", message.get_body(str), None))

        def oms_after_send(self, message, result, error):
            calls.append(("after", message.get_body(str), result.message_id if result else type(error).__name__))

    class Tracing:
        @oms.hookimpl
        def oms_before_send(self, message):
            message.put_user_headers("trace", f"t-{message.message_id}")  # headers added here are sent
            if message.get_body(str) == "veto":
                raise PermissionError("vetoed by a plugin")

    access_point.plugin_manager.register(Tracing())
    recorder = Recorder()
    with access_point.create_producer() as p:
        p.add_interceptor(recorder)
        r1 = p.send(oms.BytesMessage(b"one", "OmsHooks"))
        r2 = p.send_async(oms.BytesMessage(b"two", "OmsHooks")).get(10)
        p.send_batch([oms.BytesMessage(b"three", "OmsHooks")])
        with pytest.raises(oms.OMSMessageFormatException):
            p.send(oms.BytesMessage(b"badtag", "OmsHooks", tags="a|b"))
        with pytest.raises(PermissionError):
            p.send(oms.BytesMessage(b"veto", "OmsHooks"))
        p.remove_interceptor(recorder)
        p.send(oms.BytesMessage(b"unseen", "OmsHooks"))
    assert ("before", "one", None) in calls and ("after", "one", r1.message_id) in calls
    assert ("after", "two", r2.message_id) in calls and ("before", "three", None) in calls
    assert ("after", "badtag", "OMSMessageFormatException") in calls  # refused after the hook: still reported
    assert not any(c[1] == "unseen" for c in calls)
    assert len([c for c in calls if c[0] == "after"]) == 4
    stored = {m.body: m for msgs in pull_all(shared_broker.addr, "OmsHooks").values() for m in msgs}
    assert set(stored) == {b"one", b"two", b"three", b"unseen"}
    assert stored[b"one"].user_properties["trace"] == f"t-{r1.message_id}"


@pytest.mark.timeout(60)
def test_lifecycle_is_idempotent_and_the_access_point_stops_everything(shared_broker):
    before = set(threading.enumerate())
    ap = oms.get_messaging_access_point(f"oms:rocketmq://{shared_broker.addr}/")
    p1 = ap.create_producer()
    with pytest.raises(oms.OMSIllegalStateException):
        p1.send(oms.BytesMessage(b"x", "OmsLife"))  # not started
    p1.startup()
    p1.startup()
    p2 = ap.create_producer().startup()
    p1.send(oms.BytesMessage(b"x", "OmsLife"))
    p2.send_async(oms.BytesMessage(b"y", "OmsLife")).get(10)
    ap.shutdown()
    ap.shutdown()
    assert not p1.is_running and not p2.is_running
    with pytest.raises(oms.OMSIllegalStateException):
        p2.send(oms.BytesMessage(b"z", "OmsLife"))
    with pytest.raises(oms.OMSIllegalStateException):
        ap.create_producer()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        leftover = [t for t in set(threading.enumerate()) - before if t.is_alive() and t.name.startswith("oms")]
        if not leftover:
            break
        time.sleep(0.05)
    assert leftover == []


@pytest.mark.timeout(60)
def test_the_quick_start_in_docs_runs(shared_broker, capsys):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "oms.md").read_text()
    snippet = doc.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(snippet.replace("127.0.0.1:9876", shared_broker.addr), "docs/oms.md", "exec"), {})
    out = capsys.readouterr().out
    assert "broker-1" in out and "sent " in out
    assert b"hello" in bodies(shared_broker.addr, "TopicTest")


@pytest.mark.timeout(60)
def test_oneway_send_right_before_shutdown_is_delivered(shared_broker, access_point):
    with access_point.create_producer() as p:
        p.send(oms.BytesMessage(b"warm", "OmsOnewayEnd"))
        p.send_oneway(oms.BytesMessage(b"last words", "OmsOnewayEnd"))
    deadline = time.monotonic() + 20
    while b"last words" not in bodies(shared_broker.addr, "OmsOnewayEnd") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sorted(bodies(shared_broker.addr, "OmsOnewayEnd")) == [b"last words", b"warm"]


@pytest.mark.timeout(60)
def test_send_columns_stores_what_send_batch_stores(shared_broker, access_point):
    with access_point.create_producer(compress_msg_body_over_howmuch=64) as p:
        results = p.send_columns(
            "OmsColumns",
            [b"c0", b"c1", b"c2"],
            tags=["TagA", None, ""],
            keys=["k1 k2", ["k3"], None],
            properties=[{"color": "red"}, None, {}],
        )
        assert [r.ok for r in results] == [True] * 3 and len({r.message_id for r in results}) == 3
        with pytest.raises(oms.OMSMessageFormatException, match="row 1") as info:
            p.send_columns("OmsColumns", [b"ok", b"bad tag"], tags=["fine", "a|b"])
        assert info.value.code == Code.ILLEGAL_MESSAGE_TAG
        with pytest.raises(oms.OMSMessageFormatException, match="row 0"):
            p.send_columns("OmsColumns", [b"x"], properties=[{"UNIQ_KEY": "forged"}])
        with pytest.raises(ValueError, match="tags has 1 rows, bodies has 2"):
            p.send_columns("OmsColumns", [b"a", b"b"], tags=["t"])
        big = b"compressible " * 40  # over the threshold: the call takes send_batch's path, compressed
        (compressed,) = p.send_columns("OmsColumns", [big], tags=["Big"])
        seen: list[bytes] = []

        class Recorder:
            def oms_before_send(self, message):
                seen.append(message.body)

        p.add_interceptor(Recorder())
        (observed,) = p.send_columns("OmsColumns", [b"hooked"])  # interceptors see messages: send_batch's path
        assert seen == [b"hooked"]
    stored = {
        m.system_properties.message_id: m for msgs in pull_all(shared_broker.addr, "OmsColumns").values() for m in msgs
    }
    assert set(stored) == {r.message_id for r in [*results, compressed, observed]}  # nothing of a refused call
    first, second, third = (stored[r.message_id] for r in results)
    assert first.body == b"c0" and first.system_properties.tag == "TagA"
    assert list(first.system_properties.keys) == ["k1", "k2"] and dict(first.user_properties) == {"color": "red"}
    assert list(second.system_properties.keys) == ["k3"] and not second.system_properties.HasField("tag")
    assert third.body == b"c2" and not third.system_properties.keys and not dict(third.user_properties)
    assert stored[compressed.message_id].system_properties.tag == "Big"
    assert stored[compressed.message_id].system_properties.body_encoding == definition_pb2.GZIP


@pytest.mark.timeout(60)
def test_send_columns_property_columns_store_what_row_properties_store(shared_broker, access_point):
    ids = ["q:0:1:0", None, "q:0:1:2"]
    with access_point.create_producer(compress_msg_body_over_howmuch=64) as p:
        results = p.send_columns(
            "OmsPropColumns",
            [b"r0", b"r1", b"r2"],
            properties=[{"color": "red", "idem": "the row's own"}, None, {}],
            property_columns={"idem": ids, "batch": ["b7"] * 3},
        )
        twins = p.send_columns(
            "OmsPropColumns",
            [b"r0", b"r1", b"r2"],
            properties=[
                {"color": "red", "idem": "q:0:1:0", "batch": "b7"},
                {"batch": "b7"},
                {"idem": "q:0:1:2", "batch": "b7"},
            ],
        )
        big = b"compressible " * 40  # over the threshold: send_batch's path, the same properties
        (compressed,) = p.send_columns(
            "OmsPropColumns", [big], properties=[{"a": "1"}], property_columns={"idem": ["x"]}
        )
        with pytest.raises(oms.OMSMessageFormatException, match="row 1: user property 'idem' contains control") as info:
            p.send_columns("OmsPropColumns", [b"a", b"b"], property_columns={"idem": ["ok", "bad\x01"]})
        assert info.value.code == Code.ILLEGAL_MESSAGE_PROPERTY_KEY
        with pytest.raises(oms.OMSMessageFormatException, match=r"property_columns: .*'UNIQ_KEY' is reserved"):
            p.send_columns("OmsPropColumns", [b"a"], property_columns={"UNIQ_KEY": ["forged"]})
        with pytest.raises(ValueError, match="property column 'idem' has 1 rows, bodies has 2"):
            p.send_columns("OmsPropColumns", [b"a", b"b"], property_columns={"idem": ["x"]})
    stored = {
        m.system_properties.message_id: dict(m.user_properties)
        for msgs in pull_all(shared_broker.addr, "OmsPropColumns").values()
        for m in msgs
    }
    assert [stored[r.message_id] for r in results] == [stored[r.message_id] for r in twins]
    assert stored[results[0].message_id] == {"color": "red", "idem": "q:0:1:0", "batch": "b7"}  # the column wins
    assert stored[results[1].message_id] == {"batch": "b7"}  # None: not on that row
    assert stored[compressed.message_id] == {"a": "1", "idem": "x"}
    assert len(stored) == 7  # nothing of a refused call
