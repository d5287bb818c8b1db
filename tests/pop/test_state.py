"""The pop state machine: deliveries, acks out of order, invisible-time changes, filtered offsets, handles."""

from __future__ import annotations

import pytest

from broker.pop.state import InFlight, PopState, Record
from orbitmq.errors import Code, MQError

KEY = ("g", "t", 0)


def flight(state: PopState, offset: int, now: int, inv: int = 1000, attempts: int = 1, group: str | None = None):
    return InFlight(offset, 100 + offset, 10, state.next_seq(), attempts, now, inv, message_group=group)


def test_ack_out_of_order_advances_only_past_contiguous_done():
    st = PopState()
    st.init_queue(KEY, 5)
    st.pop(KEY, [flight(st, o, 0) for o in (5, 6, 7)], 8)
    qs = st.queue(KEY)
    assert qs is not None and qs.ack_offset == 5 and qs.pop_offset == 8
    st.ack(KEY, 6)
    assert qs.ack_offset == 5
    st.ack(KEY, 5)
    assert qs.ack_offset == 7
    st.ack(KEY, 7)
    assert qs.ack_offset == 8 and not qs.inflight and not qs.done


def test_filtered_offsets_count_as_done():
    st = PopState()
    st.init_queue(KEY, 0)
    st.pop(KEY, [flight(st, 2, 0)], 5)  # 0, 1, 3, 4 did not match the filter
    qs = st.queue(KEY)
    assert qs is not None and qs.ack_offset == 2
    st.ack(KEY, 2)
    assert qs.ack_offset == 5


def test_visibility_and_handles():
    st = PopState()
    st.init_queue(KEY, 0)
    [d] = st.pop(KEY, [flight(st, 0, now=1000, inv=500)], 1)
    qs = st.queue(KEY)
    assert qs is not None
    assert qs.visible(1499) == [] and [f.offset for f in qs.visible(1500)] == [0]
    old = d.handle
    st.check_handle(old)
    st.change(KEY, 0, 2000, 100, new_seq=True, auto_renew=False)
    with pytest.raises(MQError) as err:
        st.check_handle(old)
    assert err.value.code == Code.INVALID_RECEIPT_HANDLE and "expired" in err.value.message
    new = d.handle  # the Delivery reads the live flight, so it now carries the new seq
    st.check_handle(new)
    assert qs.visible(2099) == [] and qs.visible(2100)
    st.ack(KEY, 0)
    with pytest.raises(MQError, match="not in flight"):
        st.check_handle(new)


def test_blocked_groups_only_for_invisible_messages():
    st = PopState()
    st.init_queue(KEY, 0)
    st.pop(KEY, [flight(st, 0, 0, inv=100, group="A"), flight(st, 1, 0, inv=1000, group="B")], 2)
    qs = st.queue(KEY)
    assert qs is not None
    assert qs.blocked_groups(50) == {"A", "B"}
    assert qs.blocked_groups(500) == {"B"}


def test_reset_skips_removed_offsets():
    st = PopState()
    st.init_queue(KEY, 0)
    st.pop(KEY, [flight(st, 0, 0), flight(st, 3, 0)], 4)
    st.reset(KEY, 3)
    qs = st.queue(KEY)
    assert qs is not None and qs.ack_offset == 3 and list(qs.inflight) == [3]


def test_records_replay_to_the_same_state():
    log: list[Record] = []
    st = PopState(sink=log.append)
    st.init_queue(KEY, 0)
    st.pop(KEY, [flight(st, o, 0) for o in range(4)], 6)
    st.ack(KEY, 1)
    st.change(KEY, 2, 10, 99, new_seq=True, auto_renew=False)
    st.ack(KEY, 0)
    replayed = PopState()
    for rec in log:
        replayed.apply(rec)
    assert replayed.to_snapshot() == st.to_snapshot()
    snap = PopState()
    snap.load_snapshot(st.to_snapshot())
    assert snap.to_snapshot() == st.to_snapshot() and snap.seq == st.seq


def test_pop_records_hoist_shared_fields_and_replay_either_form():
    """A pop whose flights share pop time, invisible time, auto-renew and client is journaled compactly; one whose
    flights differ keeps a full row each; journals of both forms (and older ones: full rows) replay the same."""
    log: list[Record] = []
    st = PopState(sink=log.append)
    st.init_queue(KEY, 0)
    shared = [flight(st, o, 50, group="G" if o == 1 else None) for o in range(3)]
    st.pop(KEY, shared, 3)
    mixed = [flight(st, 3, 60), flight(st, 4, 61, inv=500, attempts=2)]
    st.pop(KEY, mixed, 5)
    compact, full = log[1], log[2]
    assert compact["c"] == [50, 1000, False, 0, ""] and compact["m"][1] == [1, 101, 10, shared[1].seq, 1, "G"]
    assert "c" not in full and len(full["m"][0]) == 11
    replayed = PopState()
    for rec in log:
        replayed.apply(rec)
    assert replayed.to_snapshot() == st.to_snapshot()
    assert replayed.queues[KEY].inflight[1].message_group == "G"


def test_drain_pops_are_columns_and_replay_like_rows():
    """A pop of new messages at consecutive offsets and sequences is journaled as columns (``popc``): commitlog
    offsets and sizes as one number when contiguous and alike, else as lists. Each form replays to the state the
    live pop built, and anything else (a redelivery, a gap in the offsets) keeps rows."""
    log: list[Record] = []
    st = PopState(sink=log.append)
    st.init_queue(KEY, 0)

    def new(offset: int, commitlog: int, size: int) -> InFlight:
        return InFlight(offset, commitlog, size, st.next_seq(), 1, 70, 1000, None, True, 900, "client-1")

    st.pop(KEY, [new(o, 1000 + 40 * o, 40) for o in range(4)], 4)  # contiguous, alike
    st.pop(KEY, [new(4, 2000, 40), new(5, 2040, 41), new(6, 2081, 39)], 7)  # contiguous, sizes differ
    st.pop(KEY, [new(7, 3000, 40), new(8, 5000, 40)], 9)  # a gap in the commitlog
    st.pop(KEY, [new(9, 6000, 40), new(11, 6040, 40)], 12)  # a gap in the queue offsets (a filter)
    redelivered = st.queues[KEY].inflight[0]
    again = InFlight(0, redelivered.commitlog_offset, 40, st.next_seq(), 2, 80, 1000, None, True, 900, "client-1")
    st.pop(KEY, [again], 12)
    alike, sizes, gap, skipped, redelivery = log[1:]
    assert alike["t"] == "popc" and alike["r"] == [0, 1, 4] and alike["cl"] == 1000 and alike["sz"] == 40
    assert alike["c"] == [70, 1000, True, 900, "client-1"]
    assert sizes["t"] == "popc" and sizes["cl"] == 2000 and sizes["sz"] == [40, 41, 39]
    assert gap["t"] == "popc" and gap["cl"] == [3000, 5000] and gap["sz"] == 40
    assert skipped["t"] == "pop" and redelivery["t"] == "pop"
    replayed = PopState()
    for rec in log:
        replayed.apply(rec)
    assert replayed.to_snapshot() == st.to_snapshot() and replayed.seq == st.seq
    assert replayed.queues[KEY].done == st.queues[KEY].done == {10}


def test_a_popc_record_that_does_not_add_up_is_refused():
    st = PopState()
    st.init_queue(KEY, 0)
    rec: Record = {"t": "popc", "g": "g", "tp": "t", "q": 0, "n": 3, "c": [1, 2, False, 0, ""], "r": [0, 1, 3]}
    with pytest.raises(ValueError, match="popc record of 3 flights"):
        st.apply({**rec, "cl": 10, "sz": [5, 5]})


def test_acked_flights_leave_no_timeline_behind():
    """Acks leave their timeline entries until due; with long invisible times they must not pile up."""
    from broker.pop.state import TIMELINE_SLACK

    st = PopState()
    st.init_queue(KEY, 0)
    qs = st.queue(KEY)
    assert qs is not None
    n = 3 * TIMELINE_SLACK
    for start in range(0, n, 256):
        st.pop(KEY, [flight(st, o, now=0, inv=43_200_000) for o in range(start, start + 256)], start + 256)
        st.ack_many(KEY, list(range(start, start + 250)))  # 6 of each batch stay in flight
    live = {o for o in range(n) if o % 256 >= 250}
    assert set(qs.inflight) == live
    assert len(qs._timeline) <= 2 * len(live) + TIMELINE_SLACK
    # what is still in flight comes back when due, each once, and nothing acked does
    assert sorted(f.offset for f in qs.visible(43_200_000)) == sorted(live)


def test_invisible_time_changes_leave_no_timeline_behind():
    from broker.pop.state import TIMELINE_SLACK

    st = PopState()
    st.init_queue(KEY, 0)
    qs = st.queue(KEY)
    assert qs is not None
    st.pop(KEY, [flight(st, o, now=0, inv=43_200_000) for o in range(8)], 8)
    for k in range(3 * TIMELINE_SLACK):  # a consumer nacking the same messages again and again
        st.change(KEY, k % 8, k, 43_200_000, new_seq=True, auto_renew=False)
    assert len(qs._timeline) <= 2 * 8 + TIMELINE_SLACK
    assert sorted(f.offset for f in qs.visible(43_200_000 + 3 * TIMELINE_SLACK)) == list(range(8))
