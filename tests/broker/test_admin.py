"""The orbitmq.admin service on the broker port: topics, groups, progress, offset reset, message queries."""

from __future__ import annotations

import time

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2

from orbitmq.proto import admin_pb2, admin_pb2_grpc
from tests.broker.v2client import message, raw_client

OK = definition_pb2.Code.OK


@pytest.mark.timeout(120)
def test_admin_service(broker):
    with grpc.insecure_channel(broker.addr) as ch, raw_client(broker.addr) as c:
        admin = admin_pb2_grpc.AdminStub(ch)
        cfg = admin_pb2.TopicConfig(topic_name="AdmT", read_queue_nums=2, write_queue_nums=2, perm=6)
        r = admin.CreateOrUpdateTopic(admin_pb2.CreateOrUpdateTopicRequest(config=cfg), timeout=10)
        assert r.status.code == OK and r.config.message_type == "NORMAL"
        bad_perm = admin_pb2.TopicConfig(topic_name="AdmPermT", read_queue_nums=2, write_queue_nums=2, perm=7)
        r = admin.CreateOrUpdateTopic(admin_pb2.CreateOrUpdateTopicRequest(config=bad_perm), timeout=10)
        assert r.status.code == definition_pb2.Code.BAD_REQUEST and "perm 7" in r.status.message
        bad = admin_pb2.TopicConfig(topic_name="bad name", read_queue_nums=2, write_queue_nums=2)
        r = admin.CreateOrUpdateTopic(admin_pb2.CreateOrUpdateTopicRequest(config=bad), timeout=10)
        assert r.status.code == definition_pb2.Code.ILLEGAL_TOPIC
        names = [t.topic_name for t in admin.ListTopics(admin_pb2.ListTopicsRequest(), timeout=10).topics]
        assert "AdmT" in names and "TBW102" not in names
        # the route follows the topic config: 2 queues
        assert len(c.route("AdmT").message_queues) == 2

        t0 = int(time.time() * 1000)
        sent = [c.send(message("AdmT", f"b{i}".encode(), keys=[f"key{i}"])) for i in range(6)]
        assert all(s.status.code == OK for s in sent)
        status = admin.TopicStatus(admin_pb2.TopicStatusRequest(topic="AdmT"), timeout=10)
        assert [q.max_offset for q in status.queues] == [3, 3]
        assert all(q.last_update_timestamp_ms >= t0 - 1000 for q in status.queues)

        g = admin_pb2.GroupConfig(group_name="AdmG", retry_max_times=3, consume_message_orderly=True)
        assert admin.CreateOrUpdateGroup(admin_pb2.CreateOrUpdateGroupRequest(config=g), timeout=10).status.code == OK
        groups = admin.ListGroups(admin_pb2.ListGroupsRequest(), timeout=10).groups
        assert any(x.group_name == "AdmG" and x.consume_message_orderly for x in groups)

        assert c.update_offset("AdmG", "AdmT", 0, 1).code == OK
        prog = admin.ConsumerProgress(admin_pb2.ConsumerProgressRequest(group="AdmG", topic="AdmT"), timeout=10)
        assert [(q.queue_id, q.consumer_offset, q.lag) for q in prog.queues] == [(0, 1, 2), (1, -1, 3)]
        assert prog.total_lag == 5

        reset = admin.ResetOffsetByTime(
            admin_pb2.ResetOffsetByTimeRequest(group="AdmG", topic="AdmT", timestamp_ms=0), timeout=10
        )
        assert reset.status.code == OK and dict(reset.offsets) == {0: 0, 1: 0}
        assert c.get_offset("AdmG", "AdmT", 1).offset == 0

        by_key = admin.QueryMessageByKey(admin_pb2.QueryMessageByKeyRequest(topic="AdmT", key="key4"), timeout=10)
        assert [m.body for m in by_key.messages] == [b"b4"]
        view = by_key.messages[0]
        by_id = admin.QueryMessageById(admin_pb2.QueryMessageByIdRequest(msg_id=view.msg_id), timeout=10)
        assert by_id.messages[0].body == b"b4"
        uniq = sent[4].entries[0].message_id
        by_uniq = admin.QueryMessageById(admin_pb2.QueryMessageByIdRequest(msg_id=uniq, topic="AdmT"), timeout=10)
        assert by_uniq.messages[0].unique_id == uniq
        assert by_uniq.messages[0].sys_flag & 0x1 == 0
        zipped = message("AdmT", b"compressed bytes", keys=["zipkey"])
        zipped.system_properties.body_encoding = definition_pb2.GZIP
        assert c.send(zipped).status.code == OK
        by_zip = admin.QueryMessageByKey(admin_pb2.QueryMessageByKeyRequest(topic="AdmT", key="zipkey"), timeout=10)
        assert by_zip.messages[0].sys_flag & 0x1 == 0x1  # the compressed flag travels with the view
        by_off = admin.QueryMessageByOffset(
            admin_pb2.QueryMessageByOffsetRequest(topic="AdmT", queue_id=view.queue_id, offset=view.queue_offset),
            timeout=10,
        )
        assert by_off.messages[0].body == b"b4"
        missing = admin.QueryMessageByOffset(
            admin_pb2.QueryMessageByOffsetRequest(topic="AdmT", queue_id=0, offset=99), timeout=10
        )
        assert missing.status.code == definition_pb2.Code.MESSAGE_NOT_FOUND

        info = admin.BrokerRuntimeInfo(admin_pb2.BrokerRuntimeInfoRequest(), timeout=10).info
        assert info["brokerName"] == broker.name and int(info["putMessageTotal"]) >= 6

        assert admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic="AdmT"), timeout=10).status.code == OK
        assert c.pull("AdmG", "AdmT", 0, 0).status.code == definition_pb2.Code.TOPIC_NOT_FOUND
        assert admin.DeleteGroup(admin_pb2.DeleteGroupRequest(group="AdmG"), timeout=10).status.code == OK
        assert (
            admin.DeleteGroup(admin_pb2.DeleteGroupRequest(group="AdmG"), timeout=10).status.code
            == definition_pb2.Code.CONSUMER_GROUP_NOT_FOUND
        )


@pytest.mark.timeout(60)
def test_system_topics_cannot_be_deleted(broker):
    with grpc.insecure_channel(broker.addr) as ch:
        admin = admin_pb2_grpc.AdminStub(ch)
        for topic in ("TBW102", "SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_REVIVE_LOG"):
            refused = admin.DeleteTopic(admin_pb2.DeleteTopicRequest(topic=topic), timeout=10).status
            assert refused.code == definition_pb2.Code.ILLEGAL_TOPIC and "system topic" in refused.message, topic
    with raw_client(broker.addr) as c:  # TBW102 still there: topics are still created on first send
        assert c.send(message("AutoAfterRefusedDelete", b"x")).status.code == definition_pb2.Code.OK
