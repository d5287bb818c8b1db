"""The oms ResourceManager against a real cluster (one name server, two brokers): topics, routes, status, groups,
consumer progress and offset reset, message queries, dead-letter resend, typed errors, brokers without name server."""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2

import oms
from oms.admin import MessageView, ResourceManager
from orbitmq.errors import Code
from orbitmq.proto import consume_pb2, consume_pb2_grpc
from tests.broker.v2client import raw_client
from tests.conftest import BrokerFactory, BrokerHandle, NamesrvHandle
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

CLUSTER = "AdminCluster"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NamesrvHandle, BrokerHandle, BrokerHandle]]:
    factory = BrokerFactory(tmp_path_factory.mktemp("oms-admin"))
    try:
        ns = factory.namesrv()
        a = factory.broker(ns, name="admin-a", cluster=CLUSTER)
        b = factory.broker(ns, name="admin-b", cluster=CLUSTER)
        yield ns, a, b
    finally:
        factory.stop_all()


@pytest.fixture
def ap(cluster) -> Iterator[oms.MessagingAccessPoint]:
    with oms.get_messaging_access_point(f"oms:rocketmq://{cluster[0].addr}/", operation_timeout=5000) as point:
        yield point


@pytest.fixture
def rm(ap) -> Iterator[ResourceManager]:
    with ap.resource_manager() as manager:
        wait_until(lambda: len([b for b in manager.cluster_list() if b.is_master]) == 2, 20, what="two brokers")
        yield manager


def send_all(ap: oms.MessagingAccessPoint, topic: str, bodies: list[str], **kw) -> list[oms.SendResult]:
    with ap.create_producer(operation_timeout=10_000) as producer:
        return [producer.send(oms.BytesMessage(body, topic, **kw)) for body in bodies]


def broker_addr(cluster, name: str) -> str:
    return next(h.addr for h in cluster[1:] if h.name == name)


@pytest.mark.timeout(60)
def test_cluster_topics_route_and_status(cluster, ap, rm):
    brokers = rm.cluster_list(runtime=True)
    assert {(b.cluster, b.broker_name, b.broker_id) for b in brokers} == {
        (CLUSTER, "admin-a", 0),
        (CLUSTER, "admin-b", 0),
    }
    assert {b.addr for b in brokers} == {cluster[1].addr, cluster[2].addr}
    assert all(b.runtime["brokerName"] == b.broker_name for b in brokers)
    assert rm.uses_name_server()

    created = rm.create_topic("AdmTopic", read_queue_nums=3, write_queue_nums=3, cluster=CLUSTER)
    assert [(t.broker_name, t.read_queue_nums, t.perm_string) for t in created] == [
        ("admin-a", 3, "RW-"),
        ("admin-b", 3, "RW-"),
    ]
    assert "AdmTopic" in rm.list_topics()
    assert "AdmTopic" in rm.list_topics(cluster=CLUSTER)
    route = rm.topic_route("AdmTopic")
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == [
        ("admin-a", 3, 3, 6),
        ("admin-b", 3, 3, 6),
    ]
    assert {b.broker_name: b.master_addr for b in route.broker_datas} == {
        "admin-a": cluster[1].addr,
        "admin-b": cluster[2].addr,
    }

    # update keeps what it is not told to change; attributes merge, None removes one
    rm.update_topic("AdmTopic", attributes={"owner": "ops", "tier": "gold"})
    updated = rm.update_topic("AdmTopic", write_queue_nums=2, attributes={"tier": None})
    assert [(t.read_queue_nums, t.write_queue_nums, dict(t.attributes)) for t in updated] == [
        (3, 2, {"owner": "ops"}),
        (3, 2, {"owner": "ops"}),
    ]
    rm.update_topic("AdmTopic", write_queue_nums=3)

    # one broker only; RocketMQ 5's "+message.type" attribute sets the type
    fifo = rm.update_topic("AdmFifo", attributes={"+message.type": "FIFO"}, broker="admin-b", create=True)
    assert [(t.broker_name, t.message_type, t.read_queue_nums) for t in fifo] == [("admin-b", "FIFO", 8)]
    assert [q.broker_name for q in rm.topic_route("AdmFifo").queue_datas] == ["admin-b"]
    by_addr = rm.topic_configs("AdmFifo", broker=cluster[2].addr)
    assert [t.message_type for t in by_addr] == ["FIFO"]

    before = int(time.time() * 1000)
    results = send_all(ap, "AdmTopic", [f"s{i}" for i in range(12)])
    status = rm.topic_status("AdmTopic")
    assert len(status.queues) == 6
    assert sum(q.max_offset for q in status.queues) == len(results) == status.total_messages
    assert {q.broker_name for q in status.queues if q.max_offset > 0} == {"admin-a", "admin-b"}
    assert all(q.last_update_timestamp_ms >= before for q in status.queues if q.max_offset > 0)
    assert all(q.last_update_timestamp_ms == 0 for q in status.queues if q.max_offset == 0)

    assert rm.delete_topic("AdmFifo") == ["admin-b"], "deleted where it was; the other broker never had it"
    assert "AdmFifo" not in {t.topic for t in rm.topic_configs()}
    wait_until(lambda: "AdmFifo" not in rm.list_topics(), 10, what="the name server to forget AdmFifo")


@pytest.mark.timeout(60)
def test_groups_consumer_progress_and_reset_by_time(cluster, ap, rm):
    topic, group = "AdmProgress", "GAdmProgress"
    rm.create_topic(topic, read_queue_nums=2, write_queue_nums=2, cluster=CLUSTER)
    groups = rm.create_group(
        group, retry_max_times=3, allocate_strategy="CONSISTENT_HASH", allocate_options={"virtualNodeCnt": "20"}
    )
    assert [(g.broker_name, g.retry_max_times, g.allocate_strategy, dict(g.allocate_options)) for g in groups] == [
        ("admin-a", 3, "CONSISTENT_HASH", {"virtualNodeCnt": "20"}),
        ("admin-b", 3, "CONSISTENT_HASH", {"virtualNodeCnt": "20"}),
    ]
    changed = rm.update_group(group, orderly=True, broker="admin-a")
    assert [(g.orderly, g.retry_max_times, g.allocate_strategy) for g in changed] == [(True, 3, "CONSISTENT_HASH")]
    listed = {(g.broker_name, g.orderly) for g in rm.list_groups() if g.group == group}
    assert listed == {("admin-a", True), ("admin-b", False)}

    t0 = int(time.time() * 1000)
    time.sleep(0.05)
    sent = send_all(ap, topic, [f"p{i}" for i in range(10)])
    assert len(sent) == 10
    before = rm.consumer_progress(group, topic)
    assert before.total_lag == 10 and before.consumer_offset_total == 0
    assert all(q.consumer_offset == -1 for q in before.queues), "never committed"

    # consume three messages of one queue with raw v2 PullMessage and commit with UpdateOffset
    row = max(before.queues, key=lambda q: q.broker_offset)
    assert row.broker_offset >= 3
    with raw_client(broker_addr(cluster, row.broker_name)) as client:
        pulled = client.pull(group, topic, row.queue_id, 0, batch=3)
        assert len(pulled.messages) == 3
        assert client.update_offset(group, topic, row.queue_id, 3).code == definition_pb2.Code.OK
    after = rm.consumer_progress(group, topic)
    consumed = next(q for q in after.queues if (q.broker_name, q.queue_id) == (row.broker_name, row.queue_id))
    assert (consumed.consumer_offset, consumed.lag) == (3, row.broker_offset - 3)
    assert after.total_lag == 7
    assert {(q.topic, q.broker_name) for q in rm.consumer_progress(group).queues} == {(topic, row.broker_name)}

    # back to before the sends: everything is to be consumed again; to the future: nothing is
    resets = rm.reset_offset_by_time(group, topic, t0)
    assert len(resets) == 4 and all(r.offset == 0 for r in resets)
    assert rm.consumer_progress(group, topic).total_lag == 10
    resets = rm.reset_offset_by_time(group, topic, int(time.time() * 1000) + 60_000)
    tips = {(q.broker_name, q.queue_id): q.broker_offset for q in before.queues}
    assert {(r.broker_name, r.queue_id): r.offset for r in resets} == tips
    assert rm.consumer_progress(group, topic).total_lag == 0

    assert rm.delete_group(group) == ["admin-a", "admin-b"]
    assert group not in {g.group for g in rm.list_groups()}
    assert rm.consumer_progress(group, topic).consumer_offset_total == 0, "offsets went with the group"


@pytest.mark.timeout(60)
def test_query_by_id_key_and_offset(ap, rm):
    topic = "AdmQuery"
    rm.create_topic(topic, read_queue_nums=2, write_queue_nums=2, cluster=CLUSTER)
    start = int(time.time() * 1000)
    results = send_all(ap, topic, ["q0", "q1", "q2"], keys=["order-1"], tags="TagQ")
    send_all(ap, topic, ["other"], keys=["order-2"])

    found = rm.query_message_by_key(topic, "order-1")
    assert sorted(v.body for v in found) == [b"q0", b"q1", b"q2"]
    assert {v.unique_id for v in found} == {r.message_id for r in results}
    assert all(v.tags == "TagQ" and v.keys == ("order-1",) and v.topic == topic for v in found)
    assert [v.body for v in rm.query_message_by_key(topic, "order-1", max_num=2)] == [b"q1", b"q2"], "newest"
    assert rm.query_message_by_key(topic, "order-1", begin_ms=0, end_ms=start - 10_000) == []
    assert rm.query_message_by_key(topic, "no-such-key") == []

    view = found[1]
    by_offset_id = rm.query_message_by_id(view.msg_id)
    assert [(v.body, v.broker_name) for v in by_offset_id] == [(b"q1", view.broker_name)]
    by_unique_id = rm.query_message_by_id(view.unique_id, topic=topic)
    assert [v.msg_id for v in by_unique_id] == [view.msg_id]

    at = rm.query_message_by_offset(topic, view.queue_id, view.queue_offset, broker=view.broker_name)
    assert at == view
    with pytest.raises(oms.OMSMessageFormatException) as err:
        rm.query_message_by_offset(topic, view.queue_id, view.queue_offset)
    assert err.value.code == Code.BAD_REQUEST and "admin-a" in err.value.message, "two brokers serve it: say which"
    with pytest.raises(oms.OMSResourceNotExistException) as err:
        rm.query_message_by_offset(topic, view.queue_id, 999, broker=view.broker_name)
    assert err.value.code == Code.MESSAGE_NOT_FOUND


def dead_letter(cluster, rm: ResourceManager, group: str, view: MessageView) -> MessageView:
    """Dead-letter ``view`` now (RocketMQ's consumerSendMsgBack with delay level -1) and return the DLQ copy."""
    with grpc.insecure_channel(broker_addr(cluster, view.broker_name)) as channel:
        response = consume_pb2_grpc.ConsumeStub(channel).SendBack(
            consume_pb2.SendBackRequest(
                group=group, topic=view.topic, commitlog_offset=view.commitlog_offset, delay_level=-1
            ),
            timeout=10,
        )
    assert response.status.code == Code.OK and response.destination == f"%DLQ%{group}", response
    copies = rm.query_message_by_id(view.unique_id, topic=f"%DLQ%{group}")
    assert copies and copies[-1].topic == f"%DLQ%{group}"
    return copies[-1]


@pytest.mark.timeout(60)
def test_dead_letter_resend_round_trip(cluster, ap, rm):
    topic, group = "AdmResend", "GAdmResend"
    rm.create_topic(topic, read_queue_nums=1, write_queue_nums=1, cluster=CLUSTER)
    rm.create_group(group, retry_max_times=1)
    big = ("compressible body " * 600).encode()  # > 4 KiB: stored zlib-compressed, flagged as such
    send_all(ap, topic, ["dead-1"], keys=["dk-1"], tags="TagD")
    with ap.create_producer(operation_timeout=10_000) as producer:
        producer.send(oms.BytesMessage(big, topic, keys=["dk-2"]).put_user_headers("color", "red"))
    original = rm.query_message_by_key(topic, "dk-1")[0]
    letter = dead_letter(cluster, rm, group, original)
    assert letter.original_topic == topic and letter.body == b"dead-1"

    result = rm.resend_dead_letter(group, original.unique_id)
    assert (result.topic, result.message_id) == (topic, original.unique_id), "same message id, original topic"
    assert result.dead_letter.msg_id == letter.msg_id
    again = [v for v in rm.query_message_by_id(original.unique_id, topic=topic) if v.msg_id != original.msg_id]
    assert len(again) == 1
    resent = again[0]
    assert (resent.body, resent.tags, resent.keys, resent.reconsume_times) == (b"dead-1", "TagD", ("dk-1",), 0)
    assert (resent.broker_name, resent.queue_offset) == (result.broker_name, result.queue_offset)
    assert rm.query_message_by_id(letter.msg_id)[0].topic == f"%DLQ%{group}", "the DLQ copy stays"

    # by broker + offset in the DLQ queue; a compressed body keeps its encoding, so readers get it back
    big_view = rm.query_message_by_key(topic, "dk-2")[0]
    big_letter = dead_letter(cluster, rm, group, big_view)
    result = rm.resend_dead_letter(group, broker=big_letter.broker_name, offset=big_letter.queue_offset)
    assert result.message_id == big_view.unique_id
    with raw_client(broker_addr(cluster, result.broker_name)) as client:
        pulled = client.pull("GAdmReader", topic, 0, result.queue_offset, batch=1).messages[0]
    assert pulled.system_properties.body_encoding == definition_pb2.GZIP
    assert zlib.decompress(pulled.body) == big
    assert pulled.user_properties["color"] == "red"

    with pytest.raises(oms.OMSResourceNotExistException) as err:
        rm.resend_dead_letter(group, "0102FC00000000000000000000DEADBEEF")
    assert err.value.code == Code.MESSAGE_NOT_FOUND
    with pytest.raises(oms.OMSMessageFormatException):
        rm.resend_dead_letter(group)


@pytest.mark.timeout(60)
def test_errors_are_typed_with_the_broker_code(rm):
    cases = [
        (lambda: rm.topic_route("NoSuchTopic"), oms.OMSResourceNotExistException, Code.TOPIC_NOT_FOUND),
        (lambda: rm.topic_status("NoSuchTopic"), oms.OMSResourceNotExistException, Code.TOPIC_NOT_FOUND),
        (lambda: rm.update_topic("NoSuchTopic", perm=4), oms.OMSResourceNotExistException, Code.TOPIC_NOT_FOUND),
        (lambda: rm.delete_topic("NoSuchTopic"), oms.OMSResourceNotExistException, Code.TOPIC_NOT_FOUND),
        (lambda: rm.create_topic("bad topic!"), oms.OMSMessageFormatException, Code.ILLEGAL_TOPIC),
        (lambda: rm.create_topic("TBW102"), oms.OMSMessageFormatException, Code.ILLEGAL_TOPIC),
        (lambda: rm.create_topic("AdmBad", read_queue_nums=0), oms.OMSMessageFormatException, Code.BAD_REQUEST),
        (lambda: rm.create_topic("AdmBad", perm=0), oms.OMSMessageFormatException, Code.BAD_REQUEST),
        (lambda: rm.create_topic("AdmBad", message_type="LIFO"), oms.OMSMessageFormatException, Code.BAD_REQUEST),
        (lambda: rm.create_topic("AdmBad", cluster="Nowhere"), oms.OMSResourceNotExistException, Code.NOT_FOUND),
        (lambda: rm.create_topic("AdmBad", broker="nobody"), oms.OMSResourceNotExistException, Code.NOT_FOUND),
        (lambda: rm.create_group("bad group"), oms.OMSMessageFormatException, Code.ILLEGAL_CONSUMER_GROUP),
        (lambda: rm.create_group("GAdmBad", retry_max_times=-1), oms.OMSMessageFormatException, Code.BAD_REQUEST),
        (lambda: rm.create_group("GAdmBad", allocate_strategy="NOPE"), oms.OMSMessageFormatException, Code.BAD_REQUEST),
        (lambda: rm.update_group("GAdmNone"), oms.OMSResourceNotExistException, Code.CONSUMER_GROUP_NOT_FOUND),
        (lambda: rm.delete_group("GAdmNone"), oms.OMSResourceNotExistException, Code.CONSUMER_GROUP_NOT_FOUND),
        (lambda: rm.consumer_progress("G", "NoSuchTopic"), oms.OMSResourceNotExistException, Code.TOPIC_NOT_FOUND),
        (
            lambda: rm.reset_offset_by_time("G", "NoSuchTopic", 0),
            oms.OMSResourceNotExistException,
            Code.TOPIC_NOT_FOUND,
        ),
        (lambda: rm.query_message_by_id("0" * 32), oms.OMSResourceNotExistException, Code.MESSAGE_NOT_FOUND),
        (lambda: rm.query_message_by_id("not-an-offset-id"), oms.OMSMessageFormatException, Code.ILLEGAL_MESSAGE_ID),
        (lambda: rm.query_message_by_key("NoSuchTopic", "k"), oms.OMSResourceNotExistException, Code.TOPIC_NOT_FOUND),
    ]
    for call, kind, code in cases:
        with pytest.raises(kind) as err:
            call()
        assert err.value.code == code, (code, err.value)
        assert isinstance(err.value, oms.OMSRuntimeException)
    # the broker's own refusal keeps its code and says which broker refused
    with pytest.raises(oms.OMSMessageFormatException) as err:
        rm.create_group("GAdmBad", allocate_strategy="CONSISTENT_HASH", allocate_options={"virtualNodeCnt": "x"})
    assert err.value.code == Code.BAD_REQUEST and "admin-a" in str(err.value) and "virtualNodeCnt" in str(err.value)


@pytest.mark.timeout(60)
def test_create_topic_with_queue_type(rm):
    infos = rm.create_topic("AdmBatch", read_queue_nums=2, write_queue_nums=2, attributes={"+queue.type": "batchCQ"})
    assert [(i.broker_name, dict(i.attributes)) for i in infos] == [
        ("admin-a", {"queue.type": "BatchCQ"}),
        ("admin-b", {"queue.type": "BatchCQ"}),
    ]
    # create_topic overwrites without reading the current config: the brokers keep queue.type or refuse a change
    infos = rm.create_topic("AdmBatch", read_queue_nums=4, write_queue_nums=4)
    assert {(i.read_queue_nums, i.attributes["queue.type"]) for i in infos} == {(4, "BatchCQ")}
    with pytest.raises(oms.OMSMessageFormatException) as err:
        rm.create_topic("AdmBatch", attributes={"queue.type": "SimpleCQ"})
    assert err.value.code == Code.BAD_REQUEST and "queue.type" in str(err.value) and "cannot change" in str(err.value)
    assert "admin-" in str(err.value), "names the broker that refused"
    # update_topic reads the current config and refuses before writing anything
    for attributes, words in (
        ({"queue.type": "SimpleCQ"}, ["cannot change"]),
        ({"queue.type": None}, ["cannot be removed"]),
        ({"-queue.type": ""}, ["cannot be removed"]),
        ({"queue.type": "Nope"}, ["SimpleCQ", "BatchCQ"]),
    ):
        with pytest.raises(oms.OMSMessageFormatException) as err:
            rm.update_topic("AdmBatch", read_queue_nums=8, attributes=attributes)
        assert err.value.code == Code.BAD_REQUEST and all(w in str(err.value) for w in ["queue.type", *words])
    infos = rm.update_topic("AdmBatch", attributes={"+queue.type": "BatchCQ", "+owner": "ops"})
    assert {(i.read_queue_nums, tuple(sorted(i.attributes.items()))) for i in infos} == {
        (4, (("owner", "ops"), ("queue.type", "BatchCQ")))
    }
    assert all(i.attributes["queue.type"] == "BatchCQ" for i in rm.topic_configs("AdmBatch"))
    rm.delete_topic("AdmBatch")


@pytest.mark.timeout(60)
def test_brokers_without_name_server_and_lifecycle(cluster, ap):
    a, b = cluster[1], cluster[2]
    with oms.get_messaging_access_point(f"oms:rocketmq://{a.addr};{b.addr}/") as direct:
        rm = direct.resource_manager()
        assert not rm.uses_name_server()
        assert [(x.broker_name, x.addr) for x in rm.cluster_list()] == [("admin-a", a.addr), ("admin-b", b.addr)]
        created = rm.create_topic("AdmDirect", read_queue_nums=1, write_queue_nums=1, broker="admin-a")
        assert [t.broker_name for t in created] == ["admin-a"]
        assert "AdmDirect" in rm.list_topics()
        route = rm.topic_route("AdmDirect")
        assert [(d.broker_name, d.master_addr) for d in route.broker_datas] == [("admin-a", a.addr)]
        assert rm.topic_status("AdmDirect").queues[0].max_offset == 0
        assert rm.delete_topic("AdmDirect") == ["admin-a"]
    with pytest.raises(oms.OMSIllegalStateException):
        rm.list_topics()  # shut down with its access point

    manager = ap.resource_manager(operation_timeout=2000)
    assert manager.timeout_s == 2.0
    manager.shutdown()
    manager.shutdown()
    with pytest.raises(oms.OMSIllegalStateException):
        manager.startup()


@pytest.mark.timeout(30)
def test_unreachable_access_point_is_a_connection_error():
    with (
        oms.get_messaging_access_point("oms:rocketmq://127.0.0.1:1/", operation_timeout=1000) as point,
        point.resource_manager() as rm,
        pytest.raises((oms.OMSConnectionException, oms.OMSTimeOutException)),
    ):
        rm.list_topics()


@pytest.mark.timeout(90)
def test_resend_a_message_the_official_simple_consumer_dead_lettered(cluster, ap, rm):
    """The receive/ack path: one allowed delivery (retry_max_times=0), left unacknowledged, goes to %DLQ%."""
    from tests.pop.client_helpers import simple_consumer

    topic, group = "AdmPopDead", "GAdmPopDead"
    rm.create_topic(topic, read_queue_nums=1, write_queue_nums=1, broker="admin-a")
    rm.create_group(group, retry_max_times=0)
    [sent] = send_all(ap, topic, ["pop-poison"], tags="TagP")
    with simple_consumer(cluster[1].addr, group, topic, await_s=1) as consumer:
        deadline = time.monotonic() + 20
        got: list = []
        while not got and time.monotonic() < deadline:
            got = consumer.receive(1, 10)
        assert got and got[0].body == b"pop-poison"
        consumer.change_invisible_duration(got[0], 1)  # a nack: back in 1 s, but no attempt is left

        def dead() -> bool:
            try:
                return bool(rm.query_message_by_id(sent.message_id, topic=f"%DLQ%{group}"))
            except oms.OMSResourceNotExistException:
                return False

        deadline = time.monotonic() + 30
        while not dead():  # the broker dead-letters it when a receive would deliver it again
            assert time.monotonic() < deadline, "the message never reached the DLQ"
            assert consumer.receive(1, 10) == [], "no delivery is left for it"
    [letter] = rm.query_message_by_id(sent.message_id, topic=f"%DLQ%{group}")
    assert letter.original_topic == topic and letter.reconsume_times >= 1
    result = rm.resend_dead_letter(group, sent.message_id)
    assert (result.topic, result.broker_name, result.message_id) == (topic, "admin-a", sent.message_id)
    resent = rm.query_message_by_offset(topic, 0, result.queue_offset, broker="admin-a")
    assert (resent.body, resent.tags, resent.unique_id) == (b"pop-poison", "TagP", sent.message_id)


@pytest.mark.timeout(60)
def test_the_docs_example_runs(cluster, capsys):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "oms.md").read_text()
    section = doc.split("## Resource manager and mqadmin", 1)[1]
    snippet = section.split("```python\n", 1)[1].split("```", 1)[0]
    snippet = snippet.replace("127.0.0.1:9876", cluster[0].addr).replace("DefaultCluster", CLUSTER)
    exec(compile(snippet, "docs/oms.md", "exec"), {})
    assert capsys.readouterr().out.split() == ["0", "0"]
