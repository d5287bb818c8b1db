"""The admin requests of RocketMQ 4's mqadmin over remoting, as raw frames: topics and groups created, listed,
inspected and deleted on the broker and the name server, broker config read and changed, stats and connections in
RocketMQ's JSON (fastjson's MessageQueue-keyed maps); bad input answered naming the field, admin codes refused to
accounts without admin rights."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2, service_pb2, service_pb2_grpc

from orbitmq.remoting.codec import RemotingCommand
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.conftest import BrokerFactory
from tests.remoting.raw import RawClient, properties, sign
from tests.remoting.stack import Stack, remoting_broker, remoting_stack

pytestmark = pytest.mark.integration

TOPIC, GROUP = "AdminT", "GAdmin"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    # registration only when topics change: a route deleted from the name server stays deleted during the test
    options = {"registerBrokerIntervalMs": "60000"}
    with remoting_stack(tmp_path_factory.mktemp("remoting-admin"), options, name="remoting-admin") as st:
        yield st


def _queues(body: bytes, topic: str) -> dict[int, Any]:
    """A fastjson map keyed by MessageQueue: {queueId: value} for ``topic``."""
    pattern = r'\{"brokerName":"[^"]*","queueId":(\d+),"topic":"' + re.escape(topic) + r'"\}:(\{[^{}]*\}|-?\d+)'
    return {int(q): json.loads(v) for q, v in re.findall(pattern, body.decode())}


def _create_topic(c: RawClient, topic: str, **fields: str) -> RemotingCommand:
    header = {"topic": topic, "defaultTopic": "TBW102", "readQueueNums": "3", "writeQueueNums": "3", "perm": "6",
              "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false", **fields}  # fmt: skip
    return c.call(RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=header))


@pytest.mark.timeout(90)
def test_topics_groups_and_stats_over_remoting(stack: Stack) -> None:
    ns_port = int(stack.remoting_ns.rsplit(":", 1)[1])
    with RawClient(stack.broker_port) as c, RawClient(ns_port) as ns:
        assert _create_topic(c, TOPIC).code == ResponseCode.SUCCESS
        route = ns.call(RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": TOPIC}))
        assert route.code == ResponseCode.SUCCESS and json.loads(route.body)["queueDatas"][0]["writeQueueNums"] == 3
        listed = ns.call(RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        assert TOPIC in json.loads(listed.body)["topicList"]
        configs = c.call(RemotingCommand(RequestCode.GET_ALL_TOPIC_CONFIG))
        table = json.loads(configs.body)["topicConfigTable"]
        assert table[TOPIC]["readQueueNums"] == 3 and table[TOPIC]["perm"] == 6 and "TBW102" in table

        bad = _create_topic(c, TOPIC, readQueueNums="0")
        assert bad.code == ResponseCode.SYSTEM_ERROR and "'readQueueNums'" in (bad.remark or "")
        system = _create_topic(c, "TBW102")
        assert system.code == ResponseCode.SYSTEM_ERROR and "system topic" in (system.remark or "")
        illegal = _create_topic(c, "bad topic!")
        assert illegal.code == ResponseCode.SYSTEM_ERROR and "bad topic!" in (illegal.remark or "")

        for body in (b"a", b"b"):
            header = {"b": TOPIC, "e": "0", "i": properties(TAGS="T")}
            assert c.call(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=header, body=body)).code == 0
        stats = c.call(RemotingCommand(RequestCode.GET_TOPIC_STATS_INFO, ext_fields={"topic": TOPIC}))
        queues = _queues(stats.body, TOPIC)
        assert sorted(queues) == [0, 1, 2] and queues[0]["maxOffset"] == 2 and queues[0]["lastUpdateTimestamp"] > 0
        missing = c.call(RemotingCommand(RequestCode.GET_TOPIC_STATS_INFO, ext_fields={"topic": "NoSuchT"}))
        assert missing.code == ResponseCode.TOPIC_NOT_EXIST

        # a group, its progress and its connections
        group = {"groupName": GROUP, "consumeEnable": True, "retryMaxTimes": 3, "consumeMessageOrderly": True}
        created = c.call(
            RemotingCommand(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=json.dumps(group).encode())
        )
        assert created.code == ResponseCode.SUCCESS
        offset = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": "0", "commitOffset": "1"}
        assert c.call(RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=offset)).code == 0
        consume = c.call(
            RemotingCommand(RequestCode.GET_CONSUME_STATS, ext_fields={"consumerGroup": GROUP, "topic": TOPIC})
        )
        progress = _queues(consume.body, TOPIC)
        assert (progress[0]["brokerOffset"], progress[0]["consumerOffset"]) == (2, 1)
        nobody = c.call(RemotingCommand(RequestCode.GET_CONSUMER_CONNECTION_LIST, ext_fields={"consumerGroup": GROUP}))
        assert nobody.code == ResponseCode.CONSUMER_NOT_ONLINE and GROUP in (nobody.remark or "")
        c.heartbeat("admin-client@1", consumer_groups={GROUP: TOPIC})
        conns = c.call(RemotingCommand(RequestCode.GET_CONSUMER_CONNECTION_LIST, ext_fields={"consumerGroup": GROUP}))
        body = json.loads(conns.body)
        assert [x["clientId"] for x in body["connectionSet"]] == ["admin-client@1"]
        with grpc.insecure_channel(stack.broker.addr) as ch:  # a v2 consumer of the group is listed too
            hb = service_pb2.HeartbeatRequest(
                group=definition_pb2.Resource(name=GROUP), client_type=definition_pb2.SIMPLE_CONSUMER
            )
            meta = (("x-mq-client-id", "v2-client@1"), ("x-mq-language", "PYTHON"))
            assert (
                service_pb2_grpc.MessagingServiceStub(ch).Heartbeat(hb, metadata=meta, timeout=10).status.code == 20000
            )
        conns = c.call(RemotingCommand(RequestCode.GET_CONSUMER_CONNECTION_LIST, ext_fields={"consumerGroup": GROUP}))
        listed_ids = sorted(x["clientId"] for x in json.loads(conns.body)["connectionSet"])
        assert listed_ids == ["admin-client@1", "v2-client@1"]
        assert TOPIC in body["subscriptionTable"] and body["messageModel"] == "CLUSTERING"
        groups = json.loads(c.call(RemotingCommand(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
        assert groups["subscriptionGroupTable"][GROUP]["retryMaxTimes"] == 3
        assert groups["subscriptionGroupTable"][GROUP]["consumeMessageOrderly"] is True
        no_producer = c.call(
            RemotingCommand(RequestCode.GET_PRODUCER_CONNECTION_LIST, ext_fields={"producerGroup": "PG_ADMIN"})
        )
        assert no_producer.code == ResponseCode.SYSTEM_ERROR and "PG_ADMIN" in (no_producer.remark or "")
        c.heartbeat("admin-producer@1", producer_groups=("PG_ADMIN",))
        producers = c.call(
            RemotingCommand(RequestCode.GET_PRODUCER_CONNECTION_LIST, ext_fields={"producerGroup": "PG_ADMIN"})
        )
        assert [x["clientId"] for x in json.loads(producers.body)["connectionSet"]] == ["admin-producer@1"]
        by_cluster = ns.call(
            RemotingCommand(RequestCode.GET_TOPICS_BY_CLUSTER, ext_fields={"cluster": "DefaultCluster"})
        )
        assert TOPIC in json.loads(by_cluster.body)["topicList"]
        elsewhere = ns.call(RemotingCommand(RequestCode.GET_TOPICS_BY_CLUSTER, ext_fields={"cluster": "Elsewhere"}))
        assert json.loads(elsewhere.body)["topicList"] == []
        bad_group = c.call(
            RemotingCommand(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=b'{"retryMaxTimes": 1}')
        )
        assert bad_group.code == ResponseCode.SYSTEM_ERROR and "'groupName'" in (bad_group.remark or "")

        deleted = c.call(
            RemotingCommand(
                RequestCode.DELETE_SUBSCRIPTIONGROUP, ext_fields={"groupName": GROUP, "cleanOffset": "true"}
            )
        )
        assert deleted.code == ResponseCode.SUCCESS
        again = c.call(RemotingCommand(RequestCode.DELETE_SUBSCRIPTIONGROUP, ext_fields={"groupName": GROUP}))
        assert again.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST

        # the name server forgets the route (another cluster's name leaves it), then the broker deletes the topic
        other = ns.call(
            RemotingCommand(
                RequestCode.DELETE_TOPIC_IN_NAMESRV, ext_fields={"topic": TOPIC, "clusterName": "Elsewhere"}
            )
        )
        assert other.code == ResponseCode.SUCCESS
        assert (
            TOPIC
            in json.loads(ns.call(RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)["topicList"]
        )
        gone = ns.call(RemotingCommand(RequestCode.DELETE_TOPIC_IN_NAMESRV, ext_fields={"topic": TOPIC}))
        assert gone.code == ResponseCode.SUCCESS
        assert (
            TOPIC
            not in json.loads(ns.call(RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)).body)[
                "topicList"
            ]
        )
        assert c.call(RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER, ext_fields={"topic": TOPIC})).code == 0
        assert (
            TOPIC not in json.loads(c.call(RemotingCommand(RequestCode.GET_ALL_TOPIC_CONFIG)).body)["topicConfigTable"]
        )
        twice = c.call(RemotingCommand(RequestCode.DELETE_TOPIC_IN_BROKER, ext_fields={"topic": TOPIC}))
        assert twice.code == ResponseCode.TOPIC_NOT_EXIST


@pytest.mark.timeout(60)
def test_broker_config_and_runtime_info_over_remoting(stack: Stack) -> None:
    with RawClient(stack.broker_port) as c:
        config = c.call(RemotingCommand(RequestCode.GET_BROKER_CONFIG))
        assert config.code == ResponseCode.SUCCESS and "brokerName=remoting-admin\n" in config.body.decode()
        assert "counter" in json.loads(config.ext_fields["version"])
        update = c.call(RemotingCommand(RequestCode.UPDATE_BROKER_CONFIG, body=b"longPollingMaxMs=5000\n"))
        assert update.code == ResponseCode.SUCCESS, update.remark
        assert "longPollingMaxMs=5000\n" in c.call(RemotingCommand(RequestCode.GET_BROKER_CONFIG)).body.decode()
        refused = c.call(RemotingCommand(RequestCode.UPDATE_BROKER_CONFIG, body=b"brokerName=other\n"))
        assert refused.code == ResponseCode.INVALID_PARAMETER and "brokerName" in (refused.remark or "")
        garbage = c.call(RemotingCommand(RequestCode.UPDATE_BROKER_CONFIG, body=b"no equals sign"))
        assert garbage.code == ResponseCode.SYSTEM_ERROR and "key=value" in (garbage.remark or "")
        info = c.call(RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO))
        table = json.loads(info.body)["table"]
        assert table["brokerName"] == "remoting-admin" and int(table["commitLogMaxOffset"]) >= 0


ACL = """
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: adminAK
    secretKey: adminSecret1
    admin: true
  - accessKey: appAK
    secretKey: appSecret1
    admin: false
    defaultTopicPerm: PUB|SUB
    defaultGroupPerm: SUB
"""


@pytest.mark.timeout(60)
def test_admin_codes_need_an_admin_account(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    broker = remoting_broker(broker_factory, {"aclEnable": "true", "aclFile": str(acl_file)})
    with RawClient(int(broker.options["remotingListenPort"])) as c:
        header = {"topic": "AclAdminT", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}
        app = c.call(
            sign(RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=dict(header)), "appAK", "appSecret1")
        )
        assert app.code == ResponseCode.NO_PERMISSION and "admin" in (app.remark or "")
        admin = c.call(
            sign(
                RemotingCommand(RequestCode.UPDATE_AND_CREATE_TOPIC, ext_fields=dict(header)), "adminAK", "adminSecret1"
            )
        )
        assert admin.code == ResponseCode.SUCCESS, admin.remark
        # reading the topic table needs no admin rights in RocketMQ 4
        listed = c.call(sign(RemotingCommand(RequestCode.GET_ALL_TOPIC_CONFIG), "appAK", "appSecret1"))
        assert listed.code == ResponseCode.SUCCESS and "AclAdminT" in listed.body.decode()


@pytest.mark.timeout(60)
def test_reset_offset_by_time_reaches_a_pulling_consumer(stack: Stack) -> None:
    topic, group = "ResetT", "GReset"
    with RawClient(stack.broker_port) as c:
        assert _create_topic(c, topic, readQueueNums="1", writeQueueNums="1").code == ResponseCode.SUCCESS
        for body in (b"r0", b"r1", b"r2"):
            header = {"b": topic, "e": "0", "i": properties(TAGS="T")}
            assert c.call(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=header, body=body)).code == 0

        def pull(commit: int) -> RemotingCommand:
            header = {"consumerGroup": group, "topic": topic, "queueId": "0", "queueOffset": str(commit),
                      "maxMsgNums": "32", "sysFlag": "1", "commitOffset": str(commit)}  # fmt: skip
            return c.call(RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=header))

        def reset(**fields: str) -> RemotingCommand:
            header = {"topic": topic, "group": group, "timestamp": "0", "isForce": "true", **fields}
            return c.call(RemotingCommand(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext_fields=header))

        never = reset()
        assert never.code == ResponseCode.SYSTEM_ERROR and group in (never.remark or ""), "no offset to reset yet"
        assert pull(0).code == ResponseCode.SUCCESS
        assert pull(3).code == ResponseCode.PULL_NOT_FOUND  # consumed everything, committed 3
        backwards = reset(isForce="false", timestamp="-1")  # to the end: not backwards, so it stays at 3
        assert _queues(backwards.body, topic) == {0: 3}
        assert pull(3).code == ResponseCode.PULL_NOT_FOUND, "a reset to where the consumer is: no move"
        done = reset()  # timestamp 0, forced: back to the first message
        assert done.code == ResponseCode.SUCCESS and _queues(done.body, topic) == {0: 0}
        moved = pull(3)
        assert moved.code == ResponseCode.PULL_OFFSET_MOVED and moved.ext_fields["nextBeginOffset"] == "0"
        offset = {"consumerGroup": group, "topic": topic, "queueId": "0"}
        queried = c.call(RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, ext_fields=offset))
        assert queried.ext_fields["offset"] == "0", "the pull's stale commit of 3 did not undo the reset"
        again = pull(0)
        assert again.code == ResponseCode.SUCCESS and b"r0" in again.body
        missing = c.call(RemotingCommand(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext_fields={"topic": topic}))
        assert missing.code == ResponseCode.SYSTEM_ERROR and "'group'" in (missing.remark or "")
