"""The topic attribute ``queue.type`` (RocketMQ's CQType) on the admin side: checked and normalised by
``CreateOrUpdateTopic``, fixed once the topic exists, kept by updates that leave it out, SimpleCQ for auto-created
topics, and persisted in ``config/topics.json`` across a broker restart."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2

from broker.topic_config_manager import TopicConfigManager, settle_queue_type
from orbitmq.errors import Code, MQError
from orbitmq.proto import admin_pb2, admin_pb2_grpc
from orbitmq.route import QUEUE_TYPE_ATTRIBUTE, CQType, PermName, TopicConfig
from orbitmq.topics import AUTO_CREATE_TOPIC_KEY_TOPIC
from tests.broker.v2client import raw_client

OK = definition_pb2.Code.OK
BAD_REQUEST = definition_pb2.Code.BAD_REQUEST
QT = QUEUE_TYPE_ATTRIBUTE


def upsert(admin: admin_pb2_grpc.AdminStub, topic: str, queues: int = 2, **attributes: str) -> admin_pb2.TopicResponse:
    cfg = admin_pb2.TopicConfig(
        topic_name=topic, read_queue_nums=queues, write_queue_nums=queues, perm=6, attributes=attributes
    )
    response: admin_pb2.TopicResponse = admin.CreateOrUpdateTopic(
        admin_pb2.CreateOrUpdateTopicRequest(config=cfg), timeout=10
    )
    return response


def listed(admin: admin_pb2_grpc.AdminStub) -> dict[str, dict[str, str]]:
    topics = admin.ListTopics(admin_pb2.ListTopicsRequest(), timeout=10).topics
    return {t.topic_name: dict(t.attributes) for t in topics}


def refused(response: admin_pb2.TopicResponse, *words: str) -> bool:
    message = response.status.message
    return response.status.code == BAD_REQUEST and all(w in message for w in words)


@pytest.mark.timeout(120)
def test_queue_type_is_checked_normalised_immutable_and_persisted(broker_factory):
    b = broker_factory.broker()
    with grpc.insecure_channel(b.addr) as ch:
        admin = admin_pb2_grpc.AdminStub(ch)
        # unknown value: refused, naming the attribute and the allowed values; nothing is created
        r = upsert(admin, "QtBad", **{QT: "FancyCQ"})
        assert refused(r, "queue.type", "FancyCQ", "SimpleCQ", "BatchCQ"), r.status
        assert "QtBad" not in listed(admin)

        # stored in the canonical spelling
        r = upsert(admin, "QtBatch", owner="ops", **{QT: " batchcq "})
        assert r.status.code == OK, r.status
        assert dict(r.config.attributes) == {QT: "BatchCQ", "owner": "ops"}

        # an update without attributes keeps queue.type (other attributes are replaced, as before)
        r = upsert(admin, "QtBatch", queues=4)
        assert r.status.code == OK and r.config.read_queue_nums == 4
        assert dict(r.config.attributes) == {QT: "BatchCQ"}
        # the same value in another spelling is no change
        r = upsert(admin, "QtBatch", queues=4, **{QT: "BATCHCQ"})
        assert r.status.code == OK and dict(r.config.attributes) == {QT: "BatchCQ"}
        # a different value is refused and the topic is left as it was
        r = upsert(admin, "QtBatch", queues=8, **{QT: "SimpleCQ"})
        assert refused(r, "queue.type", "BatchCQ", "SimpleCQ", "cannot change"), r.status
        r = upsert(admin, "QtBatch", queues=8, **{QT: ""})  # empty means SimpleCQ: a change too
        assert refused(r, "cannot change"), r.status
        batch = next(t for t in admin.ListTopics(admin_pb2.ListTopicsRequest(), timeout=10).topics
                     if t.topic_name == "QtBatch")  # fmt: skip
        assert batch.read_queue_nums == 4 and dict(batch.attributes) == {QT: "BatchCQ"}

        # a topic created without the attribute is SimpleCQ: BatchCQ later is a change, SimpleCQ is not
        assert upsert(admin, "QtPlain").status.code == OK
        assert listed(admin)["QtPlain"] == {}
        assert refused(upsert(admin, "QtPlain", **{QT: "BatchCQ"}), "queue.type", "cannot change")
        r = upsert(admin, "QtPlain", **{QT: "simplecq"})
        assert r.status.code == OK and dict(r.config.attributes) == {QT: "SimpleCQ"}

        # auto-creation from TBW102 (route query, then a send) makes SimpleCQ topics
        with raw_client(b.addr) as c:
            assert c.route("QtAuto").status.code == OK
        assert listed(admin)["QtAuto"] == {}
        assert TopicConfig("QtAuto").cq_type is CQType.SIMPLE

    topics_json = json.loads((b.store / "config" / "topics.json").read_text())["topicConfigTable"]
    assert topics_json["QtBatch"]["attributes"] == {QT: "BatchCQ"}
    assert topics_json["QtPlain"]["attributes"] == {QT: "SimpleCQ"}

    b.restart()
    with grpc.insecure_channel(b.addr) as ch:
        admin = admin_pb2_grpc.AdminStub(ch)
        after = listed(admin)
        assert after["QtBatch"] == {QT: "BatchCQ"} and after["QtPlain"] == {QT: "SimpleCQ"}
        assert after["QtAuto"] == {}
        # still fixed after the restart, still kept by an update that leaves it out
        assert refused(upsert(admin, "QtBatch", **{QT: "SimpleCQ"}), "cannot change")
        r = upsert(admin, "QtBatch", queues=2)
        assert r.status.code == OK and dict(r.config.attributes) == {QT: "BatchCQ"}
        # deleting the topic frees the name: it can come back with another queue.type
        assert admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic="QtBatch"), timeout=10).status.code == OK
        r = upsert(admin, "QtBatch", **{QT: "SimpleCQ"})
        assert r.status.code == OK and dict(r.config.attributes) == {QT: "SimpleCQ"}


def test_settle_queue_type_rules():
    new = settle_queue_type(TopicConfig("T", attributes={QT: "batchCQ", "k": "v"}), None)
    assert new.attributes == {QT: "BatchCQ", "k": "v"} and new.cq_type is CQType.BATCH
    assert settle_queue_type(TopicConfig("T"), None).attributes == {}
    with pytest.raises(MQError) as bad:
        settle_queue_type(TopicConfig("T", attributes={QT: "Nope"}), None)
    assert bad.value.code == Code.BAD_REQUEST and "queue.type" in bad.value.message
    assert "SimpleCQ" in bad.value.message and "BatchCQ" in bad.value.message

    batch = TopicConfig("T", attributes={QT: "BatchCQ"})
    assert settle_queue_type(TopicConfig("T", 8, 8), batch).attributes == {QT: "BatchCQ"}
    assert settle_queue_type(TopicConfig("T", attributes={QT: "batchcq"}), batch).attributes == {QT: "BatchCQ"}
    for other in ("SimpleCQ", ""):
        with pytest.raises(MQError, match="cannot change") as changed:
            settle_queue_type(TopicConfig("T", attributes={QT: other}), batch)
        assert changed.value.code == Code.BAD_REQUEST
    plain = TopicConfig("T")
    assert settle_queue_type(TopicConfig("T"), plain).attributes == {}
    with pytest.raises(MQError, match="cannot change"):
        settle_queue_type(TopicConfig("T", attributes={QT: "BatchCQ"}), plain)


def test_auto_created_topics_are_simple_even_from_a_batch_template(tmp_path: Path):
    path = tmp_path / "topics.json"
    template = TopicConfig(
        AUTO_CREATE_TOPIC_KEY_TOPIC, 4, 4, int(PermName.PERM_READ | PermName.PERM_WRITE | PermName.PERM_INHERIT)
    )
    template.attributes[QT] = "BatchCQ"
    path.write_text(json.dumps({"topicConfigTable": {template.topic_name: template.to_dict()}}))
    manager = TopicConfigManager(path, 4, auto_create=True)
    manager.load()
    auto = manager.get_or_auto_create("AutoT")
    assert auto.cq_type is CQType.SIMPLE and QT not in auto.attributes
    # create_or_update returns what it stored, and refuses a change in process too
    stored = manager.create_or_update(TopicConfig("MadeT", attributes={QT: "batchcq"}))
    assert stored.attributes == {QT: "BatchCQ"} and manager.get("MadeT") == stored
    with pytest.raises(MQError, match="cannot change"):
        manager.create_or_update(TopicConfig("MadeT", attributes={QT: "SimpleCQ"}))
    reloaded = TopicConfigManager(path, 4, auto_create=True)
    reloaded.load()
    assert reloaded.get("MadeT") == stored and reloaded.get("AutoT") == auto


def test_a_hand_edited_bad_queue_type_stops_the_broker_naming_the_topic(tmp_path: Path):
    """An invalid ``queue.type`` in topics.json is refused at start (exit 2, the topic and value named), not answered
    with INTERNAL_SERVER_ERROR on every later SendBatch to the topic."""
    import subprocess
    import sys

    from orbitmq.config import ConfigError
    from tests.procs import free_port

    store = tmp_path / "store"
    path = store / "config" / "topics.json"
    path.parent.mkdir(parents=True)
    bad = TopicConfig("HandEditedT", attributes={QT: "TurboCQ"})
    path.write_text(json.dumps({"topicConfigTable": {bad.topic_name: bad.to_dict()}}))
    with pytest.raises(ConfigError, match=r"HandEditedT.*TurboCQ"):
        TopicConfigManager(path, 4, auto_create=True).load()
    args = [sys.executable, "-m", "broker.cli", "--store", str(store), "--port", str(free_port())]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "HandEditedT" in done.stderr and "queue.type" in done.stderr, done.stderr
