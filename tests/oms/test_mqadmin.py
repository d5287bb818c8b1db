"""``mqadmin`` as a real subprocess against one name server and two brokers: tables, --json, exit codes, stderr;
plus the argument parsing (RocketMQ time format, topic attributes) in process."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import grpc
import pytest

import oms
from oms import mqadmin
from orbitmq.errors import Code
from orbitmq.proto import consume_pb2, consume_pb2_grpc
from tests.conftest import BrokerFactory, BrokerHandle, NamesrvHandle
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

CLUSTER = "CliCluster"
SCRIPT = Path(sys.executable).parent / "mqadmin"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NamesrvHandle, BrokerHandle, BrokerHandle]]:
    factory = BrokerFactory(tmp_path_factory.mktemp("oms-mqadmin"))
    try:
        ns = factory.namesrv()
        a = factory.broker(ns, name="cli-a", cluster=CLUSTER)
        b = factory.broker(ns, name="cli-b", cluster=CLUSTER)
        with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.resource_manager() as rm:
            wait_until(lambda: len(rm.cluster_list()) == 2, 20, what="two brokers registered")
        yield ns, a, b
    finally:
        factory.stop_all()


def mqadmin_cmd(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """The installed console script (``pip install -e .``), else the module: a real process either way."""
    command = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "oms.mqadmin"]
    base = {k: v for k, v in os.environ.items() if k != "NAMESRV_ADDR"}
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=timeout, env={**base, **(env or {})}
    )


def ok(*args: str, env: dict[str, str] | None = None) -> str:
    done = mqadmin_cmd(*args, env=env)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    assert done.stderr == "", done.stderr
    return done.stdout


def ok_json(*args: str) -> object:
    return json.loads(ok(*args, "--json"))


@pytest.mark.timeout(90)
def test_cluster_topic_and_group_commands(cluster):
    ns, a, b = cluster
    n = ("-n", ns.addr)
    listing = ok("clusterList", *n)
    assert listing.splitlines()[0].split()[:3] == ["#Cluster", "Name", "#Broker"]
    assert "cli-a" in listing and "cli-b" in listing and a.addr in listing
    brokers = ok_json("clusterList", *n)
    assert sorted((x["broker_name"], x["addr"], x["is_master"]) for x in brokers) == [
        ("cli-a", a.addr, True),
        ("cli-b", b.addr, True),
    ]

    status = ok("brokerStatus", *n, "-b", a.addr)
    assert re.search(r"^brokerName\s+: cli-a$", status, re.M) and re.search(r"^corruptRecordTotal\s+: 0$", status, re.M)
    both = ok_json("brokerStatus", *n, "-c", CLUSTER)
    assert sorted(both) == sorted([a.addr, b.addr]) and both[b.addr]["brokerName"] == "cli-b"
    out = ok("updateTopic", *n, "-c", CLUSTER, "-t", "CliTopic", "-r", "2", "-w", "2", "-p", "6")
    assert "create topic to cli-a success." in out and "create topic to cli-b success." in out
    # one broker by address, name server from NAMESRV_ADDR, type as RocketMQ 5's attribute
    out = ok(
        "updateTopic",
        "-b",
        b.addr,
        "-t",
        "CliFifo",
        "-a",
        "+message.type=FIFO,+owner=ops",
        env={"NAMESRV_ADDR": ns.addr},
    )
    assert "create topic to cli-b success." in out and "cli-a" not in out
    assert "FIFO" in out and "owner=ops" in out
    topics = ok("topicList", *n).split()
    assert {"CliTopic", "CliFifo"} <= set(topics)

    route = ok_json("topicRoute", *n, "-t", "CliTopic")
    assert [(q["broker_name"], q["read_queue_nums"]) for q in route["queue_datas"]] == [("cli-a", 2), ("cli-b", 2)]
    assert ok_json("topicRoute", *n, "-t", "CliFifo")["queue_datas"][0]["message_type"] == "FIFO"
    table = ok("topicRoute", *n, "-t", "CliTopic")
    assert "#Broker Name" in table and a.addr in table and "RW-" in table

    status = ok("topicStatus", *n, "-t", "CliTopic").splitlines()
    assert status[0].split() == ["#Broker", "Name", "#QID", "#Min", "Offset", "#Max", "Offset", "#Last", "Updated"]
    assert len(status) == 5

    groups = ok_json(
        "updateSubGroup", *n, "-g", "GCli", "-r", "1", "-o", "true",
        "--allocateStrategy", "CONSISTENT_HASH", "--allocateOptions", "virtualNodeCnt=10",
    )  # fmt: skip
    assert [(g["broker_name"], g["retry_max_times"], g["orderly"], g["allocate_options"]) for g in groups] == [
        ("cli-a", 1, True, {"virtualNodeCnt": "10"}),
        ("cli-b", 1, True, {"virtualNodeCnt": "10"}),
    ]
    out = ok("updateSubGroup", *n, "-g", "GCli", "-b", "cli-a", "-d", "true")
    assert "create subscription group to cli-a success." in out
    listed = {
        (g["broker_name"], g["broadcast"], g["retry_max_times"])
        for g in ok_json("groupList", *n)
        if g["group"] == "GCli"
    }
    assert listed == {("cli-a", True, 1), ("cli-b", False, 1)}, "an update keeps what it was not told"
    out = ok("deleteSubGroup", *n, "-g", "GCli", "-c", CLUSTER)
    assert "from broker cli-a success" in out and "from broker cli-b success" in out

    out = ok("deleteTopic", *n, "-t", "CliFifo", "-c", CLUSTER)
    assert out.strip() == "delete topic [CliFifo] from broker cli-b success."
    # no name server at all: the broker address is the access point
    direct = ok("topicList", "--brokerAddr", a.addr).split()
    assert "CliTopic" in direct and "CliFifo" not in direct


@pytest.mark.timeout(90)
def test_progress_reset_and_message_queries(cluster):
    ns, _, _ = cluster
    n = ("-n", ns.addr)
    topic, group = "CliQuery", "GCliQuery"
    ok("updateTopic", *n, "-c", CLUSTER, "-t", topic, "-r", "1", "-w", "1")
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.create_producer() as producer:
        sent = []
        for i in range(6):
            sent.append(producer.send(oms.BytesMessage(f"c{i}", topic, keys=["ck"], tags="TagC")))
            # "newest" is by store time in ms: two sends within one ms on the two brokers would tie (it happened)
            time.sleep(0.005)
    after_sends = int(time.time() * 1000) + 1000

    progress = ok_json("consumerProgress", *n, "-g", group, "-t", topic)
    assert progress["total_lag"] == 6 and len(progress["queues"]) == 2

    when = datetime.fromtimestamp(after_sends / 1000).strftime("%Y-%m-%d#%H:%M:%S:%f")[:-3]
    out = ok("resetOffsetByTime", *n, "-g", group, "-t", topic, "-s", when)
    assert out.splitlines()[1].split() == ["#Broker", "Name", "#QID", "#Offset"]
    table = ok("consumerProgress", *n, "-g", group, "-t", topic)
    assert table.rstrip().endswith("Diff Total: 0")
    reset = ok_json("resetOffsetByTime", *n, "-g", group, "-t", topic, "-s", "0")
    assert sum(r["offset"] for r in reset["offsets"]) == 0
    assert ok_json("consumerProgress", *n, "-g", group)["total_lag"] == 6
    ok("updateSubGroup", *n, "-g", group)  # a subscription group of the cluster, as a consumer's start makes one
    every = {p["group"]: p for p in ok_json("consumerProgress", *n)}  # no -g: every group, as RocketMQ lists them
    assert group in every and sum(q["lag"] for q in every[group]["queues"]) == 6
    summary = ok("consumerProgress", *n)
    assert summary.splitlines()[0].split()[:2] == ["#Group", "#Topics"]
    assert any(line.split()[0] == group and line.split()[-1] == "6" for line in summary.splitlines()[1:])

    rows = ok("queryMsgByKey", *n, "-t", topic, "-k", "ck").splitlines()
    assert rows[0].startswith("#Message ID") and len(rows) == 7
    found = ok_json("queryMsgByKey", *n, "-t", topic, "-k", "ck", "-c", "2")
    assert [v["body"] for v in found] == ["c4", "c5"], "the newest two"
    assert ok_json("queryMsgByKey", *n, "-t", topic, "-k", "ck", "-e", "1000") == []

    first = ok_json("queryMsgByKey", *n, "-t", topic, "-k", "ck")[0]
    details = ok("queryMsgById", *n, "-i", first["msg_id"])
    assert "Body:             c0" in details and "Tags:             TagC" in details
    by_unique = ok_json("queryMsgById", *n, "-i", f"{sent[1].message_id},{sent[2].message_id}", "-t", topic)
    assert [v["body"] for v in by_unique] == ["c1", "c2"]
    printed = ok("queryMsgById", *n, "-i", sent[3].message_id)  # the id a producer printed, no topic needed
    assert "Body:             c3" in printed and f"Topic:            {topic}" in printed
    born = re.search(r"^Born Host:\s+(\S+)$", printed, re.M)
    assert born and not born.group(1).endswith(":0"), printed  # the producer's address and port, not ip:0
    at = ok_json(
        "queryMsgByOffset", *n, "-t", topic, "-b", first["broker_name"], "-i", "0", "-o", str(first["queue_offset"])
    )
    assert at["msg_id"] == first["msg_id"] and at["keys"] == ["ck"]


@pytest.mark.timeout(60)
def test_resend_dead_letter(cluster):
    ns, a, b = cluster
    topic, group = "CliResend", "GCliResend"
    ok("updateTopic", "-n", ns.addr, "-c", CLUSTER, "-t", topic, "-r", "1", "-w", "1")
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.create_producer() as producer:
        producer.send(oms.BytesMessage(b"to-the-dlq", topic, keys=["rk"]))
    view = ok_json("queryMsgByKey", "-n", ns.addr, "-t", topic, "-k", "rk")[0]
    addr = a.addr if view["broker_name"] == "cli-a" else b.addr
    with grpc.insecure_channel(addr) as channel:  # RocketMQ's consumerSendMsgBack, straight to the DLQ
        response = consume_pb2_grpc.ConsumeStub(channel).SendBack(
            consume_pb2.SendBackRequest(
                group=group, topic=topic, commitlog_offset=view["commitlog_offset"], delay_level=-1
            ),
            timeout=10,
        )
    assert response.status.code == Code.OK

    out = ok("resendDeadLetter", "-n", ns.addr, "-g", group, "-i", view["unique_id"])
    assert f"from %DLQ%{group}" in out and f"to topic {topic}" in out and f"stays in %DLQ%{group}" in out
    copies = ok_json("queryMsgById", "-n", ns.addr, "-i", view["unique_id"], "-t", topic)
    assert [c["body"] for c in copies] == ["to-the-dlq", "to-the-dlq"], "the original and the resent copy"
    dlq = ok_json(
        "queryMsgByOffset", "-n", ns.addr, "-t", f"%DLQ%{group}", "-b", view["broker_name"], "-i", "0", "-o", "0"
    )
    result = ok_json("resendDeadLetter", "-n", ns.addr, "-g", group, "-b", view["broker_name"], "-o", "0")
    assert result["dead_letter"]["msg_id"] == dlq["msg_id"] and result["topic"] == topic


@pytest.mark.timeout(60)
def test_errors_exit_codes_and_stderr(cluster):
    ns, _, _ = cluster
    done = mqadmin_cmd("topicRoute", "-n", ns.addr, "-t", "CliNoSuchTopic")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("mqadmin topicRoute: TOPIC_NOT_FOUND(40402):") and "CliNoSuchTopic" in done.stderr
    done = mqadmin_cmd("updateTopic", "-n", ns.addr, "-t", "bad name!")
    assert done.returncode == 1 and "ILLEGAL_TOPIC(40002)" in done.stderr
    done = mqadmin_cmd("topicList")  # NAMESRV_ADDR removed from the environment
    assert done.returncode == 2 and "no name server" in done.stderr
    done = mqadmin_cmd("updateTopic", "-n", ns.addr)
    assert done.returncode == 2 and "-t/--topic" in done.stderr
    done = mqadmin_cmd("topicList", "-n", "127.0.0.1:1", "--timeout", "1000")
    assert done.returncode == 1 and "127.0.0.1:1" in done.stderr

    def run(*argv: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = mqadmin.run(list(argv), out, err)
        return code, out.getvalue(), err.getvalue()

    code, _, err = run("updateSubGroup", "-n", ns.addr, "-g", "GCliBad", "--allocateStrategy", "NOPE")
    assert code == 1 and "BAD_REQUEST(40000)" in err and "NOPE" in err
    code, _, err = run("deleteSubGroup", "-n", ns.addr, "-g", "GCliNone")
    assert code == 1 and "CONSUMER_GROUP_NOT_FOUND(40403)" in err
    code, _, err = run("queryMsgById", "-n", ns.addr, "-i", "0" * 32)
    assert code == 1 and "MESSAGE_NOT_FOUND(40401)" in err
    code, _, err = run("updateTopic", "-n", ns.addr, "-t", "CliBad", "-c", "NoCluster")
    assert code == 1 and "NOT_FOUND(40400)" in err and CLUSTER in err, "names the clusters that exist"
    code, _, err = run("resendDeadLetter", "-n", ns.addr, "-g", "GCliResend")
    assert code == 2 and "-i msgId" in err
    code, _, err = run("resetOffsetByTime", "-n", ns.addr, "-g", "G", "-t", "T", "-s", "yesterday")
    assert code == 2 and "yyyy-MM-dd#HH:mm:ss:SSS" in err
    code, _, err = run("updateTopic", "-n", ns.addr, "-t", "CliBad", "-o", "maybe")
    assert code == 2 and "true or false" in err


@pytest.mark.timeout(90)
def test_update_topic_queue_type(cluster):
    ns, a, _ = cluster
    n = ("-n", ns.addr)
    out = ok("updateTopic", *n, "-c", CLUSTER, "-t", "CliBatch", "-r", "2", "-w", "2", "-a", "+queue.type=batchcq")
    assert "create topic to cli-a success." in out and "create topic to cli-b success." in out
    assert out.count("queue.type=BatchCQ") == 2, out  # the attribute column, in its canonical spelling
    # an update without -a keeps it; the same value again is fine
    infos = ok_json("updateTopic", *n, "-c", CLUSTER, "-t", "CliBatch", "-r", "4", "-w", "4")
    assert [(i["broker_name"], i["read_queue_nums"], i["attributes"]) for i in infos] == [
        ("cli-a", 4, {"queue.type": "BatchCQ"}),
        ("cli-b", 4, {"queue.type": "BatchCQ"}),
    ]
    ok("updateTopic", *n, "-c", CLUSTER, "-t", "CliBatch", "-a", "+queue.type=BatchCQ,+owner=ops")

    def refused(*argv: str) -> str:
        done = mqadmin_cmd("updateTopic", *n, "-c", CLUSTER, "-t", "CliBatch", *argv)
        assert done.returncode == 1 and done.stdout == "", (done.stdout, done.stderr)
        assert done.stderr.startswith("mqadmin updateTopic: BAD_REQUEST(40000):") and "queue.type" in done.stderr
        return done.stderr

    assert "cannot change" in refused("-r", "8", "-a", "+queue.type=SimpleCQ")
    assert "cannot be removed" in refused("--attributes=-queue.type")
    err = refused("-a", "+queue.type=Fancy")
    assert "SimpleCQ" in err and "BatchCQ" in err
    # refused before any broker was written: both keep 4 queues and BatchCQ
    infos = ok_json("updateTopic", *n, "-c", CLUSTER, "-t", "CliBatch")
    assert [(i["read_queue_nums"], i["attributes"]) for i in infos] == [
        (4, {"queue.type": "BatchCQ", "owner": "ops"}),
        (4, {"queue.type": "BatchCQ", "owner": "ops"}),
    ]
    # a topic on one broker only, then extended to the cluster: the new broker gets the same queue.type
    ok("updateTopic", "-b", a.addr, "-t", "CliBatchOne", "-a", "+queue.type=BatchCQ", env={"NAMESRV_ADDR": ns.addr})
    infos = ok_json("updateTopic", *n, "-c", CLUSTER, "-t", "CliBatchOne", "-a", "+queue.type=BatchCQ")
    assert {i["broker_name"]: i["attributes"]["queue.type"] for i in infos} == {"cli-a": "BatchCQ", "cli-b": "BatchCQ"}
    ok("deleteTopic", *n, "-t", "CliBatchOne", "-c", CLUSTER)
    ok("deleteTopic", *n, "-t", "CliBatch", "-c", CLUSTER)


def test_parsing_helpers():
    local = datetime(2024, 3, 5, 7, 8, 9, 123000).timestamp()
    assert mqadmin.parse_timestamp("2024-03-05#07:08:09:123") == int(local * 1000)
    assert mqadmin.parse_timestamp("2024-03-05T07:08:09.123") == int(local * 1000)
    assert mqadmin.parse_timestamp("1700000000000") == 1_700_000_000_000
    assert mqadmin.parse_timestamp("now", now_ms=42) == 42
    assert mqadmin.parse_attributes("+message.type=FIFO, +a=b=c,-gone,plain=1") == {
        "message.type": "FIFO",
        "a": "b=c",
        "gone": None,
        "plain": "1",
    }
    with pytest.raises(Exception, match="expected"):
        mqadmin.parse_attributes("+novalue")
    assert mqadmin.parse_attributes("+queue.type=BatchCQ") == {"queue.type": "BatchCQ"}
    args = mqadmin.build_parser().parse_args(["updateTopic", "-t", "T", "-a", "+queue.type=BatchCQ"])
    assert args.attributes == "+queue.type=BatchCQ"
    assert mqadmin.parse_options("virtualNodeCnt=10,inner=AVG") == {"virtualNodeCnt": "10", "inner": "AVG"}
    out = io.StringIO()
    mqadmin.table(["A", "Long Header"], [("xxxxx", 1), ("y", 22)], out)
    assert out.getvalue().splitlines() == ["#A     #Long Header", "xxxxx  1", "y      22"]


@pytest.mark.timeout(90)
def test_send_and_consume_message(cluster):
    ns, _, _ = cluster
    n = ("-n", ns.addr)
    topic, fifo = "CliSend", "CliSendFifo"
    ok("updateTopic", *n, "-c", CLUSTER, "-t", topic, "-r", "2", "-w", "2")
    ok("updateTopic", *n, "-b", "cli-a", "-t", fifo, "-r", "4", "-w", "4", "-a", "+message.type=FIFO")
    before = int(time.time() * 1000) - 1000

    out = ok("sendMessage", *n, "-t", topic, "-p", "hello cli", "-k", "k1,k2", "-c", "TagS").splitlines()
    assert out[0].split() == ["#Broker", "Name", "#QID", "#Queue", "Offset", "#MsgId", "#Send", "Result"]
    assert out[1].split()[-1] == "SEND_OK" and out[1].split()[1] == "-", "the broker chose the queue"
    sent = [ok_json("sendMessage", *n, "-t", topic, "-p", f"m{i}") for i in range(3)]
    assert all(s["status"] == "SEND_OK" for s in sent)
    pinned = ok_json("sendMessage", *n, "-t", fifo, "-p", "to q2", "-b", "cli-a", "-i", "2", "-c", "TagF")
    assert pinned["queue"] == {"topic": fifo, "broker_name": "cli-a", "queue_id": 2}

    rows = ok_json("consumeMessage", *n, "-t", topic)
    assert sorted(r["body"] for r in rows) == ["hello cli", "m0", "m1", "m2"]
    first = next(r for r in rows if r["body"] == "hello cli")
    assert first["tags"] == "TagS" and first["keys"] == ["k1", "k2"] and first["msg_id"]
    assert ok_json("consumeMessage", *n, "-t", topic, "-c", "2").__len__() == 2
    assert ok_json("consumeMessage", *n, "-t", topic, "-e", str(before)) == [], "nothing stored before -e"
    assert len(ok_json("consumeMessage", *n, "-t", topic, "-s", str(before))) == 4
    assert ok_json("consumeMessage", *n, "-t", topic, "-s", "now") == []
    one = ok_json(
        "consumeMessage", *n, "-t", topic, "-b", first["broker_name"], "-i", str(first["queue_id"]),
        "-o", str(first["queue_offset"]), "-c", "1",
    )  # fmt: skip
    assert [(r["msg_id"], r["body"]) for r in one] == [(first["msg_id"], "hello cli")]
    fifo_rows = ok("consumeMessage", *n, "-t", fifo, "-b", "cli-a", "-i", "2", "-g", "GCliTools").splitlines()
    assert fifo_rows[0].startswith("#MsgId") and fifo_rows[-1] == "1 message(s)"
    assert "TagF" in fifo_rows[1] and fifo_rows[1].rstrip().endswith("to q2") and pinned["message_id"] in fifo_rows[1]
    assert ok_json("consumerProgress", *n, "-g", "GCliTools", "-t", fifo)["queues"][2]["consumer_offset"] <= 0, (
        "consumeMessage only reads"
    )


@pytest.mark.timeout(60)
def test_send_and_consume_errors(cluster):
    ns, _, _ = cluster
    n = ("-n", ns.addr)
    ok("updateTopic", *n, "-c", CLUSTER, "-t", "CliSendErr", "-r", "2", "-w", "2")
    # (a send to an unknown topic creates it, as RocketMQ's autoCreateTopicEnable brokers do)
    done = mqadmin_cmd("sendMessage", *n, "-t", "bad topic!", "-p", "x")
    assert done.returncode == 1 and done.stdout == "" and "ILLEGAL_TOPIC(40002)" in done.stderr
    done = mqadmin_cmd("consumeMessage", *n, "-t", "CliConsumeNoSuchTopic")
    assert done.returncode == 1 and done.stdout == "" and "TOPIC_NOT_FOUND(40402)" in done.stderr
    done = mqadmin_cmd("consumeMessage", *n, "-t", "CliSendErr", "-b", "cli-a", "-i", "9")
    assert done.returncode == 1 and "BAD_REQUEST(40000)" in done.stderr and "cli-a:1" in done.stderr
    done = mqadmin_cmd("consumeMessage", *n, "-t", "CliSendErr", "-b", "cli-a", "-i", "0", "-o", "50")
    assert done.returncode == 1 and "ILLEGAL_OFFSET(40019)" in done.stderr
    done = mqadmin_cmd("consumeMessage", *n, "-t", "CliSendErr", "-o", "0")
    assert done.returncode == 2 and "-i queueId" in done.stderr
    # a normal topic: the message goes, plain, to the queue asked for (RocketMQ 4 partition order)
    sent = ok_json("sendMessage", *n, "-t", "CliSendErr", "-p", "to q1", "-b", "cli-a", "-i", "1")
    assert sent["queue"] == {"topic": "CliSendErr", "broker_name": "cli-a", "queue_id": 1}
    done = mqadmin_cmd("sendMessage", *n, "-t", "CliSendErr", "-p", "x", "-b", "cli-a", "-i", "7")
    assert done.returncode == 1 and "BAD_REQUEST(40000)" in done.stderr and "cli-a:0" in done.stderr
    stored = ok_json("consumeMessage", *n, "-t", "CliSendErr")
    assert [(r["body"], r["queue_id"]) for r in stored] == [("to q1", 1)], "only the pinned send was stored"
