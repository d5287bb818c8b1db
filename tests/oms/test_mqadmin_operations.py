"""The rest of RocketMQ's ``mqadmin`` set as real subprocesses against one name server and two brokers: client
connections, offsets chosen by copy or skip, servers' configuration, KV config and write permission, topic
permission and allocation, message printing and send round trips; each with its error path."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

import oms
from orbitmq.errors import Code
from orbitmq.proto import admin_pb2, admin_pb2_grpc
from tests.conftest import BrokerFactory, BrokerHandle, NamesrvHandle
from tests.oms.test_mqadmin import mqadmin_cmd, ok, ok_json
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

CLUSTER = "OpsCluster"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NamesrvHandle, BrokerHandle, BrokerHandle]]:
    factory = BrokerFactory(tmp_path_factory.mktemp("oms-mqadmin-ops"))
    try:
        ns = factory.namesrv()
        fast_stats = {"statsSampleIntervalMs": "100"}  # statsAll's samples: 10 s by default
        a = factory.broker(ns, name="ops-a", cluster=CLUSTER, options=fast_stats)
        b = factory.broker(ns, name="ops-b", cluster=CLUSTER, options=fast_stats)
        with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.resource_manager() as rm:
            wait_until(lambda: len(rm.cluster_list()) == 2, 20, what="two brokers registered")
        yield ns, a, b
    finally:
        factory.stop_all()


def eventually_json(*args: str, what: str) -> object:
    """The --json answer of the first run that succeeds within 20 s (clients register asynchronously)."""
    answers: list[object] = []

    def answered() -> bool:
        done = mqadmin_cmd(*args, "--json")
        if done.returncode == 0:
            answers.append(json.loads(done.stdout))
        return bool(answers)

    wait_until(answered, 20, what=what, interval=0.2)
    return answers[-1]


def failed(*args: str) -> tuple[int, str]:
    done = mqadmin_cmd(*args)
    assert done.returncode != 0, (args, done.stdout)
    return done.returncode, done.stderr


@pytest.mark.timeout(90)
def test_consumer_and_producer_connections(cluster):
    ns, _, _ = cluster
    n = ("-n", ns.addr)
    topic, group = "OpsConn", "GOpsConn"
    ok("updateTopic", *n, "-c", CLUSTER, "-t", topic, "-r", "2", "-w", "2")
    received = threading.Event()
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap:
        producer = ap.create_producer()
        producer.startup()
        producer.send(oms.BytesMessage(b"x", topic))
        consumer = ap.create_push_consumer(consumer_id=group)
        consumer.attach_queue(topic, lambda message, context: received.set() or context.ack(), "TagA || TagB")
        consumer.startup()
        try:
            conns = eventually_json("consumerConnection", *n, "-g", group, what="the consumer listed")
            assert [c["group"] for c in conns] == [group]
            assert conns[0]["client_type"] == "PUSH_CONSUMER" and conns[0]["language"] == "PYTHON"
            assert conns[0]["subscriptions"] == {topic: "TagA || TagB"} and conns[0]["address"].startswith("127.0.0.1:")
            text = ok("consumerConnection", *n, "-g", group)
            assert conns[0]["client_id"] in text and f"Topic: {topic}" in text and "TagA || TagB" in text

            status = ok("consumerStatus", *n, "-g", group, "-i", conns[0]["client_id"])
            assert '"subscription"' in status and topic in status, "the declared settings are shown"

            producers = eventually_json("producerConnection", *n, "-t", topic, what="the producer listed")
            assert [p["client_type"] for p in producers] == ["PRODUCER"] and topic in producers[0]["topics"]
        finally:
            consumer.shutdown()
            producer.shutdown()
    code, err = failed("consumerConnection", *n, "-g", "GOpsNobody")
    assert code == 1 and "GOpsNobody" in err and "online" in err
    code, err = failed("consumerStatus", *n, "-g", group, "-i", "no-such-client")
    assert code == 1 and "no-such-client" in err


@pytest.mark.timeout(90)
def test_clone_and_skip_offsets(cluster):
    ns, a, _ = cluster
    n = ("-n", ns.addr)
    topic = "OpsOffsets"
    ok("updateTopic", *n, "-c", CLUSTER, "-t", topic, "-r", "2", "-w", "2")
    for i in range(6):
        ok("sendMessage", *n, "-t", topic, "-p", f"m{i}")
    before = ok_json("consumerProgress", *n, "-g", "GOpsSkip", "-t", topic)
    assert sum(q["lag"] for q in before["queues"]) == 6

    skipped = ok_json("skipAccumulatedMessage", *n, "-g", "GOpsSkip", "-t", topic)
    assert len(skipped) == 4 and sum(r["offset"] for r in skipped) == 6
    after = ok_json("consumerProgress", *n, "-g", "GOpsSkip", "-t", topic)
    assert sum(q["lag"] for q in after["queues"]) == 0, "the backlog is skipped"

    text = ok("cloneGroupOffset", *n, "-s", "GOpsSkip", "-d", "GOpsClone", "-t", topic)
    assert "clone group offset success" in text
    clone = ok_json("consumerProgress", *n, "-g", "GOpsClone", "-t", topic)
    assert [(q["broker_name"], q["queue_id"], q["consumer_offset"]) for q in clone["queues"]] == [
        (q["broker_name"], q["queue_id"], q["consumer_offset"]) for q in after["queues"]
    ]
    ok("sendMessage", *n, "-t", topic, "-p", "new")
    assert ok_json("consumerProgress", *n, "-g", "GOpsClone", "-t", topic)["total_lag"] == 1

    # the broker checks every offset before committing any: a queue or offset out of range names the limit
    with grpc.insecure_channel(a.addr) as channel:
        stub = admin_pb2_grpc.AdminStub(channel)
        bad = stub.UpdateConsumerOffsets(
            admin_pb2.UpdateConsumerOffsetsRequest(group="GOpsClone", topic=topic, offsets={0: 0, 1: 10_000}),
            timeout=10,
        )
        assert bad.status.code == Code.BAD_REQUEST and "10000" in bad.status.message, bad.status
        bad = stub.UpdateConsumerOffsets(
            admin_pb2.UpdateConsumerOffsetsRequest(group="GOpsClone", topic=topic, offsets={7: 0}), timeout=10
        )
        assert bad.status.code == Code.BAD_REQUEST and "queue id 7" in bad.status.message
    assert ok_json("consumerProgress", *n, "-g", "GOpsClone", "-t", topic)["total_lag"] == 1, "nothing was committed"
    code, err = failed("skipAccumulatedMessage", *n, "-g", "GOpsSkip", "-t", "OpsNoSuchTopic")
    assert code == 1 and "OpsNoSuchTopic" in err


@pytest.mark.timeout(90)
def test_broker_and_namesrv_config(cluster):
    ns, a, _ = cluster
    n = ("-n", ns.addr)
    configs = ok_json("getBrokerConfig", *n, "-b", a.addr)
    assert configs[a.addr]["brokerName"] == "ops-a" and "flushDiskType" in configs[a.addr]
    assert set(ok_json("getBrokerConfig", *n, "-c", CLUSTER)) == {a.addr, cluster[2].addr}
    assert "brokerName" in ok("getBrokerConfig", *n, "-b", a.addr)

    out = ok("updateBrokerConfig", *n, "-b", a.addr, "-k", "longPollingMaxMs", "-v", "5000")
    assert "update broker config success" in out
    assert ok_json("getBrokerConfig", *n, "-b", a.addr)[a.addr]["longPollingMaxMs"] == "5000"
    code, err = failed("updateBrokerConfig", *n, "-b", a.addr, "-k", "brokerName", "-v", "other")
    assert code == 1 and "brokerName is read at start only" in err and "longPollingMaxMs" in err
    code, err = failed("updateBrokerConfig", *n, "-b", a.addr, "-k", "longPollingMaxMs", "-v", "-1")
    assert code == 1 and "must be >= 0" in err
    code, err = failed("updateBrokerConfig", *n, "-b", a.addr, "-k", "noSuchKey", "-v", "1")
    assert code == 1 and "noSuchKey" in err
    assert ok_json("getBrokerConfig", *n, "-b", a.addr)[a.addr]["brokerName"] == "ops-a", "refusals change nothing"
    code, err = failed("getBrokerConfig", *n)
    assert code == 2 and "-b brokerAddr or -c clusterName" in err

    ns_config = ok_json("getNamesrvConfig", *n)
    assert list(ns_config) == [ns.addr] and "brokerExpiredSeconds" in ns_config[ns.addr]
    ok("updateNamesrvConfig", *n, "-k", "autoCreateTopicRouteEnable", "-v", "false")
    assert ok_json("getNamesrvConfig", *n)[ns.addr]["autoCreateTopicRouteEnable"] == "false"
    ok("updateNamesrvConfig", *n, "-k", "autoCreateTopicRouteEnable", "-v", "true")
    code, err = failed("updateNamesrvConfig", *n, "-k", "listenPort", "-v", "1")
    assert code == 1 and "listenPort is read at start only" in err


@pytest.mark.timeout(90)
def test_kv_config_and_write_perm(cluster):
    ns, _, _ = cluster
    n = ("-n", ns.addr)
    topic = "OpsPerm"
    ok("updateTopic", *n, "-c", CLUSTER, "-t", topic, "-r", "2", "-w", "2")
    ok("updateKvConfig", *n, "-s", "ORDER_TOPIC_CONFIG", "-k", topic, "-v", "ops-a:2")
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.resource_manager() as rm:
        assert rm.get_kv_config("ORDER_TOPIC_CONFIG", topic) == "ops-a:2"
    ok("deleteKvConfig", *n, "-s", "ORDER_TOPIC_CONFIG", "-k", topic)
    code, err = failed("deleteKvConfig", *n, "-s", "ORDER_TOPIC_CONFIG", "-k", topic)
    assert code == 1 and topic in err

    out = ok("wipeWritePerm", *n, "-b", "ops-a")
    assert "wipe write perm of broker[ops-a]" in out
    perms = {q["broker_name"]: q["perm"] for q in ok_json("topicRoute", *n, "-t", topic)["queue_datas"]}
    assert perms == {"ops-a": 4, "ops-b": 6}, "routes show ops-a read-only"
    sent = [ok_json("sendMessage", *n, "-t", topic, "-p", f"w{i}") for i in range(4)]
    assert {s["queue"]["broker_name"] for s in sent} == {"ops-b"}, "producers avoid the wiped broker"
    ok("addWritePerm", *n, "-b", "ops-a")
    perms = {q["broker_name"]: q["perm"] for q in ok_json("topicRoute", *n, "-t", topic)["queue_datas"]}
    assert perms == {"ops-a": 6, "ops-b": 6}
    code, err = failed("wipeWritePerm", *n, "-b", "ops-nobody")
    assert code == 1 and "ops-nobody" in err


@pytest.mark.timeout(90)
def test_topic_perm_cluster_list_and_allocation(cluster):
    ns, _, _ = cluster
    n = ("-n", ns.addr)
    topic = "OpsTopic"
    ok("updateTopic", *n, "-c", CLUSTER, "-t", topic, "-r", "3", "-w", "3")
    rows = ok_json("updateTopicPerm", *n, "-t", topic, "-p", "4", "-c", CLUSTER)
    assert sorted((r["broker_name"], r["perm"]) for r in rows) == [("ops-a", 4), ("ops-b", 4)]
    assert {q["perm"] for q in ok_json("topicRoute", *n, "-t", topic)["queue_datas"]} == {4}
    ok("updateTopicPerm", *n, "-t", topic, "-p", "6", "-c", CLUSTER)
    code, err = failed("updateTopicPerm", *n, "-t", topic, "-p", "5", "-c", CLUSTER)
    assert code == 2 and "2 (write), 4 (read) or 6" in err

    assert ok_json("topicClusterList", *n, "-t", topic) == [CLUSTER]
    assert ok("topicClusterList", *n, "-t", topic).strip() == CLUSTER

    allocation = ok_json("allocateMQ", *n, "-t", topic, "-i", "c2,c1")
    assert allocation == {
        "c1": [f"{topic}:ops-a:0", f"{topic}:ops-a:1", f"{topic}:ops-a:2"],
        "c2": [f"{topic}:ops-b:0", f"{topic}:ops-b:1", f"{topic}:ops-b:2"],
    }
    four = ok_json("allocateMQ", *n, "-t", topic, "-i", "a,b,c,d")
    assert [len(four[c]) for c in "abcd"] == [2, 2, 1, 1], "the first len % n clients take one more"
    code, err = failed("allocateMQ", *n, "-t", topic, "-i", " , ")
    assert code == 2 and "names no client" in err


@pytest.mark.timeout(120)
def test_print_query_and_send_round_trips(cluster):
    ns, a, _ = cluster
    n = ("-n", ns.addr)
    topic = "OpsPrint"
    ok("updateTopic", *n, "-b", "ops-a", "-t", topic, "-r", "1", "-w", "1")
    ids = [
        ok_json("sendMessage", *n, "-t", topic, "-p", f"body{i}", "-c", "TagA" if i % 2 else "TagB") for i in range(5)
    ]

    found = ok_json("queryMsgByUniqueKey", *n, "-i", ids[0]["message_id"], "-t", topic)
    assert [m["unique_id"] for m in found] == [ids[0]["message_id"]]
    code, err = failed("queryMsgByUniqueKey", *n, "-i", "0" * 32, "-t", topic)
    assert code == 1

    rows = ok_json("printMsg", *n, "-t", topic, "-s", "TagA")
    assert sorted(r["body"] for r in rows) == ["body1", "body3"]
    text = ok("printMsg", *n, "-t", topic, "-d", "false")
    assert text.strip().endswith("5 message(s)") and "BODY: -" in text and "body0" not in text
    assert ok_json("printMsg", *n, "-t", topic, "-b", "now") == [], "nothing stored after -b now"
    code, err = failed("printMsg", *n, "-t", topic, "-c", "no-such-charset")
    assert code == 2 and "no-such-charset" in err

    counted = ok_json("printMsgByQueue", *n, "-t", topic, "-a", "ops-a", "-i", "0", "-r", "true")
    assert counted["count"] == 5 and counted["tags"] == {"TagB": 3, "TagA": 2} and counted["messages"] == []
    text = ok("printMsgByQueue", *n, "-t", topic, "-a", "ops-a", "-i", "0", "-p", "true", "-f", "true", "-r", "true")
    assert "BODY: body4" in text and "Tag: TagB" in text
    code, err = failed("printMsgByQueue", *n, "-t", topic, "-a", "ops-b", "-i", "0")
    assert code == 1 and "no readable queue" in err

    rt = ok_json("checkMsgSendRT", *n, "-t", topic, "-a", "4", "-s", "16")
    assert len(rt["rts_ms"]) == 4 and rt["failures"] == []
    status = ok_json("sendMsgStatus", *n, "-b", "ops-a", "-t", topic, "-c", "3")
    assert status["target"] == "ops-a" and len(status["rts_ms"]) == 3
    code, err = failed("sendMsgStatus", *n, "-b", "ops-nobody", "-t", topic)
    assert code == 1 and "ops-nobody" in err
    ok("updateTopic", *n, "-c", CLUSTER, "-t", "OpsRT", "-r", "1", "-w", "1")
    cluster_rt = ok_json("clusterRT", *n, "-c", CLUSTER, "-t", "OpsRT", "-a", "2")
    assert sorted(r["target"] for r in cluster_rt) == [f"{CLUSTER}/ops-a", f"{CLUSTER}/ops-b"]
    assert all(len(r["rts_ms"]) == 2 and not r["failures"] for r in cluster_rt)
    # long runs report progress on stderr, never on stdout
    done = mqadmin_cmd("checkMsgSendRT", *n, "-t", topic, "-a", "10", "--progress", "--json")
    assert done.returncode == 0 and "10/10 sent" in done.stderr and "sent" not in done.stdout.split("rts_ms")[0]
    code, err = failed("checkMsgSendRT", *n, "-t", topic, "-a", "0")
    assert code == 2 and "-a amount must be positive" in err

    # brokerConsumeStats: every group that committed on the broker, with its lag
    ok("updateSubGroup", *n, "-c", CLUSTER, "-g", "GOpsStats")  # a consumer's first heartbeat would create it
    ok("skipAccumulatedMessage", *n, "-g", "GOpsStats", "-t", topic)
    ok("sendMessage", *n, "-t", topic, "-p", "lagging")
    stats = ok_json("brokerConsumeStats", *n, "-b", a.addr)
    mine = [q for g, q in stats if g == "GOpsStats"]
    assert [(q["topic"], q["lag"]) for q in mine] == [(topic, 1)]
    assert ok_json("brokerConsumeStats", *n, "-b", a.addr, "-l", "1000") == []


@pytest.mark.timeout(60)
def test_stats_all(cluster):
    ns, _, _ = cluster
    n = ("-n", ns.addr)
    topic, idle, group = "OpsStats", "OpsStatsIdle", "GOpsStatsAll"
    ok("updateTopic", *n, "-b", "ops-a", "-t", topic, "-r", "1", "-w", "1")
    ok("updateTopic", *n, "-b", "ops-a", "-t", idle, "-r", "1", "-w", "1")
    ok("updateSubGroup", *n, "-c", CLUSTER, "-g", group)
    time.sleep(0.3)  # a sample before the traffic
    for i in range(5):
        ok("sendMessage", *n, "-t", topic, "-p", f"s{i}")
    (row,) = ok_json("statsAll", *n, "-t", topic)
    assert (row["topic"], row["group"], row["in_24h"], row["out_24h"]) == (topic, "", 5, 0)
    assert row["in_tps"] > 0

    ok("skipAccumulatedMessage", *n, "-g", group, "-t", topic)  # the group consumed all five
    ok("sendMessage", *n, "-t", topic, "-p", "late")
    (row,) = ok_json("statsAll", *n, "-t", topic)
    assert (row["group"], row["in_24h"], row["out_24h"], row["accumulation"]) == (group, 6, 5, 1)
    assert row["out_tps"] > 0
    text = ok("statsAll", *n, "-t", topic)
    assert text.splitlines()[0].split()[:3] == ["#Topic", "#Consumer", "Group"] and group in text

    everything = {r["topic"] for r in ok_json("statsAll", *n)}
    assert {topic, idle} <= everything
    active = {r["topic"] for r in ok_json("statsAll", *n, "-a", "true")}
    assert topic in active and idle not in active, "-a leaves out topics without traffic"
    code, err = failed("statsAll", *n, "-t", "OpsNoSuchStats")
    assert code == 1 and "OpsNoSuchStats" in err
