"""A real, independent RocketMQ 4 client, ali-ons (pure JavaScript, from npm), against a real name server and broker
over the remoting protocol: send, push consume with a tag filter, and messages crossing to and from v2 (oms)."""

from __future__ import annotations

import hashlib
import json
import socket
import struct
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import oms
from orbitmq.remoting.codec import RemotingCommand, decode, encode
from orbitmq.remoting.codes import RequestCode, ResponseCode
from tests.conftest import BrokerHandle, NamesrvHandle
from tests.remoting.raw import rocketmq_batch
from tests.remoting.stack import DriverProcess, find_node, remoting_stack, run_driver
from tests.waiting import wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def node() -> str:
    return find_node()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NamesrvHandle, str, BrokerHandle]]:
    # short retry delays (levels 3+): retries in seconds; level 2 is 2 s for the delay-level test
    levels = " ".join(["100ms", "2s"] + ["100ms"] * 16)
    with remoting_stack(tmp_path_factory.mktemp("remoting"), {"messageDelayLevel": levels}) as st:
        yield st.ns, st.remoting_ns, st.broker


@pytest.mark.timeout(180)
def test_ali_ons_sends_and_consumes_with_tags(node: str, stack) -> None:
    ns, remoting_ns, _broker = stack
    topic = "RemotingT"
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.resource_manager() as rm:
        rm.create_topic(topic, read_queue_nums=4, write_queue_nums=4)
    sent = run_driver(node, "produce", remoting_ns, topic, "6")
    assert [s["status"] for s in sent] == ["SEND_OK"] * 6, sent
    assert len({s["msgId"] for s in sent}) == 6

    # the same messages through v2: bodies, tags and keys as ali-ons sent them
    got: list[oms.BytesMessage] = []
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap,
        ap.create_pull_consumer({"rmq.consume.from.where": "first"}, consumer_id="GRemotingV2") as pc,
    ):
        pc.attach_queue(topic)

        def received() -> bool:
            for m in pc.batch_receive(16, 0.5):
                pc.ack(m)
                got.append(m)
            return len(got) >= 6

        wait_until(received, 30, what="v2 receives what ali-ons sent")
    assert sorted(m.body.decode() for m in got) == [f"ali-{i}" for i in range(6)]
    tagged = {m.body.decode(): (m.tags, m.keys) for m in got}
    assert tagged["ali-0"] == ("TagA", ["key-0"]) and tagged["ali-1"] == ("TagB", ["key-1"])

    # oms sends one more TagA message; ali-ons consumes TagA only, its own and oms's
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.create_producer() as producer:
        producer.send(oms.BytesMessage(b"from-oms", topic, tags="TagA"))
    consumed = run_driver(node, "consume", remoting_ns, topic, "GRemotingAli", "TagA", "4", "60000")
    bodies = sorted(str(c["body"]) for c in consumed)
    assert bodies == ["ali-0", "ali-2", "ali-4", "from-oms"], consumed
    assert all(c["tags"] == "TagA" for c in consumed)


def _call(sock: socket.socket, cmd: RemotingCommand) -> RemotingCommand:
    sock.sendall(encode(cmd))
    (total,) = struct.unpack(">i", _read(sock, 4))
    return decode(_read(sock, total))


def _read(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed by the server")
        data += chunk
    return data


@pytest.mark.timeout(60)
def test_bad_input_gets_an_answer_or_closes_that_connection_only(stack) -> None:
    _ns, remoting_ns, broker = stack
    host, port = remoting_ns.rsplit(":", 1)
    broker_port = int(broker.options["remotingListenPort"])
    with socket.create_connection(("127.0.0.1", broker_port), timeout=10) as healthy:
        unknown = _call(healthy, RemotingCommand(9999, opaque=1))
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "9999" in (unknown.remark or "")
        missing = _call(healthy, RemotingCommand(RequestCode.PULL_MESSAGE, opaque=2, ext_fields={"topic": "T"}))
        assert missing.code == ResponseCode.SYSTEM_ERROR and "consumerGroup" in (missing.remark or "")
        bad_topic = _call(
            healthy,
            RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=3, ext_fields={"b": "bad topic!", "e": "0"}, body=b"x"),
        )
        assert bad_topic.code == ResponseCode.MESSAGE_ILLEGAL and "bad topic!" in (bad_topic.remark or "")
        bad_queue = _call(
            healthy,
            RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=7, ext_fields={"b": "RemotingT", "e": "x"}, body=b"x"),
        )
        assert bad_queue.code == ResponseCode.SYSTEM_ERROR and "'queueId' is not a number" in (bad_queue.remark or "")
        half = _call(
            healthy,
            RemotingCommand(
                RequestCode.SEND_MESSAGE_V2,
                opaque=8,
                ext_fields={"b": "RemotingT", "e": "0", "i": "TRAN_MSG\x01true\x02DELAY\x013\x02"},
                body=b"half",
            ),
        )
        assert half.code == ResponseCode.MESSAGE_ILLEGAL and "'DELAY'" in (half.remark or ""), (
            "a transactional message with a delay level is refused, never stored"
        )
        for garbage in (b"\xff\xff\xff\xff", struct.pack(">i", 64 * 1024 * 1024), struct.pack(">i", 6) + b"{{{{{{"):
            with socket.create_connection(("127.0.0.1", broker_port), timeout=10) as bad:
                bad.sendall(garbage)
                assert bad.recv(16) == b"", "the server closes a connection that sends a malformed frame"
        # the other connection and the name server are unaffected
        assert (
            _call(
                healthy,
                RemotingCommand(
                    RequestCode.GET_MAX_OFFSET, opaque=4, ext_fields={"topic": "RemotingT", "queueId": "0"}
                ),
            ).code
            == 0
        )
    with socket.create_connection((host, int(port)), timeout=10) as s:
        route = _call(
            s, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=5, ext_fields={"topic": "RemotingT"})
        )
        assert route.code == ResponseCode.SUCCESS
        addrs = json.loads(route.body)["brokerDatas"][0]["brokerAddrs"]
        assert addrs == {"0": f"127.0.0.1:{broker_port}"}, "routes name the broker's remoting address"
        nothing = _call(s, RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=6, ext_fields={"topic": "Nope"}))
        assert nothing.code in (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST)


@pytest.mark.timeout(120)
def test_ali_ons_failed_consumption_is_retried_then_dead_lettered(node: str, stack) -> None:
    ns, remoting_ns, _broker = stack
    topic, group = "RemotingRetryT", "GRemotingRetry"
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.resource_manager() as rm:
        rm.create_topic(topic, read_queue_nums=1, write_queue_nums=1)
        with ap.create_producer() as producer:
            sent = producer.send(oms.BytesMessage(b"fail-me", topic, keys=["dead-key"]))
        attempts = run_driver(node, "fail", remoting_ns, topic, group, "8000")
        assert [a["body"] for a in attempts][:2] == ["fail-me", "fail-me"], attempts
        assert [a["reconsumeTimes"] for a in attempts][:2] == [0, 1], "the second delivery comes from the retry topic"

        def dead_lettered() -> bool:
            return any(v.unique_id == sent.message_id for v in rm.query_message_by_key(f"%DLQ%{group}", "dead-key"))

        wait_until(dead_lettered, 30, what="the message in the group's DLQ after its last attempt")


@pytest.mark.timeout(60)
def test_batch_sends_and_queue_locks_over_remoting(stack) -> None:
    ns, _remoting_ns, broker = stack
    port = int(broker.options["remotingListenPort"])
    topic = "RemotingBatchT"
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.resource_manager() as rm:
        rm.create_topic(topic, read_queue_nums=2, write_queue_nums=2)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        batch = rocketmq_batch([b"b0", b"b1", b"b2"], "TAGS\x01TagBatch\x02")
        sent = _call(
            s,
            RemotingCommand(
                RequestCode.SEND_MESSAGE_V2, opaque=1, ext_fields={"b": topic, "e": "1", "m": "true"}, body=batch
            ),
        )
        assert sent.code == ResponseCode.SUCCESS, sent.remark
        assert len(sent.ext_fields["msgId"].split(",")) == 3 and sent.ext_fields["queueId"] == "1"
        delayed = rocketmq_batch([b"x"], "DELAY\x013\x02")
        refused = _call(
            s,
            RemotingCommand(
                RequestCode.SEND_MESSAGE_V2, opaque=2, ext_fields={"b": topic, "e": "0", "m": "true"}, body=delayed
            ),
        )
        assert refused.code == ResponseCode.MESSAGE_ILLEGAL and "delay level" in (refused.remark or "")

        def lock(client: str, code: int = RequestCode.LOCK_BATCH_MQ) -> list[int]:
            mqs = [{"topic": topic, "brokerName": "remoting-a", "queueId": q} for q in (0, 1)]
            body = json.dumps({"consumerGroup": "GRemotingOrderly", "clientId": client, "mqSet": mqs}).encode()
            answer = _call(s, RemotingCommand(code, opaque=3, body=body))
            assert answer.code == ResponseCode.SUCCESS, answer.remark
            return sorted(q["queueId"] for q in json.loads(answer.body or b"{}").get("lockOKMQSet", []))

        assert lock("client-a") == [0, 1]
        assert lock("client-b") == [], "queues another client holds are not handed out"
        lock("client-a", RequestCode.UNLOCK_BATCH_MQ)
        assert lock("client-b") == [0, 1]
    # the three messages are in queue 1, in order, with their tag
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.resource_manager() as rm:
        views = [rm.query_message_by_offset(topic, 1, i) for i in range(3)]
    assert [v.body for v in views] == [b"b0", b"b1", b"b2"] and {v.tags for v in views} == {"TagBatch"}


@pytest.mark.timeout(60)
def test_query_by_key_and_view_by_id_over_remoting(stack) -> None:
    ns, _remoting_ns, broker = stack
    port = int(broker.options["remotingListenPort"])
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.create_producer() as producer:
        producer.send(oms.BytesMessage(b"find me", "RemotingQueryT", keys=["qk-1"]))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        found = _call(
            s,
            RemotingCommand(RequestCode.QUERY_MESSAGE, opaque=1, ext_fields={"topic": "RemotingQueryT", "key": "qk-1"}),
        )
        assert found.code == ResponseCode.SUCCESS, found.remark
        total, magic = struct.unpack_from(">ii", found.body, 0)
        assert total == len(found.body) and magic == -626843481, "one message in RocketMQ's MessageDecoder layout"
        assert b"find me" in found.body
        phys = struct.unpack_from(">q", found.body, 28)[0]  # physical offset field
        viewed = _call(s, RemotingCommand(RequestCode.VIEW_MESSAGE_BY_ID, opaque=2, ext_fields={"offset": str(phys)}))
        assert viewed.code == ResponseCode.SUCCESS and viewed.body == found.body
        missing = _call(
            s,
            RemotingCommand(RequestCode.QUERY_MESSAGE, opaque=3, ext_fields={"topic": "RemotingQueryT", "key": "nope"}),
        )
        assert missing.code == ResponseCode.QUERY_NOT_FOUND and "nope" in (missing.remark or "")


def _create_topic(ns: NamesrvHandle, topic: str, queues: int) -> None:
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.resource_manager() as rm:
        rm.create_topic(topic, read_queue_nums=queues, write_queue_nums=queues)


def _max_offset(broker: BrokerHandle, topic: str, queue_id: int) -> int:
    with socket.create_connection(("127.0.0.1", int(broker.options["remotingListenPort"])), timeout=10) as s:
        header = {"topic": topic, "queueId": str(queue_id)}
        answer = _call(s, RemotingCommand(RequestCode.GET_MAX_OFFSET, opaque=1, ext_fields=header))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return int(answer.ext_fields["offset"])


@pytest.mark.timeout(120)
def test_ali_ons_delay_level_holds_messages_back(node: str, stack) -> None:
    ns, remoting_ns, broker = stack
    topic = "RemotingDelayT"
    _create_topic(ns, topic, 1)
    sent = run_driver(node, "produce-delayed", remoting_ns, topic, "2", "2")  # level 2: 2 s on this broker
    assert [s["status"] for s in sent] == ["SEND_OK"] * 2, sent
    assert _max_offset(broker, topic, 0) == 0, "parked in SCHEDULE_TOPIC_XXXX, not yet in the topic"
    consumed = run_driver(node, "consume", remoting_ns, topic, "GRemotingDelay", "*", "2", "60000")
    assert sorted(str(c["body"]) for c in consumed) == ["ali-0", "ali-1"]
    for c in consumed:
        held_ms = int(str(c["storeTimestamp"])) - int(str(c["bornTimestamp"]))
        assert held_ms >= 1900, f"stored in {topic} {held_ms} ms after it was sent: level 2 is 2 s"
        assert c["topic"] == topic


@pytest.mark.timeout(120)
def test_ali_ons_sharding_keys_keep_order_per_queue(node: str, stack) -> None:
    ns, remoting_ns, _broker = stack
    topic, queues, per_key = "RemotingOrderT", 4, 5
    _create_topic(ns, topic, queues)
    # ali-ons picks queue md5(key)[:4] % queues but treats queue 0 as "no queue" (a falsy id): keys for 1..3 only
    keys = [k for k in (f"order-{n}" for n in range(40)) if _ali_ons_shard(k, queues) != 0][:3]
    sent = run_driver(node, "produce-ordered", remoting_ns, topic, ",".join(keys), str(per_key))
    assert len(sent) == len(keys) * per_key and {s["status"] for s in sent} == {"SEND_OK"}
    for i, s in enumerate(sent):
        assert int(str(s["queueId"])) == _ali_ons_shard(keys[i % len(keys)], queues), "one queue per sharding key"

    total = len(keys) * per_key
    consumed = run_driver(node, "consume", remoting_ns, topic, "GRemotingOrder", "*", str(total), "60000")
    assert len(consumed) == total
    indexes = [int(str(c["body"]).split("-")[1]) for c in consumed]
    for k in range(len(keys)):
        of_key = [i for i in indexes if i % len(keys) == k]
        assert of_key == sorted(of_key) and len(of_key) == per_key, f"{keys[k]} consumed in send order: {of_key}"


def _ali_ons_shard(key: str, queues: int) -> int:
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big") % queues


@pytest.mark.timeout(180)
def test_ali_ons_broadcasting_gives_every_client_every_message(node: str, stack, tmp_path: Path) -> None:
    ns, remoting_ns, broker = stack
    topic, group = "RemotingBroadcastT", "GRemotingBroadcast"
    _create_topic(ns, topic, 2)
    home = {"HOME": str(tmp_path)}  # ali-ons keeps broadcasting offsets in files under $HOME, per client
    run_driver(node, "produce", remoting_ns, topic, "4")

    def listen(instance: str, count: int) -> list[str]:
        rows = run_driver(node, "broadcast", remoting_ns, topic, group, str(count), "60000", instance, env=home)
        return sorted(str(r["body"]) for r in rows)

    with ThreadPoolExecutor(2) as pool:
        a, b = pool.map(listen, ["client-a", "client-b"], [4, 4])
    assert a == b == [f"ali-{i}" for i in range(4)], "each client of a broadcasting group gets every message"

    # offsets are the client's own: client-a resumes where it stopped, and the broker holds none for the group
    with oms.get_messaging_access_point(f"oms:rocketmq://{ns.addr}/") as ap, ap.create_producer() as producer:
        for body in (b"late-0", b"late-1"):
            producer.send(oms.BytesMessage(body, topic))
    assert listen("client-a", 2) == ["late-0", "late-1"]
    with socket.create_connection(("127.0.0.1", int(broker.options["remotingListenPort"])), timeout=10) as s:
        for qid in (0, 1):
            header = {"consumerGroup": group, "topic": topic, "queueId": str(qid)}
            answer = _call(s, RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, opaque=qid + 1, ext_fields=header))
            assert answer.code == ResponseCode.QUERY_NOT_FOUND, "broadcasting offsets never reach the broker"


@pytest.mark.timeout(180)
def test_ali_ons_consumer_follows_an_offset_reset_while_running(node: str, stack) -> None:
    """mqadmin resetOffsetByTime over remoting while ali-ons consumes: its next pull is moved back (PULL_OFFSET_MOVED)
    and it consumes the messages again."""
    ns, remoting_ns, broker = stack
    topic, group = "RemotingResetT", "GRemotingReset"
    _create_topic(ns, topic, 1)
    run_driver(node, "produce", remoting_ns, topic, "3")
    consumer = DriverProcess(node, "consume", remoting_ns, topic, group, "*", "6", "90000")
    try:
        wait_until(lambda: len(consumer.rows) >= 3, 60, what="ali-ons consumed the three messages", interval=0.2)
        port = int(broker.options["remotingListenPort"])
        header = {"topic": topic, "group": group, "timestamp": "0", "isForce": "true"}

        def reset() -> bool:
            # the group's offset is committed by ali-ons a moment after consuming: retry until there is one
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                answer = _call(
                    s, RemotingCommand(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, opaque=1, ext_fields=header)
                )
            return answer.code == ResponseCode.SUCCESS

        wait_until(reset, 30, what="the reset accepted", interval=0.5)
        assert consumer.wait(90) == 0, consumer.stderr()[-2000:]
    finally:
        consumer.stop()
    bodies = [str(r["body"]) for r in consumer.rows]
    assert sorted(bodies) == sorted(["ali-0", "ali-1", "ali-2"] * 2), bodies
