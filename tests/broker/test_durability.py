"""Durability across broker restarts: messages and committed offsets after SIGTERM and after SIGKILL (SYNC_FLUSH)."""

from __future__ import annotations

import json
import signal
import time

import pytest
from rocketmq.grpc_protocol import definition_pb2

from tests.broker.v2client import message, raw_client

OK = definition_pb2.Code.OK


def _send_all(addr: str, topic: str, n: int) -> dict[str, int]:
    """Single-message sends (round robin over queues); message id -> queue offset."""
    acked = {}
    with raw_client(addr) as c:
        for i in range(n):
            resp = c.send(message(topic, f"body-{i}".encode(), keys=[f"k{i}"]))
            assert resp.status.code == OK, resp.status
            acked[resp.entries[0].message_id] = resp.entries[0].offset
    return acked


def _pull_all(addr: str, topic: str) -> list[definition_pb2.Message]:
    out = []
    with raw_client(addr) as c:
        for qid in range(4):
            r = c.pull("dur", topic, qid, 0, batch=1000)
            out += r.messages
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["clean", "kill9"])
def test_messages_and_offsets_survive_restart(broker_factory, sig):
    b = broker_factory.broker(options={"flushDiskType": "SYNC_FLUSH"})
    acked = _send_all(b.addr, "DurT", 40)
    with raw_client(b.addr) as c:
        assert c.update_offset("dur-group", "DurT", 1, 3).code == OK
        if sig == signal.SIGKILL:
            # offsets persist periodically (flushConsumerOffsetInterval=500ms in tests)
            time.sleep(1.5)
    b.restart(sig)
    stored = _pull_all(b.addr, "DurT")
    assert sorted(m.system_properties.message_id for m in stored) == sorted(acked)
    assert all(m.body.startswith(b"body-") for m in stored)
    with raw_client(b.addr) as c:
        got = c.get_offset("dur-group", "DurT", 1)
        assert got.status.code == OK and got.offset == 3
        # the broker keeps appending after recovery at the right offsets
        more = _send_all(b.addr, "DurT", 4)
    assert sorted(more.values()) == [10, 10, 10, 10]
    assert "broker stopped" in b.log() or sig == signal.SIGKILL
    offsets = json.loads((b.store / "config" / "consumerOffset.json").read_text())
    assert offsets["offsetTable"]["DurT@dur-group"]["1"] == 3
