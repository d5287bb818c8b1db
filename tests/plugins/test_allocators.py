"""The six allocation strategies on concrete cases taken from RocketMQ's semantics (its Java classes and tests),
plus names, options and the input rules every strategy shares."""

from __future__ import annotations

import dataclasses

import pytest

from plugins.allocators import (
    STRATEGY_NAMES,
    AllocateStrategy,
    AllocationError,
    Averagely,
    ConsistentHash,
    MachineRoomNearby,
    QueueRef,
    canonical_name,
    create_strategy,
)
from plugins.allocators.consistent_hash import ConsistentHashRing, md5_hash

Q = [QueueRef("broker-a", i) for i in range(8)]
CIDS = ["c1", "c2", "c3"]

# One working option set per strategy, for the tests every strategy must pass.
EVERY = [
    ("AVG", {}),
    ("AVG_BY_CIRCLE", {}),
    ("CONFIG", {"queues": "broker-a:1,broker-a:5"}),
    ("MACHINE_ROOM", {"consumeridcs": "hz"}),
    ("CONSISTENT_HASH", {}),
    ("MACHINE_ROOM_NEARBY", {}),
]


def ids(refs: list[QueueRef]) -> list[int]:
    return [q.queue_id for q in refs]


def split(name: str, mqs: list[QueueRef], cids: list[str], options: dict[str, str] | None = None):
    s = create_strategy(name, options)
    return [s.allocate("g", c, mqs, cids) for c in cids]


# ---- AVG
def test_averagely_contiguous_blocks_first_clients_get_the_remainder():
    assert [ids(p) for p in split("AVG", Q, CIDS)] == [[0, 1, 2], [3, 4, 5], [6, 7]]
    q10 = [QueueRef("b", i) for i in range(10)]
    assert [ids(p) for p in split("AVG", q10, ["a", "b", "c", "d"])] == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]
    assert [ids(p) for p in split("AVG", Q[:3], CIDS)] == [[0], [1], [2]]


def test_averagely_more_clients_than_queues_leaves_the_last_ones_idle():
    # A queue is never shared: the extra clients get nothing, as in RocketMQ.
    assert [ids(p) for p in split("AVG", Q[:2], CIDS)] == [[0], [1], []]
    assert split("AVG", Q[:1], CIDS) == [[Q[0]], [], []]


def test_averagely_orders_across_brokers_by_broker_then_queue_id():
    mqs = [QueueRef("broker-b", 0), QueueRef("broker-a", 1), QueueRef("broker-b", 1), QueueRef("broker-a", 0)]
    assert split("AVG", mqs, ["x", "y"]) == [
        [QueueRef("broker-a", 0), QueueRef("broker-a", 1)],
        [QueueRef("broker-b", 0), QueueRef("broker-b", 1)],
    ]


# ---- AVG_BY_CIRCLE
def test_by_circle_is_round_robin():
    assert [ids(p) for p in split("AVG_BY_CIRCLE", Q, CIDS)] == [[0, 3, 6], [1, 4, 7], [2, 5]]
    assert [ids(p) for p in split("AVG_BY_CIRCLE", Q[:2], CIDS)] == [[0], [1], []]


# ---- CONFIG
def test_by_config_gives_every_member_the_configured_queues_the_route_has():
    s = create_strategy("CONFIG", {"queues": " broker-a:1, broker-a:5,broker-b:0,,"})
    for c in CIDS:
        assert ids(s.allocate("g", c, Q, CIDS)) == [1, 5]  # broker-b:0 is not in the route: left out
    assert s.allocate("g", "stranger", Q, CIDS) == []


def test_by_config_parses_broker_names_with_colons_and_negative_ids():
    s = create_strategy("config", {"QUEUES": "host:10911:3,broker-a:-1"})
    mqs = [QueueRef("host:10911", 3), QueueRef("broker-a", -1), QueueRef("broker-a", 0)]
    assert s.allocate("g", "c1", mqs, ["c1"]) == [QueueRef("broker-a", -1), QueueRef("host:10911", 3)]


@pytest.mark.parametrize("bad", ["nonsense", "broker-a:", ":3", "broker-a:x", "broker-a:1,oops"])
def test_by_config_rejects_malformed_queues(bad):
    with pytest.raises(AllocationError, match="brokerName:queueId"):
        create_strategy("CONFIG", {"queues": bad})


def test_by_config_needs_queues():
    with pytest.raises(AllocationError, match="needs option queues"):
        create_strategy("CONFIG")
    with pytest.raises(AllocationError, match="needs option queues"):
        create_strategy("CONFIG", {"queues": " , "})


# ---- MACHINE_ROOM
def test_by_machine_room_blocks_then_remainder_one_each():
    # The worked example of RocketMQ's docs: 8 queues, 3 consumers -> {0,1,6}, {2,3,7}, {4,5}.
    mqs = [QueueRef("hz@broker-a", i) for i in range(8)]
    got = split("MACHINE_ROOM", mqs, CIDS, {"consumeridcs": "hz"})
    assert [ids(p) for p in got] == [[0, 1, 6], [2, 3, 7], [4, 5]]


def test_by_machine_room_serves_only_its_rooms():
    mqs = [QueueRef(f"{room}@broker-{room}", i) for room in ("hz", "sh", "bj") for i in range(4)]
    got = split("MACHINE_ROOM", mqs, CIDS, {"consumeridcs": "hz, sh"})
    flat = sorted(q for part in got for q in part)
    assert flat == [q for q in sorted(mqs) if not q.broker_name.startswith("bj@")]  # bj is another set's
    assert [len(p) for p in got] == [3, 3, 2]


def test_by_machine_room_needs_exactly_room_at_name():
    # RocketMQ keeps a queue only when brokerName.split("@") has exactly two parts.
    mqs = [
        QueueRef("hz@a", 0),
        QueueRef("hz", 0),  # no room
        QueueRef("hz@", 0),  # Java's split drops the trailing empty part: no room
        QueueRef("hz@a@b", 0),  # three parts
        QueueRef("HZ@a", 0),  # rooms are case-sensitive
    ]
    assert split("MACHINE_ROOM", mqs, ["c1"], {"consumeridcs": "hz"}) == [[QueueRef("hz@a", 0)]]


def test_by_machine_room_more_clients_than_queues():
    mqs = [QueueRef("hz@a", i) for i in range(2)]
    assert [ids(p) for p in split("MACHINE_ROOM", mqs, CIDS, {"consumeridcs": "hz"})] == [[0], [1], []]


def test_by_machine_room_needs_consumeridcs():
    with pytest.raises(AllocationError, match="consumeridcs"):
        create_strategy("MACHINE_ROOM", {})
    with pytest.raises(AllocationError, match="consumeridcs"):
        create_strategy("MACHINE_ROOM", {"consumeridcs": ","})


# ---- CONSISTENT_HASH
def test_md5_hash_is_rocketmqs_first_four_digest_bytes():
    assert md5_hash("a") == 0x0CC175B9  # md5("a") = 0cc175b9c0f1b6a8...
    assert md5_hash("c1-0") == 3886541579


def test_consistent_hash_golden_assignment():
    # Frozen values: a change here reshuffles every CONSISTENT_HASH group of a running cluster.
    mqs = [QueueRef(b, i) for b in ("broker-a", "broker-b") for i in range(4)]
    got = {c: [str(q) for q in p] for c, p in zip(CIDS, split("CONSISTENT_HASH", mqs, CIDS), strict=True)}
    assert got == {
        "c1": ["broker-b:1"],
        "c2": ["broker-a:0", "broker-b:0"],
        "c3": ["broker-a:1", "broker-a:2", "broker-a:3", "broker-b:2", "broker-b:3"],
    }


def test_ring_routes_clockwise_and_wraps_around():
    ring = ConsistentHashRing(["n1", "n2"], 3)
    points = sorted((md5_hash(f"{n}-{i}"), n) for n in ("n1", "n2") for i in range(3))
    keys = [f"k{i}" for i in range(200)]
    for key in keys:
        h = md5_hash(key)
        expected = next((n for p, n in points if p >= h), points[0][1])  # first point at or after, else wrap
        assert ring.route(key) == expected
    assert ConsistentHashRing([], 3).route("x") is None


def test_consistent_hash_options():
    assert create_strategy("CONSISTENT_HASH", {"virtualNodeCnt": "3"}) == ConsistentHash(3)
    assert create_strategy("CONSISTENT_HASH") == ConsistentHash(10)
    assert create_strategy("CONSISTENT_HASH", {"VIRTUALNODECNT": " 7 "}) == ConsistentHash(7)
    for bad in ("0", "-1", "ten", ""):
        with pytest.raises(AllocationError, match="virtualNodeCnt"):
            create_strategy("CONSISTENT_HASH", {"virtualNodeCnt": bad})


# ---- MACHINE_ROOM_NEARBY
NEARBY_MQS = [QueueRef(f"{room}@broker-{room}", i) for room in ("hz", "sh", "bj") for i in range(4)]


def test_machine_room_nearby_keeps_queues_in_their_room():
    cids = ["hz@c1", "hz@c2", "sh@c3"]  # nobody in bj
    hz1, hz2, sh3 = split("MACHINE_ROOM_NEARBY", NEARBY_MQS, cids)
    hz = [QueueRef("hz@broker-hz", i) for i in range(4)]
    sh = [QueueRef("sh@broker-sh", i) for i in range(4)]
    bj = [QueueRef("bj@broker-bj", i) for i in range(4)]
    # hz's queues split (AVG) between the two hz clients, sh's all to sh@c3; bj's 4 queues shared by all three
    # (AVG over hz@c1, hz@c2, sh@c3: 2, 1, 1).
    assert hz1 == sorted([*hz[:2], *bj[:2]])
    assert hz2 == sorted([*hz[2:], bj[2]])
    assert sh3 == sorted([*sh, bj[3]])


def test_machine_room_nearby_orphan_rooms_are_allocated_room_by_room():
    # Like RocketMQ, each room without consumers is allocated on its own: with AVG, one queue per orphan room
    # lands on the first client every time rather than spreading across clients.
    mqs = [QueueRef("bj@b", 0), QueueRef("sz@b", 0), QueueRef("hz@b", 0)]
    assert split("MACHINE_ROOM_NEARBY", mqs, ["hz@c1", "hz@c2"]) == [
        [QueueRef("bj@b", 0), QueueRef("hz@b", 0), QueueRef("sz@b", 0)],
        [],
    ]


def test_machine_room_nearby_clients_and_brokers_without_a_room():
    mqs = [QueueRef("hz@b", 0), QueueRef("hz@b", 1), QueueRef("plain", 0), QueueRef("plain", 1)]
    # "c0" has no @; "@c9" has an empty prefix: neither has a room, so they only share room-less/orphan queues.
    cids = ["@c9", "c0", "hz@c1"]
    got = dict(zip(cids, split("MACHINE_ROOM_NEARBY", mqs, cids), strict=True))
    assert got["hz@c1"][:2] == [QueueRef("hz@b", 0), QueueRef("hz@b", 1)]  # its room's queues are its alone
    assert all(q.broker_name == "plain" for c in ("@c9", "c0") for q in got[c])
    assert sorted(q for p in got.values() for q in p) == sorted(mqs)


def test_machine_room_nearby_official_client_ids_use_the_host_name_as_room():
    # Official RocketMQ 5 clients name themselves hostname@pid@index@time.
    mqs = [QueueRef("host1@broker-a", 0), QueueRef("host2@broker-b", 0)]
    cids = ["host1@123@0@abc", "host2@456@0@def"]
    assert split("MACHINE_ROOM_NEARBY", mqs, cids) == [[mqs[0]], [mqs[1]]]


def test_machine_room_nearby_inner_strategy_and_its_options():
    mqs = [QueueRef("hz@b", i) for i in range(6)]
    cids = ["hz@c1", "hz@c2"]
    assert [ids(p) for p in split("MACHINE_ROOM_NEARBY", mqs, cids, {"inner": "AVG_BY_CIRCLE"})] == [
        [0, 2, 4],
        [1, 3, 5],
    ]
    s = create_strategy("MACHINE_ROOM_NEARBY", {"inner": "CONSISTENT_HASH", "inner.virtualNodeCnt": "4"})
    assert s == MachineRoomNearby(ConsistentHash(4))
    assert create_strategy("MACHINE_ROOM_NEARBY") == MachineRoomNearby(Averagely())
    with pytest.raises(AllocationError, match="nest itself"):
        create_strategy("MACHINE_ROOM_NEARBY", {"inner": "AllocateMachineRoomNearby"})
    with pytest.raises(AllocationError, match="unknown allocation strategy 'NOPE'"):
        create_strategy("MACHINE_ROOM_NEARBY", {"inner": "NOPE"})
    with pytest.raises(AllocationError, match="consumeridcs"):
        create_strategy("MACHINE_ROOM_NEARBY", {"inner": "MACHINE_ROOM"})


# ---- shared rules
@pytest.mark.parametrize(("name", "options"), EVERY)
def test_every_strategy_applies_rocketmqs_input_checks(name, options):
    s = create_strategy(name, options)
    mqs = [QueueRef("hz@broker-a", 1), QueueRef("hz@broker-a", 5)]
    assert s.allocate("g", "stranger", mqs, ["hz@c1"]) == []  # not a live member: nothing, no error
    assert s.allocate("g", "hz@c1", [], ["hz@c1"]) == []
    assert s.allocate("g", "hz@c1", mqs, []) == []
    with pytest.raises(AllocationError, match="current client id is empty"):
        s.allocate("g", "", mqs, ["hz@c1"])


@pytest.mark.parametrize(("name", "options"), EVERY)
def test_every_strategy_sorts_and_deduplicates_its_inputs(name, options):
    s = create_strategy(name, options)
    mqs = [QueueRef(b, i) for b in ("broker-a", "hz@broker-a") for i in range(8)]
    cids = ["hz@c1", "hz@c2", "c3"]
    expected = [s.allocate("g", c, mqs, cids) for c in cids]
    messy_mqs = [*reversed(mqs), *mqs[:5]]
    messy_cids = ["c3", "hz@c2", "hz@c1", "c3"]
    assert [s.allocate("g", c, messy_mqs, messy_cids) for c in cids] == expected
    assert all(part == sorted(part) for part in expected)


@pytest.mark.parametrize(("name", "options"), EVERY)
def test_names_round_trip(name, options):
    s = create_strategy(name, options)
    assert s.name == name
    assert isinstance(s, AllocateStrategy)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.name = "other"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("alias", "canonical"),
    [
        ("avg", "AVG"),
        (" Avg_By_Circle ", "AVG_BY_CIRCLE"),
        ("AllocateMessageQueueAveragely", "AVG"),
        ("allocatemessagequeueaveragelybycircle", "AVG_BY_CIRCLE"),
        ("AllocateMessageQueueByConfig", "CONFIG"),
        ("AllocateMessageQueueByMachineRoom", "MACHINE_ROOM"),
        ("AllocateMessageQueueConsistentHash", "CONSISTENT_HASH"),
        ("AllocateMachineRoomNearby", "MACHINE_ROOM_NEARBY"),
        ("org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely", "AVG"),
    ],
)
def test_java_class_names_are_aliases(alias, canonical):
    assert canonical_name(alias) == canonical


def test_unknown_names():
    assert canonical_name("NOPE") is None
    assert canonical_name("com.example.AVG") is None  # only Java class names may carry a package
    with pytest.raises(AllocationError, match="unknown allocation strategy 'NOPE'; known: AVG, AVG_BY_CIRCLE"):
        create_strategy("NOPE")
    assert issubclass(AllocationError, ValueError)
    canonical = ("AVG", "AVG_BY_CIRCLE", "CONFIG", "MACHINE_ROOM", "CONSISTENT_HASH", "MACHINE_ROOM_NEARBY")
    assert canonical == STRATEGY_NAMES


def test_options_a_strategy_does_not_use_are_ignored():
    # A group switched from MACHINE_ROOM to AVG may keep its old options.
    assert split("AVG", Q, CIDS, {"consumeridcs": "hz"}) == split("AVG", Q, CIDS)


def test_queue_ref_orders_by_broker_then_id_and_is_hashable():
    assert sorted([QueueRef("b", 0), QueueRef("a", 2), QueueRef("a", 10)]) == [
        QueueRef("a", 2),
        QueueRef("a", 10),
        QueueRef("b", 0),
    ]
    assert len({QueueRef("a", 1), QueueRef("a", 1)}) == 1
    assert str(QueueRef("hz@broker-a", 3)) == "hz@broker-a:3"
