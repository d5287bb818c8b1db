"""v2 SendMessage's two paths: a request of normal messages is checked and converted in one pass, any other takes
the general path; both store the same records and refuse bad input with the same codes."""

from __future__ import annotations

import time

import pytest
from rocketmq.grpc_protocol import definition_pb2

from tests.broker.v2client import message, raw_client

C = definition_pb2.Code


def _normals(topic: str, prefix: str) -> list[definition_pb2.Message]:
    out = [
        message(topic, f"{prefix}-plain".encode()),
        message(topic, f"{prefix}-tagged".encode(), tag="TagA", keys=["k1", "k2"], props={"color": "red", "n": "1"}),
        message(topic, f"{prefix}-gzip".encode(), tag="TagB"),
    ]
    out[2].system_properties.body_encoding = definition_pb2.GZIP
    out[1].system_properties.born_host = "10.1.2.3"
    return out


def _delayed(topic: str) -> definition_pb2.Message:
    m = message(topic, b"later")
    m.system_properties.message_type = definition_pb2.DELAY
    m.system_properties.delivery_timestamp.seconds = int(time.time()) + 600
    return m


def _stored(m: definition_pb2.Message) -> tuple[object, ...]:
    sp = m.system_properties
    return (
        m.body.split(b"-", 1)[1],
        sp.tag if sp.HasField("tag") else None,
        tuple(sp.keys),
        dict(m.user_properties),
        sp.body_encoding,
        sp.message_type,
        sp.born_host,
    )


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_both_paths_store_the_same_records(broker):
    topic = "SendPathsT"
    with raw_client(broker.addr) as c:
        general = _normals(topic, "general")
        resp = c.send(*general, _delayed(topic))  # a delayed member: the general path for all four
        assert resp.status.code == C.OK, resp.status
        plain = _normals(topic, "plain")
        resp = c.send(*plain)
        assert resp.status.code == C.OK, resp.status
        assert [e.message_id for e in resp.entries] == [m.system_properties.message_id for m in plain]
        assert all(e.status.code == C.OK for e in resp.entries)
        offsets = [e.offset for e in resp.entries]
        assert offsets == list(range(offsets[0], offsets[0] + 3))  # one queue, contiguous
        stored = {}
        for qid in range(8):
            for m in c.pull("SendPathsG", topic, qid, 0, batch=64).messages:
                stored[m.system_properties.message_id] = m
        for g, p, offset in zip(general, plain, offsets, strict=True):
            got_g, got_p = stored[g.system_properties.message_id], stored[p.system_properties.message_id]
            assert got_p.system_properties.queue_offset == offset
            assert _stored(got_g) == _stored(got_p)
        assert stored[plain[1].system_properties.message_id].system_properties.born_host == "10.1.2.3"


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_a_bad_message_is_refused_alike_on_both_paths(broker):
    with raw_client(broker.addr) as c:
        for bad in (
            message("SendPathsBadT", tag="a|b"),
            message("SendPathsBadT", b""),
            message("SendPathsBadT", message_id=" "),
            message("SendPathsBadT", props={"UNIQ_KEY": "forged"}),
            message("OtherTopicT"),
        ):
            alone = c.send(message("SendPathsBadT"), bad)
            with_fifo = c.send(message("SendPathsBadT"), bad, message("SendPathsBadT", group="g1"))
            assert alone.status.code != C.OK
            assert (alone.status.code, alone.status.message) == (with_fifo.status.code, with_fifo.status.message)
            assert len(alone.entries) == 2 and len(with_fifo.entries) == 3
        policy = definition_pb2.QueryOffsetPolicy.END
        assert sum(c.query_offset("SendPathsBadT", q, policy).offset for q in range(8)) == 0
