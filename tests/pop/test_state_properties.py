"""Property tests of the pop state machine: random operation sequences keep its invariants and replay exactly."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.pop.state import InFlight, PopState, Record

KEY = ("g", "t", 0)

ops = st.lists(
    st.one_of(
        st.tuples(st.just("pop"), st.integers(0, 4), st.integers(0, 3)),  # deliver up to n new, skip m filtered
        st.tuples(st.just("ack"), st.integers(0, 50), st.just(0)),
        st.tuples(st.just("acks"), st.integers(0, 50), st.integers(1, 8)),  # one AckBatch of b in-flight offsets
        st.tuples(st.just("chg"), st.integers(0, 50), st.integers(0, 2000)),
        st.tuples(st.just("redeliver"), st.integers(0, 50), st.just(0)),
        st.tuples(st.just("reset"), st.integers(0, 60), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_invariants_and_replay(sequence):
    log: list[Record] = []
    s = PopState(sink=log.append)
    s.init_queue(KEY, 0)
    now = 0
    for kind, a, b in sequence:
        now += 10
        qs = s.queues[KEY]
        if kind == "pop":
            start = qs.pop_offset
            flights = [InFlight(start + b + i, 1000 + start + b + i, 1, s.next_seq(), 1, now, 100) for i in range(a)]
            s.pop(KEY, flights, start + b + a)
        elif kind == "ack" and qs.inflight:
            s.ack(KEY, sorted(qs.inflight)[a % len(qs.inflight)])
        elif kind == "acks" and qs.inflight:
            live = sorted(qs.inflight)
            first = a % len(live)
            s.ack_many(KEY, live[first : first + b])
        elif kind == "chg" and qs.inflight:
            s.change(KEY, sorted(qs.inflight)[a % len(qs.inflight)], now, b, new_seq=True, auto_renew=False)
        elif kind == "redeliver" and qs.inflight:
            f = qs.inflight[sorted(qs.inflight)[a % len(qs.inflight)]]
            again = InFlight(f.offset, f.commitlog_offset, 1, s.next_seq(), f.attempts + 1, now, 100)
            s.pop(KEY, [again], qs.pop_offset)
        elif kind == "reset" and a > qs.ack_offset:
            s.reset(KEY, a)
        qs = s.queues[KEY]
        # every offset in [ack, pop) is either in flight or done, and ack is the first not done
        assert not (set(qs.inflight) & qs.done)
        assert qs.ack_offset == min([*qs.inflight, qs.pop_offset])
        assert all(qs.ack_offset <= o < qs.pop_offset for o in qs.inflight)
        assert all(qs.ack_offset < o < qs.pop_offset for o in qs.done)
        seqs = [f.seq for f in qs.inflight.values()]
        assert len(seqs) == len(set(seqs)) and all(x <= s.seq for x in seqs)
    replayed = PopState()
    for rec in log:
        replayed.apply(rec)
    assert replayed.to_snapshot() == s.to_snapshot()
