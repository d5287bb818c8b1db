"""The six allocation strategies on concrete cases taken from RocketMQ's semantics."""

from __future__ import annotations

import pytest

from plugins.allocators import STRATEGY_NAMES, AllocationError, QueueRef, create_strategy

Q = [QueueRef("broker-a", i) for i in range(8)]
CIDS = ["c1", "c2", "c3"]


def ids(refs: list[QueueRef]) -> list[int]:
    return [q.queue_id for q in refs]


def test_averagely_contiguous_blocks_first_clients_get_the_remainder():
    s = create_strategy("AVG")
    assert [ids(s.allocate("g", c, Q, CIDS)) for c in CIDS] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    # More clients than queues: the extra clients get nothing (exclusive ownership).
    assert [ids(s.allocate("g", c, Q[:2], CIDS)) for c in CIDS] == [[0], [1], []]


def test_by_circle_is_round_robin():
    s = create_strategy("AllocateMessageQueueAveragelyByCircle")  # Java class names are aliases
    assert [ids(s.allocate("g", c, Q, CIDS)) for c in CIDS] == [[0, 3, 6], [1, 4, 7], [2, 5]]


def test_unknown_client_gets_nothing_and_inputs_are_sorted():
    s = create_strategy("avg")
    assert s.allocate("g", "stranger", Q, CIDS) == []
    assert s.allocate("g", "c1", list(reversed(Q)), ["c3", "c1", "c2", "c1"]) == Q[:3]
    assert s.allocate("g", "c1", [], CIDS) == []


def test_by_config():
    s = create_strategy("CONFIG", {"queues": "broker-a:1, broker-a:5,broker-b:0"})
    assert ids(s.allocate("g", "c2", Q, CIDS)) == [1, 5]  # broker-b:0 is not in the route
    with pytest.raises(AllocationError, match="brokerName:queueId"):
        create_strategy("CONFIG", {"queues": "nonsense"})
    with pytest.raises(AllocationError, match="needs option queues"):
        create_strategy("CONFIG")


def test_by_machine_room_serves_only_its_rooms():
    mqs = [QueueRef(f"{room}@broker-{room}", i) for room in ("hz", "sh", "bj") for i in range(4)]
    s = create_strategy("MACHINE_ROOM", {"consumeridcs": "hz,sh"})
    got = [s.allocate("g", c, mqs, ["c1", "c2", "c3"]) for c in ("c1", "c2", "c3")]
    flat = sorted(q for part in got for q in part)
    assert flat == sorted(q for q in mqs if not q.broker_name.startswith("bj"))  # bj is another set's
    assert [len(p) for p in got] == [3, 3, 2]  # 8 queues: blocks of 2, the remainder to the first two
    with pytest.raises(AllocationError, match="consumeridcs"):
        create_strategy("MACHINE_ROOM", {})


def test_machine_room_nearby_prefers_the_same_room_and_shares_orphans():
    mqs = [QueueRef(f"{room}@b", i) for room in ("hz", "sh", "bj") for i in range(2)]
    cids = ["hz@c1", "sh@c2"]  # nobody in bj
    s = create_strategy("MACHINE_ROOM_NEARBY")
    hz = s.allocate("g", "hz@c1", mqs, cids)
    sh = s.allocate("g", "sh@c2", mqs, cids)
    assert {q.broker_name for q in hz} >= {"hz@b"} and "sh@b" not in {q.broker_name for q in hz}
    assert "hz@b" not in {q.broker_name for q in sh}
    assert sorted(hz + sh) == sorted(mqs)  # bj's queues are shared by everyone
    with pytest.raises(AllocationError):
        create_strategy("MACHINE_ROOM_NEARBY", {"inner": "MACHINE_ROOM_NEARBY"})


def test_consistent_hash_options_and_names():
    assert create_strategy("CONSISTENT_HASH", {"virtualNodeCnt": "3"}).name == "CONSISTENT_HASH"
    with pytest.raises(AllocationError, match="virtualNodeCnt"):
        create_strategy("CONSISTENT_HASH", {"virtualNodeCnt": "0"})
    with pytest.raises(AllocationError, match="known: AVG"):
        create_strategy("NOPE")
    assert STRATEGY_NAMES == (
        "AVG",
        "AVG_BY_CIRCLE",
        "CONFIG",
        "MACHINE_ROOM",
        "CONSISTENT_HASH",
        "MACHINE_ROOM_NEARBY",
    )
