"""Unit tests of the broker's small parts: config loading, metadata tables, long polling, tag filter, validation."""

from __future__ import annotations

import asyncio
import json

import pytest

from broker.config import load_broker_settings
from broker.consumer_offset_manager import ConsumerOffsetManager
from broker.filter import TagFilter
from broker.long_polling import LongPollingService
from broker.store.config import FlushDiskType
from broker.store.message import tags_hash_code
from broker.subscription_group_manager import SubscriptionGroupConfig, SubscriptionGroupManager
from broker.topic_config_manager import TopicConfigManager
from orbitmq.errors import Code, MQError
from orbitmq.route import PermName
from orbitmq.validation import (
    MessageKind,
    check_message_type,
    validate_group,
    validate_message_group,
    validate_topic,
)


def test_broker_conf_and_overrides(tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerClusterName = C1\nbrokerName=broker-x\nbrokerId=0\nlistenPort=9000\n"
        "flushDiskType=SYNC_FLUSH\nautoCreateTopicEnable=false\nmappedFileSizeCommitLog=1048576\n"
        "namesrvAddr=10.0.0.1:9876;10.0.0.2:9876\n"
    )
    s = load_broker_settings(conf, {"listenPort": "9100", "storePathRootDir": str(tmp_path / "st")})
    assert s.broker.brokerClusterName == "C1" and s.broker.brokerName == "broker-x"
    assert s.broker.listenPort == 9100  # the override wins
    assert s.broker.autoCreateTopicEnable is False
    assert s.broker.namesrv_list() == ["10.0.0.1:9876", "10.0.0.2:9876"]
    assert s.store.flushDiskType is FlushDiskType.SYNC_FLUSH
    assert s.store.mappedFileSizeCommitLog == 1048576
    assert s.store.root == tmp_path / "st"


def test_topic_table_auto_create_and_persist(tmp_path):
    path = tmp_path / "config" / "topics.json"
    changes = []
    topics = TopicConfigManager(path, 4, auto_create=True)
    topics.load()
    topics.add_change_listener(lambda: changes.append(1))
    tc = topics.get_or_auto_create("NewT")
    assert (tc.read_queue_nums, tc.write_queue_nums) == (4, 4)
    assert not tc.perm & PermName.PERM_INHERIT and PermName.is_writeable(tc.perm)
    assert changes == [1]
    again = TopicConfigManager(path, 4, auto_create=True)
    again.load()
    assert again.get("NewT") == tc
    assert json.loads(path.read_text())["topicConfigTable"]["NewT"]["readQueueNums"] == 4
    off = TopicConfigManager(tmp_path / "other.json", 4, auto_create=False)
    off.load()
    with pytest.raises(MQError) as err:
        off.get_or_auto_create("NewT")
    assert err.value.code == Code.TOPIC_NOT_FOUND


def test_groups_and_offsets_persist(tmp_path):
    groups = SubscriptionGroupManager(tmp_path / "g.json")
    groups.load()
    groups.create_or_update(SubscriptionGroupConfig("G1", retry_max_times=3, consume_message_orderly=True))
    reloaded = SubscriptionGroupManager(tmp_path / "g.json")
    reloaded.load()
    assert reloaded.get("G1") == SubscriptionGroupConfig("G1", retry_max_times=3, consume_message_orderly=True)

    offsets = ConsumerOffsetManager(tmp_path / "o.json")
    offsets.load()
    assert offsets.query_offset("G1", "T", 0) == -1
    offsets.commit_offset("G1", "T", 0, 42)
    offsets.persist_if_dirty()
    assert not list(tmp_path.glob("*.tmp"))  # the temp file was renamed into place
    again = ConsumerOffsetManager(tmp_path / "o.json")
    again.load()
    assert again.query_offset("G1", "T", 0) == 42
    assert again.topics_of_group("G1") == ["T"] and again.groups_of_topic("T") == ["G1"]


def test_long_polling_wakes_matching_waiters_only():
    class Offsets:
        max_offset = 0

        def get_max_offset_in_queue(self, topic: str, queue_id: int) -> int:
            return self.max_offset

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        offsets = Offsets()
        lp = LongPollingService(loop, offsets)
        q0 = asyncio.create_task(lp.wait("T", 0, 0, 5))
        q1 = asyncio.create_task(lp.wait("T", 1, 0, 0.3))
        await asyncio.sleep(0.05)
        assert lp.waiting == 2
        offsets.max_offset = 1
        lp.on_arrival("T", 0, 1)  # as the store thread would call it
        assert await asyncio.wait_for(q0, 1) is True
        assert await q1 is False  # other queue: times out
        assert lp.waiting == 0
        # an arrival before registration is seen through the offset re-check
        assert await lp.wait("T", 0, 0, 5) is True
        assert await lp.wait("Idle", None, None, 0.05) is False

    asyncio.run(scenario())


def test_tag_filter_and_validation_rules():
    f = TagFilter.parse("TagA || TagB")
    assert f.is_matched_by_consume_queue(tags_hash_code("TagA"), None)
    assert not f.is_matched_by_consume_queue(tags_hash_code("TagC"), None)
    assert TagFilter.parse("*").matches_all
    with pytest.raises(MQError):
        TagFilter.parse("||")
    for bad in ("", "a b", "x" * 128, "rmq_sys_foo", "SCHEDULE_TOPIC_XXXX"):
        with pytest.raises(MQError) as err:
            validate_topic(bad)
        assert err.value.code == Code.ILLEGAL_TOPIC
    validate_topic("%RETRY%g1")
    with pytest.raises(MQError) as err:
        validate_group("CID_RMQ_SYS_X")
    assert err.value.code == Code.ILLEGAL_CONSUMER_GROUP
    with pytest.raises(MQError):
        validate_message_group("g\x01")
    check_message_type(MessageKind.FIFO, "MIXED", "T")
    with pytest.raises(MQError) as err:
        check_message_type(MessageKind.DELAY, "NORMAL", "T")
    assert err.value.code == Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
