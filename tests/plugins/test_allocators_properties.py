"""Properties of the allocation strategies: every queue to exactly one live member, whatever the input order,
and consistent hashing moves only the queues of a member that joins or leaves."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.allocators import QueueRef, create_strategy

brokers = st.sampled_from(["hz@a", "sh@b", "c", "bj@d"])
queues = st.lists(st.builds(QueueRef, brokers, st.integers(0, 15)), min_size=0, max_size=40, unique=True)
rooms = st.sampled_from(["hz", "sh", "bj", ""])
clients = st.lists(
    st.builds(lambda r, n: f"{r}@c{n}" if r else f"c{n}", rooms, st.integers(0, 20)),
    min_size=1,
    max_size=8,
    unique=True,
)

PARTITIONING = [
    ("AVG", {}),
    ("AVG_BY_CIRCLE", {}),
    ("CONSISTENT_HASH", {"virtualNodeCnt": "5"}),
    ("MACHINE_ROOM_NEARBY", {}),
]


@settings(max_examples=60, deadline=None)
@given(queues, clients, st.randoms(use_true_random=False))
def test_every_queue_goes_to_exactly_one_client_in_any_input_order(mqs, cids, rnd: random.Random):
    for name, options in PARTITIONING:
        s = create_strategy(name, options)
        parts = {c: s.allocate("g", c, mqs, cids) for c in cids}
        flat = [q for part in parts.values() for q in part]
        assert sorted(flat) == sorted(mqs), name  # complete and disjoint
        shuffled_mqs, shuffled_cids = list(mqs), list(cids)
        rnd.shuffle(shuffled_mqs)
        rnd.shuffle(shuffled_cids)
        for c in cids:
            assert sorted(s.allocate("g", c, shuffled_mqs, shuffled_cids)) == sorted(parts[c]), name


@settings(max_examples=60, deadline=None)
@given(queues, clients)
def test_machine_room_partitions_the_rooms_it_serves(mqs, cids):
    s = create_strategy("MACHINE_ROOM", {"consumeridcs": "hz,sh"})
    flat = [q for c in cids for q in s.allocate("g", c, mqs, cids)]
    assert sorted(flat) == sorted(
        q for q in mqs if q.broker_name.split("@")[0] in ("hz", "sh") and "@" in q.broker_name
    )


@settings(max_examples=60, deadline=None)
@given(queues, clients, st.text("abcdef", min_size=1, max_size=5))
def test_consistent_hash_moves_only_the_queues_of_a_joining_member(mqs, cids, newcomer):
    s = create_strategy("CONSISTENT_HASH")
    newcomer = f"new-{newcomer}"
    before = {c: set(s.allocate("g", c, mqs, cids)) for c in cids}
    after = {c: set(s.allocate("g", c, mqs, [*cids, newcomer])) for c in cids}
    for c in cids:
        assert after[c] <= before[c]  # nobody gains a queue; only the newcomer does
    gained = set(s.allocate("g", newcomer, mqs, [*cids, newcomer]))
    assert gained == set(mqs) - set().union(*after.values())
    # Leaving is joining backwards: the queues of everyone else stay put.
    rest = cids[1:]  # cids[0] leaves
    if rest:
        without = {c: set(s.allocate("g", c, mqs, rest)) for c in rest}
        for c in rest:
            assert before[c] <= without[c]
