"""Queue leases for orderly offset-based consumers: one holder per queue, renewal, release, expiry, bad input."""

from __future__ import annotations

import time

import grpc
import pytest
from rocketmq.grpc_protocol import definition_pb2

from broker.queue_lock_manager import QueueLockManager
from orbitmq.proto import consume_pb2, consume_pb2_grpc
from tests.broker.v2client import message, raw_client

OK = definition_pb2.Code.OK


def _lock(stub, client: str, qids: list[int], lease_ms: int = 0) -> consume_pb2.LockQueuesResponse:
    req = consume_pb2.LockQueuesRequest(
        group="LockG", topic="LockT", client_id=client, queue_ids=qids, lease_ms=lease_ms
    )
    return stub.LockQueues(req, timeout=10)


@pytest.mark.timeout(60)
def test_leases_are_exclusive_renewable_and_expire(broker):
    with raw_client(broker.addr) as c, grpc.insecure_channel(broker.addr) as ch:
        assert c.send(message("LockT")).status.code == OK  # 4 queues
        stub = consume_pb2_grpc.ConsumeStub(ch)
        a = _lock(stub, "client-a", [0, 1, 2, 3])
        assert a.status.code == OK and list(a.locked_queue_ids) == [0, 1, 2, 3] and a.lease_ms == 60_000
        assert list(_lock(stub, "client-b", [0, 1, 2, 3]).locked_queue_ids) == []  # a rebalance cannot overlap
        unlock = consume_pb2.UnlockQueuesRequest(group="LockG", topic="LockT", client_id="client-a", queue_ids=[2, 3])
        assert stub.UnlockQueues(unlock, timeout=10).status.code == OK
        assert list(_lock(stub, "client-b", [0, 1, 2, 3]).locked_queue_ids) == [2, 3]
        # A short lease that is not renewed frees the queue for another member.
        assert list(_lock(stub, "client-a", [0], lease_ms=400).locked_queue_ids) == [0]
        assert list(_lock(stub, "client-b", [0]).locked_queue_ids) == []
        time.sleep(0.6)
        assert list(_lock(stub, "client-b", [0]).locked_queue_ids) == [0]
        # Renewing keeps what we hold; another group is independent.
        assert list(_lock(stub, "client-b", [0, 2]).locked_queue_ids) == [0, 2]
        other = consume_pb2.LockQueuesRequest(group="OtherG", topic="LockT", client_id="client-a", queue_ids=[0])
        assert list(stub.LockQueues(other, timeout=10).locked_queue_ids) == [0]


@pytest.mark.timeout(60)
def test_lock_bad_input(broker):
    with raw_client(broker.addr) as c, grpc.insecure_channel(broker.addr) as ch:
        assert c.send(message("LockT")).status.code == OK
        stub = consume_pb2_grpc.ConsumeStub(ch)
        assert _lock(stub, "", [0]).status.code == definition_pb2.Code.CLIENT_ID_REQUIRED
        assert _lock(stub, "c", [0], lease_ms=-1).status.code == definition_pb2.Code.BAD_REQUEST
        too_long = _lock(stub, "c", [0], lease_ms=10**9)
        assert too_long.status.code == definition_pb2.Code.BAD_REQUEST and "lease_ms" in too_long.status.message
        out_of_range = _lock(stub, "c", [7])
        assert out_of_range.status.code == definition_pb2.Code.BAD_REQUEST and "[7]" in out_of_range.status.message
        unknown = consume_pb2.LockQueuesRequest(group="LockG", topic="NoSuchLockT", client_id="c", queue_ids=[0])
        assert stub.LockQueues(unknown, timeout=10).status.code == definition_pb2.Code.TOPIC_NOT_FOUND


def test_lock_manager_with_a_fake_clock():
    now = [0.0]
    locks = QueueLockManager(clock=lambda: now[0])
    assert locks.try_lock("g", "t", "a", [1, 0, 1], 10) == [0, 1]
    assert locks.holder("g", "t", 0) == "a"
    now[0] = 9.9
    assert locks.try_lock("g", "t", "b", [0], 10) == []
    now[0] = 10.0
    assert locks.holder("g", "t", 0) is None
    assert locks.try_lock("g", "t", "b", [0], 10) == [0]
    locks.unlock("g", "t", "a", [0])  # not a's any more: b keeps it
    assert locks.holder("g", "t", 0) == "b"
