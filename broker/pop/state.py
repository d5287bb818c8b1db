"""The pop state machine: per (group, topic, queue) which offsets are in flight, invisible until when, acked.

Every change is a journal record applied by ``PopState.apply``, so recovery replays exactly what ran live.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate, repeat
from typing import Any, NamedTuple

from broker.pop.receipt import ReceiptHandle, encode_handle
from orbitmq.errors import Code, MQError

Record = dict[str, Any]
QueueKey = tuple[str, str, int]
TIMELINE_SLACK = 4096  # stale timeline entries tolerated beyond twice the flights (rebuilds stay rare)


@dataclass(slots=True)
class InFlight:
    """A delivered, not yet acked message: invisible until ``visible_at_ms``, then it is redelivered."""

    offset: int
    commitlog_offset: int
    size: int
    seq: int
    attempts: int  # deliveries so far (delivery_attempt of the last delivery)
    pop_time_ms: int
    invisible_ms: int
    message_group: str | None = None
    auto_renew: bool = False
    renew_until_ms: int = 0
    client_id: str = ""

    @property
    def visible_at_ms(self) -> int:
        return self.pop_time_ms + self.invisible_ms


def flight_to_row(f: InFlight) -> list[Any]:
    """Positional form for journal records and snapshots (field order of ``InFlight``): compact and fast."""
    return [
        f.offset,
        f.commitlog_offset,
        f.size,
        f.seq,
        f.attempts,
        f.pop_time_ms,
        f.invisible_ms,
        f.message_group,
        f.auto_renew,
        f.renew_until_ms,
        f.client_id,
    ]


def _pop_record(key: QueueKey, flights: list[InFlight], offsets: list[int], next_offset: int) -> Record:
    """The journal record of a pop (``offsets``: the flights'). The flights of one pop share their pop time,
    invisible time, auto-renew, renew deadline and client: those go once in ``c`` and each flight's row keeps the
    rest (a third of the bytes).

    A pop of new messages (first attempt, no message group) at consecutive queue offsets with consecutive sequences
    -- what a consumer draining a queue gets -- is a ``popc`` record instead: first offset, sequence and count, and
    the commitlog offsets and sizes as one number each when contiguous and alike, else as lists. Each check is a
    column (a list comprehension, the fastest attribute read here) compared whole, not a JSON row per message."""
    head: Record = {"t": "pop", "g": key[0], "tp": key[1], "q": key[2], "n": next_offset}
    if not flights:
        return {**head, "m": []}
    n = len(flights)
    f0 = flights[0]
    common = (f0.pop_time_ms, f0.invisible_ms, f0.auto_renew, f0.renew_until_ms, f0.client_id)
    shared = [(f.pop_time_ms, f.invisible_ms, f.auto_renew, f.renew_until_ms, f.client_id) for f in flights]
    if shared.count(common) != n:
        return {**head, "m": [flight_to_row(f) for f in flights]}
    o0, s0 = offsets[0], f0.seq
    if (
        [(f.attempts, f.message_group) for f in flights].count((1, None)) == n
        and offsets == list(range(o0, o0 + n))
        and [f.seq for f in flights] == list(range(s0, s0 + n))
    ):
        commitlog, sizes = [f.commitlog_offset for f in flights], [f.size for f in flights]
        contiguous = list(accumulate(sizes[:-1], initial=commitlog[0])) == commitlog
        return {
            **head,
            "t": "popc",
            "c": list(common),
            "r": [o0, s0, n],
            "cl": commitlog[0] if contiguous else commitlog,
            "sz": sizes[0] if sizes.count(sizes[0]) == n else sizes,
        }
    rows = [[f.offset, f.commitlog_offset, f.size, f.seq, f.attempts, f.message_group] for f in flights]
    return {**head, "c": list(common), "m": rows}


def _flights_from_columns(rec: Record) -> list[InFlight]:
    """The flights of a ``popc`` record (``_pop_record``'s columns read back)."""
    o0, s0, n = rec["r"]
    pop_time, invisible, auto_renew, until, client = rec["c"]
    sizes = rec["sz"] if isinstance(rec["sz"], list) else [rec["sz"]] * n
    cl = rec["cl"]
    commitlog = cl if isinstance(cl, list) else list(accumulate(sizes[:-1], initial=cl))
    if len(sizes) != n or len(commitlog) != n:
        raise ValueError(f"popc record of {n} flights with {len(commitlog)} commitlog offsets, {len(sizes)} sizes")
    return [
        InFlight(o0 + i, commitlog[i], sizes[i], s0 + i, 1, pop_time, invisible, None, auto_renew, until, client)
        for i in range(n)
    ]


def flight_from_row(row: list[Any]) -> InFlight:
    return InFlight(*row)


@dataclass
class QueueState:
    """Offsets below ``ack_offset`` are done; ``[ack_offset, pop_offset)`` are in flight or done; above: new."""

    ack_offset: int
    pop_offset: int
    inflight: dict[int, InFlight] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)
    # (visible_at, offset, seq) per in-flight change; stale entries are skipped lazily, so no scan of all flights.
    _timeline: list[tuple[int, int, int]] = field(default_factory=list, repr=False)

    def put(self, flight: InFlight) -> None:
        self.inflight[flight.offset] = flight
        self.done.discard(flight.offset)
        self.track(flight)

    def put_many(self, offsets: list[int], flights: list[InFlight]) -> None:
        """``put`` of each flight (``offsets`` theirs), the dict and set updated whole."""
        self.inflight.update(zip(offsets, flights, strict=True))
        self.done.difference_update(offsets)
        entries = [(f.pop_time_ms + f.invisible_ms, f.offset, f.seq) for f in flights]
        timeline = self._timeline
        if len(timeline) <= 4 * len(entries):  # a small heap: rebuilt in C for less than a push each
            timeline.extend(entries)
            heapq.heapify(timeline)
        else:
            for entry in entries:
                heapq.heappush(timeline, entry)

    def track(self, flight: InFlight) -> None:
        heapq.heappush(self._timeline, (flight.visible_at_ms, flight.offset, flight.seq))

    def prune_timeline(self) -> None:
        """Rebuild the timeline from the live flights once stale entries outnumber them. An ack or a change leaves
        its entry behind until it comes due, which with long invisible times (up to 12 h) piles up: in memory and
        in every full garbage collection, which walks the whole list (30 ms pauses seen after 600k acks)."""
        if len(self._timeline) > 2 * len(self.inflight) + TIMELINE_SLACK:
            timeline = [(f.visible_at_ms, f.offset, f.seq) for f in self.inflight.values()]
            heapq.heapify(timeline)
            self._timeline = timeline

    def _advance(self) -> None:
        done, start = self.done, self.ack_offset
        if start not in done:
            return
        # Acks in order leave one run of done offsets from ack_offset on: checked and dropped whole, in C.
        run = range(start, min(start + len(done), self.pop_offset))
        if done.issuperset(run):
            done.difference_update(run)
            self.ack_offset = run.stop
        while self.ack_offset < self.pop_offset and self.ack_offset in self.done:
            self.done.discard(self.ack_offset)
            self.ack_offset += 1

    def _current(self, entry: tuple[int, int, int]) -> InFlight | None:
        f = self.inflight.get(entry[1])
        return f if f is not None and f.seq == entry[2] and f.visible_at_ms == entry[0] else None

    def due(self, until_ms: int) -> list[InFlight]:
        """In-flight messages visible at ``until_ms`` (in offset order); cost grows with those, not all flights."""
        out: list[InFlight] = []
        timeline = self._timeline
        while timeline and timeline[0][0] <= until_ms:
            f = self._current(heapq.heappop(timeline))
            if f is not None:
                out.append(f)
        for f in out:
            self.track(f)
        out.sort(key=lambda f: f.offset)
        return out

    def visible(self, now_ms: int) -> list[InFlight]:
        return self.due(now_ms)

    def next_visible_ms(self) -> int | None:
        timeline = self._timeline
        while timeline and self._current(timeline[0]) is None:
            heapq.heappop(timeline)
        return timeline[0][0] if timeline else None

    def blocked_groups(self, now_ms: int) -> set[str]:
        """Message groups with an invisible in-flight message: FIFO must not deliver later ones of them."""
        return {f.message_group for f in self.inflight.values() if f.message_group and f.visible_at_ms > now_ms}


class Delivery(NamedTuple):
    """One message handed out by a pop: where it is and the handle the consumer will echo."""

    key: QueueKey
    flight: InFlight

    @property
    def handle(self) -> ReceiptHandle:
        f = self.flight
        return ReceiptHandle(
            self.key[0], self.key[1], self.key[2], f.offset, f.commitlog_offset, f.seq, f.pop_time_ms, f.invisible_ms
        )

    def encoded_handle(self) -> str:
        """``handle.encode()`` without the intermediate tuple (one per delivered message)."""
        f = self.flight
        key = self.key
        return encode_handle(key[0], key[1], key[2], f.offset, f.commitlog_offset, f.seq, f.pop_time_ms, f.invisible_ms)


# Delivery((key, flight)) without a Python call per message (NamedTuple's __new__ and _make are Python code).
_new_delivery: Callable[[tuple[QueueKey, InFlight]], Delivery] = partial(tuple.__new__, Delivery)


class PopState:
    """All queues' pop state; mutations go through ``record`` so the journal sink sees each one first."""

    def __init__(self, sink: Callable[[Record], None] | None = None) -> None:
        self.queues: dict[QueueKey, QueueState] = {}
        self.seq = 0
        self.sink = sink

    # ---- applying records (live and at recovery) -------------------------------------------------------
    def apply(self, rec: Record) -> None:
        kind = rec["t"]
        key: QueueKey = (rec["g"], rec["tp"], int(rec["q"]))
        if kind == "init":
            self.queues.setdefault(key, QueueState(rec["o"], rec["o"]))
            return
        qs = self.queues.get(key)
        if qs is None:
            return  # a record for a queue that was reset away; nothing to do
        if kind == "pop":
            common = rec.get("c")
            if common is None:  # one full row per flight
                flights = [flight_from_row(raw) for raw in rec["m"]]
            else:  # fields every flight of the pop shares, once: pop time, invisible, auto-renew, renew until, client
                pt, inv, ar, until, client = common
                flights = [
                    InFlight(o, cl, sz, sq, att, pt, inv, grp, ar, until, client)
                    for o, cl, sz, sq, att, grp in rec["m"]
                ]
            self._apply_pop(qs, flights, int(rec["n"]))
        elif kind == "popc":  # a drain's pop as columns (``_columns``)
            self._apply_pop(qs, _flights_from_columns(rec), int(rec["n"]))
        elif kind == "ack":
            self._apply_acks(qs, (int(rec["o"]),))
        elif kind == "acks":  # one AckMessage's acks of one queue in one record
            self._apply_acks(qs, rec["o"])
        elif kind == "chg":
            changed = qs.inflight.get(int(rec["o"]))
            if changed is not None:
                changed.seq = int(rec["seq"])
                changed.pop_time_ms = int(rec["pt"])
                changed.invisible_ms = int(rec["inv"])
                changed.auto_renew = bool(rec.get("ar", False))
                qs.track(changed)
                qs.prune_timeline()  # the entry of the old deadline stays behind, as an ack's does
                self.seq = max(self.seq, changed.seq)
        elif kind == "reset":
            off = int(rec["o"])
            qs.inflight = {o: f for o, f in qs.inflight.items() if o >= off}
            qs.done = {o for o in qs.done if o >= off}
            if qs.ack_offset < off:
                qs.ack_offset = off
            qs.pop_offset = max(qs.pop_offset, off)
        elif kind == "drop":
            self.queues.pop(key, None)
            return
        else:
            raise ValueError(f"unknown pop journal record type {kind!r}")
        qs._advance()

    def _apply_pop(self, qs: QueueState, flights: list[InFlight], nxt: int, offsets: list[int] | None = None) -> None:
        """A pop's flights into ``qs`` (``offsets``: theirs, when the caller has them)."""
        if offsets is None:
            offsets = [f.offset for f in flights]
        if flights:
            qs.put_many(offsets, flights)
            self.seq = max(self.seq, max([f.seq for f in flights]))
        if nxt > qs.pop_offset:
            # filtered out by tag: acked on the server, like the reference
            qs.done.update(set(range(qs.pop_offset, nxt)).difference(offsets))
            qs.pop_offset = nxt

    @staticmethod
    def _apply_acks(qs: QueueState, offsets: Sequence[int]) -> None:
        inflight = qs.inflight
        for off in offsets:
            inflight.pop(off, None)
        qs.done.update(filter(range(qs.ack_offset, qs.pop_offset).__contains__, offsets))
        qs.prune_timeline()

    def record(self, rec: Record) -> None:
        if self.sink is not None:
            self.sink(rec)
        self.apply(rec)

    # ---- queries --------------------------------------------------------------------------------------
    def queue(self, key: QueueKey) -> QueueState | None:
        return self.queues.get(key)

    def next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def next_seqs(self, count: int) -> range:
        """``count`` calls of ``next_seq`` at once."""
        first = self.seq + 1
        self.seq += count
        return range(first, first + count)

    def next_visible_ms(self, keys: Iterable[QueueKey]) -> int | None:
        times = [t for k in keys if (qs := self.queues.get(k)) is not None and (t := qs.next_visible_ms()) is not None]
        return min(times) if times else None

    def due(self, until_ms: int) -> Iterator[tuple[QueueKey, InFlight]]:
        for key, qs in list(self.queues.items()):
            for f in qs.due(until_ms):
                yield key, f

    def check_handle(self, handle: ReceiptHandle) -> tuple[QueueState, InFlight]:
        """The in-flight entry a handle names, or INVALID_RECEIPT_HANDLE when acked, redelivered or unknown."""
        qs = self.queues.get((handle.group, handle.topic, handle.queue_id))
        flight = qs.inflight.get(handle.queue_offset) if qs is not None else None
        if qs is None or flight is None:
            raise MQError(
                Code.INVALID_RECEIPT_HANDLE,
                f"receipt handle of {handle.topic} queue {handle.queue_id} offset {handle.queue_offset} for group "
                f"{handle.group} is not in flight (already acked or never delivered)",
            )
        if flight.seq != handle.seq:
            raise MQError(
                Code.INVALID_RECEIPT_HANDLE,
                f"receipt handle is expired: the message at {handle.topic} queue {handle.queue_id} offset "
                f"{handle.queue_offset} was redelivered or its invisible time changed since (use the newest handle)",
            )
        return qs, flight

    def iter_inflight(self) -> Iterator[tuple[QueueKey, InFlight]]:
        for key, qs in self.queues.items():
            for f in qs.inflight.values():
                yield key, f

    # ---- mutations ------------------------------------------------------------------------------------
    def init_queue(self, key: QueueKey, offset: int) -> QueueState:
        if key not in self.queues:
            self.record({"t": "init", "g": key[0], "tp": key[1], "q": key[2], "o": offset})
        return self.queues[key]

    def pop(self, key: QueueKey, flights: list[InFlight], next_offset: int) -> list[Delivery]:
        """Record deliveries (new or redelivered) and that offsets below ``next_offset`` were looked at."""
        offsets = [f.offset for f in flights]
        if self.sink is not None:
            self.sink(_pop_record(key, flights, offsets, next_offset))
        # What apply() does with this record, on the flight objects themselves (no second copy from the rows).
        qs = self.queues.get(key)
        if qs is None:
            return []
        self._apply_pop(qs, flights, next_offset, offsets)
        qs._advance()
        return list(map(_new_delivery, zip(repeat(key), flights)))

    def ack(self, key: QueueKey, offset: int) -> None:
        self.record({"t": "ack", "g": key[0], "tp": key[1], "q": key[2], "o": offset})

    def ack_many(self, key: QueueKey, offsets: list[int]) -> None:
        """Several acks of one queue as one journal record (one write instead of one per message)."""
        if len(offsets) == 1:
            self.ack(key, offsets[0])
        elif offsets:
            self.record({"t": "acks", "g": key[0], "tp": key[1], "q": key[2], "o": offsets})

    def change(
        self, key: QueueKey, offset: int, now_ms: int, invisible_ms: int, *, new_seq: bool, auto_renew: bool
    ) -> InFlight:
        flight = self.queues[key].inflight[offset]
        seq = self.next_seq() if new_seq else flight.seq
        self.record(
            {
                "t": "chg",
                "g": key[0],
                "tp": key[1],
                "q": key[2],
                "o": offset,
                "seq": seq,
                "pt": now_ms,
                "inv": invisible_ms,
                "ar": auto_renew,
            }
        )
        return flight

    def reset(self, key: QueueKey, offset: int) -> None:
        self.record({"t": "reset", "g": key[0], "tp": key[1], "q": key[2], "o": offset})

    def drop(self, key: QueueKey) -> None:
        self.record({"t": "drop", "g": key[0], "tp": key[1], "q": key[2]})

    # ---- snapshots ------------------------------------------------------------------------------------
    def to_snapshot(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "queues": [
                {
                    "g": k[0],
                    "tp": k[1],
                    "q": k[2],
                    "ack": qs.ack_offset,
                    "pop": qs.pop_offset,
                    "done": sorted(qs.done),
                    "inflight": [flight_to_row(f) for f in qs.inflight.values()],
                }
                for k, qs in self.queues.items()
            ],
        }

    def load_snapshot(self, snap: dict[str, Any]) -> None:
        self.seq = int(snap.get("seq", 0))
        self.queues = {}
        for q in snap.get("queues", []):
            qs = QueueState(int(q["ack"]), int(q["pop"]), done=set(q["done"]))
            for raw in q["inflight"]:
                f = flight_from_row(raw)
                qs.put(f)
            self.queues[(q["g"], q["tp"], int(q["q"]))] = qs
