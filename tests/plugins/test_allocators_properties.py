"""Properties of the allocation strategies: every queue to exactly one live member (or, for the machine-room
ones, exactly the queues RocketMQ leaves to nobody stay unassigned), whatever the input order; consistent
hashing moves only the queues of a member that joins or leaves."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.allocators import QueueRef, create_strategy

ROOMS = ["hz", "sh", "bj"]
brokers = st.sampled_from(["hz@a", "hz@b", "sh@c", "bj@d", "plain", "x@y@z"])
queues = st.lists(st.builds(QueueRef, brokers, st.integers(-1, 12)), min_size=0, max_size=40, unique=True)
clients = st.lists(
    st.builds(lambda r, n: f"{r}@c{n}" if r else f"c{n}", st.sampled_from([*ROOMS, ""]), st.integers(0, 20)),
    min_size=1,
    max_size=8,
    unique=True,
)

# Strategies that hand every queue to exactly one member, whoever is alive.
PARTITIONING = [
    ("AVG", {}),
    ("AVG_BY_CIRCLE", {}),
    ("CONSISTENT_HASH", {}),
    ("CONSISTENT_HASH", {"virtualNodeCnt": "1"}),
    ("MACHINE_ROOM_NEARBY", {}),
    ("MACHINE_ROOM_NEARBY", {"inner": "AVG_BY_CIRCLE"}),
    ("MACHINE_ROOM_NEARBY", {"inner": "CONSISTENT_HASH", "inner.virtualNodeCnt": "3"}),
]
EVERY = [
    *PARTITIONING,
    ("CONFIG", {"queues": "hz@a:1,plain:-1,sh@c:3,nowhere:0"}),
    ("MACHINE_ROOM", {"consumeridcs": "hz,sh"}),
]
FAST = settings(max_examples=60, deadline=None)


def assignment(name: str, options: dict[str, str], mqs: list[QueueRef], cids: list[str]) -> dict[str, list[QueueRef]]:
    s = create_strategy(name, options)
    return {c: s.allocate("g", c, mqs, cids) for c in cids}


def room_of_broker(q: QueueRef) -> str | None:
    parts = q.broker_name.split("@")
    return parts[0] if len(parts) == 2 and parts[1] else None


@FAST
@given(queues, clients)
def test_partitioning_strategies_give_every_queue_to_exactly_one_member(mqs, cids):
    for name, options in PARTITIONING:
        flat = [q for part in assignment(name, options, mqs, cids).values() for q in part]
        assert sorted(flat) == sorted(mqs), (name, options)  # complete, and no queue twice


@FAST
@given(queues, clients, st.randoms(use_true_random=False))
def test_results_do_not_depend_on_input_order_or_duplicates(mqs, cids, rnd: random.Random):
    for name, options in EVERY:
        expected = assignment(name, options, mqs, cids)
        messy_mqs = mqs + rnd.sample(mqs, len(mqs) // 3)
        messy_cids = cids + rnd.sample(cids, len(cids) // 2)
        rnd.shuffle(messy_mqs)
        rnd.shuffle(messy_cids)
        s = create_strategy(name, options)
        for c in cids:
            got = s.allocate("g", c, messy_mqs, messy_cids)
            assert got == expected[c], (name, options)
            assert got == sorted(got)


@FAST
@given(queues, clients)
def test_averagely_and_by_circle_are_balanced(mqs, cids):
    order = sorted(cids)
    sorted_mqs = sorted(mqs)
    for name in ("AVG", "AVG_BY_CIRCLE"):
        sizes = [len(p) for p in (assignment(name, {}, mqs, cids)[c] for c in order)]
        assert max(sizes) - min(sizes) <= 1
        assert sizes == sorted(sizes, reverse=True)  # the first members in id order take the extra queues
    avg = assignment("AVG", {}, mqs, cids)
    assert [q for c in order for q in avg[c]] == sorted_mqs  # contiguous blocks, in member order
    circle = assignment("AVG_BY_CIRCLE", {}, mqs, cids)
    for i, q in enumerate(sorted_mqs):
        assert q in circle[order[i % len(order)]]


@FAST
@given(queues, clients)
def test_machine_room_partitions_exactly_the_rooms_it_serves(mqs, cids):
    parts = assignment("MACHINE_ROOM", {"consumeridcs": "hz,sh"}, mqs, cids)
    flat = [q for part in parts.values() for q in part]
    served = sorted(q for q in mqs if room_of_broker(q) in ("hz", "sh"))
    assert sorted(flat) == served  # each served queue once
    # Unassigned: queues of other rooms (bj), and of brokers not named exactly room@name ("plain", "x@y@z").
    assert {q for q in mqs if q not in set(flat)} == {q for q in mqs if room_of_broker(q) not in ("hz", "sh")}
    sizes = [len(parts[c]) for c in sorted(cids)]
    assert max(sizes) - min(sizes) <= 1


@FAST
@given(queues, clients)
def test_machine_room_nearby_keeps_a_queue_in_its_room_when_someone_lives_there(mqs, cids):
    owner = {q: c for c, part in assignment("MACHINE_ROOM_NEARBY", {}, mqs, cids).items() for q in part}
    live_rooms = {c.split("@")[0] for c in cids if "@" in c}
    for q, c in owner.items():
        room = room_of_broker(q)
        if room in live_rooms:
            assert c.startswith(f"{room}@")  # nearby: a consumer of the queue's own room
    for c in cids:
        if "@" not in c:  # a client without a room only shares the queues nobody lives next to
            assert all(room_of_broker(q) not in live_rooms for q, o in owner.items() if o == c)


@FAST
@given(queues, clients)
def test_config_gives_every_member_the_configured_queues_of_the_route(mqs, cids):
    configured = {QueueRef("hz@a", 1), QueueRef("plain", -1), QueueRef("sh@c", 3), QueueRef("nowhere", 0)}
    parts = assignment("CONFIG", {"queues": "hz@a:1,plain:-1,sh@c:3,nowhere:0"}, mqs, cids)
    for part in parts.values():
        assert part == sorted(configured & set(mqs))


@FAST
@given(queues, clients, st.text("abcdef@", min_size=1, max_size=5), st.sampled_from(["1", "3", "10"]))
def test_consistent_hash_moves_only_the_queues_of_a_member_that_joins_or_leaves(mqs, cids, suffix, vnodes):
    options = {"virtualNodeCnt": vnodes}
    newcomer = f"new-{suffix}"
    before = assignment("CONSISTENT_HASH", options, mqs, cids)
    after = assignment("CONSISTENT_HASH", options, mqs, [*cids, newcomer])
    for c in cids:
        # Joining: the others only lose queues, and only to the newcomer.
        assert set(after[c]) <= set(before[c])
    assert set(after[newcomer]) == {q for c in cids for q in before[c]} - {q for c in cids for q in after[c]}
    # Leaving is joining backwards: the queues of everyone else stay put; the leaver's are spread among them.
    leaver, rest = cids[0], cids[1:]
    if rest:
        without = assignment("CONSISTENT_HASH", options, mqs, rest)
        for c in rest:
            assert set(before[c]) <= set(without[c])
            assert set(without[c]) - set(before[c]) <= set(before[leaver])
