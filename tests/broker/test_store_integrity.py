"""A record damaged on disk while the broker was stopped is never served: every read path (v2 PullMessage, PullBatch
through ``oms``, the official SimpleConsumer's ReceiveMessage) answers its offset as corrupt or skips it, serves
everything else intact, and the broker reports it (runtime info, quarantine copy)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rocketmq.grpc_protocol import definition_pb2

import oms
from tests.broker.v2client import message, raw_client
from tests.pop.client_helpers import receive_until, simple_consumer

TOPIC = "Damaged"
VICTIM = b"victim-body-0004"
BODIES = [f"intact-body-{i:04d}".encode() for i in range(10)]
BODIES[4] = VICTIM


def _flip_a_byte_of(store: Path, needle: bytes) -> None:
    hits = []
    for segment in sorted((store / "commitlog").iterdir()):
        data = segment.read_bytes()
        at = data.find(needle)
        if at >= 0:
            hits.append((segment, at))
    assert len(hits) == 1, hits
    segment, at = hits[0]
    with open(segment, "r+b") as f:
        f.seek(at + 3)
        byte = f.read(1)
        f.seek(at + 3)
        f.write(bytes([byte[0] ^ 0x20]))  # "victim" -> "viCtim": a plausible body, only the CRC tells


@pytest.mark.timeout(120)
def test_a_damaged_record_is_never_served_and_readers_move_past_it(broker):
    with raw_client(broker.addr) as c:
        sent = c.send(*[message(TOPIC, body) for body in BODIES])  # one request: one queue, offsets 0-9
        assert sent.status.code == definition_pb2.Code.OK
        qid = next(q for q in range(8) if c.pull("g-find", TOPIC, q, 0, batch=16).messages)
    broker.stop()  # cleanly: the damage is made while it is down, as a disk would
    _flip_a_byte_of(broker.store, VICTIM)
    broker.start()

    with raw_client(broker.addr) as c:
        before = c.pull("g-v2", TOPIC, qid, 0, batch=32)
        assert [m.body for m in before.messages] == BODIES[:4] and before.next_offset == 4
        at = c.pull("g-v2", TOPIC, qid, 4, batch=32)
        assert at.status.code == definition_pb2.Code.MESSAGE_CORRUPTED and not at.messages
        assert at.next_offset == 5 and "offset 4" in at.status.message
        after = c.pull("g-v2", TOPIC, qid, 5, batch=32)
        assert [m.body for m in after.messages] == BODIES[5:]

    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{broker.addr}/") as ap,
        ap.create_pull_consumer(consumer_id="GDamagedPull") as pc,
    ):
        queue = next(q for q in pc.queues(TOPIC) if q.queue_id == qid)
        first = pc.pull(queue, 0, 32)
        assert [m.body for m in first] == BODIES[:4] and first.next_offset == 4
        skipped = pc.pull(queue, 4, 32)
        assert skipped.status is oms.PullStatus.NO_MATCHED_MSG and skipped.next_offset == 5 and not skipped.messages
        assert [m.body for m in pc.pull(queue, 5, 32)] == BODIES[5:]
        columns = pc.pull_columns(queue, 0, 32)
        assert columns.columns is not None and columns.columns.bodies == BODIES[:4] and columns.next_offset == 4
        runtime = ap.resource_manager().broker_runtime_info(broker.addr)
        assert runtime["corruptRecordTotal"] == "1"

    with simple_consumer(broker.addr, "GDamagedSimple", TOPIC) as consumer:
        got = receive_until(consumer, len(BODIES) - 1, invisible_s=30, timeout=30)
        for m in got:
            consumer.ack(m)
        assert sorted(m.body for m in got) == sorted(b for b in BODIES if b != VICTIM)
        assert not consumer.receive(16, 30)  # the damaged one is not waiting to be redelivered either
    quarantined = list((broker.store / "quarantine").iterdir())
    assert len(quarantined) == 1 and VICTIM[:3] in quarantined[0].read_bytes()
