"""PullMessage (tag filter, long polling) and GetOffset/UpdateOffset/QueryOffset against a real broker."""

from __future__ import annotations

import hashlib
import threading
import time

from rocketmq.grpc_protocol import definition_pb2

from tests.broker.v2client import message, raw_client

OK = definition_pb2.Code.OK
NOT_FOUND = definition_pb2.Code.MESSAGE_NOT_FOUND


def _queue_of(client, topic: str, body: bytes) -> int:
    for qid in range(4):
        r = client.pull("g-find", topic, qid, 0, batch=64)
        if any(m.body == body for m in r.messages):
            return qid
    raise AssertionError("message not found in any queue")


def test_pull_offsets_and_filters(broker):
    with raw_client(broker.addr) as c:
        resp = c.send(*[message("PullT", f"m{i}".encode(), tag="A" if i % 2 else "B") for i in range(10)])
        assert resp.status.code == OK
        assert [e.offset for e in resp.entries] == list(range(10))
        qid = _queue_of(c, "PullT", b"m0")

        r = c.pull("g1", "PullT", qid, 0, batch=4)
        assert r.status.code == OK
        assert [m.body for m in r.messages] == [b"m0", b"m1", b"m2", b"m3"]
        assert r.next_offset == 4
        m0 = r.messages[0]
        sp = m0.system_properties
        assert sp.body_encoding == definition_pb2.IDENTITY
        assert sp.delivery_attempt == 1
        assert sp.queue_offset == 0 and sp.queue_id == qid
        assert sp.message_id == resp.entries[0].message_id
        assert sp.body_digest.type == definition_pb2.MD5
        assert sp.body_digest.checksum == hashlib.md5(b"m0").hexdigest().upper()

        r = c.pull("g1", "PullT", qid, 0, batch=32, tag_expr="A")
        assert [m.body for m in r.messages] == [f"m{i}".encode() for i in range(1, 10, 2)]
        assert all(m.system_properties.tag == "A" for m in r.messages)
        r = c.pull("g1", "PullT", qid, 0, batch=32, tag_expr="A || B")
        assert len(r.messages) == 10

        # At the end: nothing, and next_offset stays.
        r = c.pull("g1", "PullT", qid, 10)
        assert r.status.code == NOT_FOUND and r.next_offset == 10 and not r.messages
        # Beyond the end: ILLEGAL_OFFSET with the corrected offset.
        r = c.pull("g1", "PullT", qid, 50)
        assert r.status.code == definition_pb2.Code.ILLEGAL_OFFSET and r.next_offset == 10

        # Offsets: none committed yet, then commit / read back, out of range refused.
        assert c.get_offset("g1", "PullT", qid).status.code == definition_pb2.Code.OFFSET_NOT_FOUND
        assert c.update_offset("g1", "PullT", qid, 7).code == OK
        got = c.get_offset("g1", "PullT", qid)
        assert got.status.code == OK and got.offset == 7
        assert c.update_offset("g1", "PullT", qid, 11).code == definition_pb2.Code.ILLEGAL_OFFSET

        policy = definition_pb2.QueryOffsetPolicy
        assert c.query_offset("PullT", qid, policy.BEGINNING).offset == 0
        assert c.query_offset("PullT", qid, policy.END).offset == 10
        assert c.query_offset("PullT", qid, policy.TIMESTAMP, int(time.time() * 1000) + 60_000).offset == 10
        assert c.query_offset("PullT", qid, policy.TIMESTAMP, 0).offset == 0

        # Unknown topic.
        r = c.pull("g1", "NoSuchTopic", 0, 0)
        assert r.status.code == definition_pb2.Code.TOPIC_NOT_FOUND


def test_pull_long_polling_wakes_on_arrival(broker):
    with raw_client(broker.addr) as c:
        assert c.send(message("LpT", b"first")).status.code == OK
        qid = _queue_of(c, "LpT", b"first")
        end = c.query_offset("LpT", qid, definition_pb2.QueryOffsetPolicy.END).offset

        # Empty long poll: returns MESSAGE_NOT_FOUND after about the requested time, not before.
        t0 = time.monotonic()
        r = c.pull("g", "LpT", qid, end, polling_s=1.0)
        waited = time.monotonic() - t0
        assert r.status.code == NOT_FOUND and 0.9 <= waited < 3.0, waited

        # A message arriving during the poll wakes it at once. The topic has 4 queues and sends round-robin,
        # so send 4 single messages: one of them lands in qid.
        def produce() -> None:
            time.sleep(0.5)
            with raw_client(broker.addr) as p:
                for i in range(4):
                    p.send(message("LpT", f"late{i}".encode()))

        thread = threading.Thread(target=produce)
        t0 = time.monotonic()
        thread.start()
        r = c.pull("g", "LpT", qid, end, polling_s=10.0)
        waited = time.monotonic() - t0
        thread.join(10)
        assert r.status.code == OK, r.status
        assert r.messages and r.messages[0].body.startswith(b"late")
        assert 0.4 <= waited < 2.0, f"long poll took {waited:.2f}s"


def test_sigterm_releases_parked_pulls(broker):
    with raw_client(broker.addr) as c:
        assert c.send(message("ParkT", b"x")).status.code == OK
        end = c.query_offset("ParkT", 0, definition_pb2.QueryOffsetPolicy.END).offset
    result = {}

    def park() -> None:
        with raw_client(broker.addr) as p:
            t0 = time.monotonic()
            result["status"] = p.pull("g", "ParkT", 0, end, polling_s=20).status.code
            result["took"] = time.monotonic() - t0

    thread = threading.Thread(target=park)
    thread.start()
    time.sleep(1.0)
    t0 = time.monotonic()
    assert broker.stop() == 0
    stop_took = time.monotonic() - t0
    thread.join(10)
    assert result["status"] == NOT_FOUND
    assert result["took"] < 5 and stop_took < 2.0, (result, stop_took)
