"""Journal recovery: replay, torn tails, compaction into snapshots, stale generations."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.pop.journal import PopJournal
from broker.pop.state import InFlight, PopState, Record

KEY = ("g", "t", 1)


def open_state(path: Path, compact_bytes: int = 1 << 20) -> tuple[PopState, PopJournal]:
    journal = PopJournal(path, compact_bytes=compact_bytes)
    state = PopState()
    journal.recover(state)
    state.sink = journal.append
    return state, journal


def populate(st: PopState) -> None:
    st.init_queue(KEY, 0)
    st.pop(KEY, [InFlight(o, o * 10, 10, st.next_seq(), 1, 1000, 5000) for o in range(5)], 5)
    st.ack(KEY, 0)
    st.ack(KEY, 3)
    st.change(KEY, 1, 2000, 10, new_seq=True, auto_renew=False)


def test_recover_replays_journal(tmp_path):
    st, j = open_state(tmp_path)
    populate(st)
    j.close()
    st2, j2 = open_state(tmp_path)
    assert st2.to_snapshot() == st.to_snapshot()
    assert j2.records_replayed == 5
    j2.close()


def test_torn_tail_is_truncated_and_appends_continue(tmp_path):
    st, j = open_state(tmp_path)
    populate(st)
    j.close()
    path = tmp_path / "journal.0"
    with open(path, "ab") as f:
        f.write(b'deadbeef {"t":"ack","g":"g","tp":"t","q":1,"o":')  # crash mid-write
    st2, j2 = open_state(tmp_path)
    assert st2.to_snapshot() == st.to_snapshot()
    st2.ack(KEY, 4)
    j2.close()
    st3, j3 = open_state(tmp_path)
    qs = st3.queue(KEY)
    assert qs is not None and 4 not in qs.inflight and set(qs.inflight) == {1, 2}
    j3.close()


def test_corrupt_record_stops_replay(tmp_path):
    st, j = open_state(tmp_path)
    populate(st)
    j.close()
    path = tmp_path / "journal.0"
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b'"o":3', b'"o":4')  # crc no longer matches
    path.write_bytes(b"\n".join(lines))
    st2, j2 = open_state(tmp_path)
    qs = st2.queue(KEY)
    assert qs is not None and j2.records_replayed == 3 and 3 in qs.inflight
    j2.close()


def test_compaction_keeps_state_and_drops_old_journal(tmp_path):
    st, j = open_state(tmp_path, compact_bytes=200)
    populate(st)
    assert j.needs_compaction()
    j.compact(st)
    assert not (tmp_path / "journal.0").exists() and (tmp_path / "journal.1").exists()
    st.ack(KEY, 1)
    j.close()
    st2, j2 = open_state(tmp_path)
    assert st2.to_snapshot() == st.to_snapshot() and j2.generation == 1 and j2.records_replayed == 1
    j2.close()


def test_stale_journal_from_interrupted_compaction_is_removed(tmp_path):
    st, j = open_state(tmp_path)
    populate(st)
    j.compact(st)
    j.close()
    (tmp_path / "journal.0").write_bytes(b"garbage\n")  # an old generation left behind
    st2, j2 = open_state(tmp_path)
    assert st2.to_snapshot() == st.to_snapshot()
    assert not (tmp_path / "journal.0").exists()
    j2.close()


@settings(max_examples=40, deadline=None)
@given(fraction=st.floats(min_value=0, max_value=1))
def test_any_truncation_recovers_a_prefix_of_the_records(tmp_path_factory, fraction):
    """A crash can cut the journal anywhere: recovery keeps exactly the whole records before the cut."""
    path = tmp_path_factory.mktemp("j")
    log: list[Record] = []
    st_, j = open_state(path)

    def both(rec: Record) -> None:
        log.append(rec)
        j.append(rec)

    st_.sink = both
    populate(st_)
    j.close()
    journal = path / "journal.0"
    data = journal.read_bytes()
    cut = int(len(data) * fraction)
    journal.write_bytes(data[:cut])
    whole = data[:cut].count(b"\n")
    expected = PopState()
    for rec in log[:whole]:
        expected.apply(rec)
    got, j2 = open_state(path)
    assert got.to_snapshot() == expected.to_snapshot() and j2.records_replayed == whole
    j2.close()


def test_batched_acks_are_one_record_and_replay_like_single_acks(tmp_path):
    batched, j = open_state(tmp_path / "batched")
    single, j2 = open_state(tmp_path / "single")
    for state in (batched, single):
        state.init_queue(KEY, 0)
        state.pop(KEY, [InFlight(o, o * 10, 10, state.next_seq(), 1, 1000, 5000) for o in range(6)], 6)
    before = j.bytes_written
    batched.ack_many(KEY, [0, 1, 4])
    assert j.bytes_written > before and (tmp_path / "batched" / "journal.0").read_bytes().count(b"\n") == 3
    for off in (0, 1, 4):
        single.ack(KEY, off)
    assert batched.to_snapshot() == single.to_snapshot()
    j.close()
    j2.close()
    replayed, j3 = open_state(tmp_path / "batched")
    assert replayed.to_snapshot() == single.to_snapshot() and j3.records_replayed == 3
    assert replayed.queue(KEY).ack_offset == 2  # 0 and 1 acked, 2 still in flight
    j3.close()
