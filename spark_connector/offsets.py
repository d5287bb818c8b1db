"""Source offsets: ``{"<topic>": {"<brokerName>:<queueId>": <next offset to read>}}`` and the arithmetic on them.

Spark stores the dict as JSON in ``<checkpoint>/offsets/<batch>`` and compares offsets by their JSON text, so keys
are strings and always emitted in one order (topics sorted, queues by broker name then queue id).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from spark_connector.errors import option_error

EARLIEST = -2  # Kafka's conventions in user JSON
LATEST = -1


class QueueKey(NamedTuple):
    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        return f"{self.broker_name}:{self.queue_id}"


def parse_queue_key(option: str, text: str) -> QueueKey:
    broker, sep, qid = str(text).rpartition(":")
    if not sep or not broker or not qid.isdigit():
        raise option_error(option, f"queue {text!r} is not <brokerName>:<queueId>, e.g. broker-a:0")
    return QueueKey(broker, int(qid))


# topic -> queue -> offset
Offsets = dict[str, dict[QueueKey, int]]


def to_json_dict(offsets: Offsets) -> dict[str, dict[str, int]]:
    """What Spark checkpoints: sorted, string keys."""
    return {topic: {str(q): offsets[topic][q] for q in sorted(offsets[topic])} for topic in sorted(offsets)}


def from_json_dict(value: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {topic: {parse_queue_key("offset", q): int(o) for q, o in queues.items()} for topic, queues in value.items()}


def total_between(start: Offsets, end: Offsets) -> int:
    return sum(max(0, o - start.get(t, {}).get(q, o)) for t, qs in end.items() for q, o in qs.items())


def rate_limit(start: Offsets, end: Offsets, limit: int) -> Offsets:
    """``end`` moved back so at most ``limit`` offsets are read, the budget shared by backlog (Kafka's rule).

    Each queue gets ``floor(limit * backlog / total)``; what rounding leaves over goes one by one to the queues with
    the largest remainders, so the sum is exactly ``limit`` and a small queue is not starved while budget lasts.
    """
    backlog = {(t, q): o - start.get(t, {}).get(q, o) for t, qs in end.items() for q, o in qs.items()}
    backlog = {k: v for k, v in backlog.items() if v > 0}
    total = sum(backlog.values())
    if total <= limit:
        return end
    share: dict[tuple[str, QueueKey], int] = {}
    remainders: list[tuple[float, tuple[str, QueueKey]]] = []
    for key, size in sorted(backlog.items()):
        exact = limit * size / total
        share[key] = int(exact)
        remainders.append((exact - int(exact), key))
    left = limit - sum(share.values())
    for _, key in sorted(remainders, key=lambda r: (-r[0], r[1])):
        if left <= 0:
            break
        if share[key] < backlog[key]:
            share[key] += 1
            left -= 1
    out: Offsets = {}
    for t, qs in end.items():
        out[t] = {}
        for q, o in qs.items():
            begin = start.get(t, {}).get(q, o)
            out[t][q] = begin + share[(t, q)] if (t, q) in share else o
    return out


def cap(start: Offsets, end: Offsets, target: Offsets) -> Offsets:
    """``end`` never beyond ``target`` (AvailableNow's snapshot); a queue the snapshot does not know stays at its
    start (it is read by the next query)."""
    out: Offsets = {}
    for t, qs in end.items():
        out[t] = {}
        for q, o in qs.items():
            begin = start.get(t, {}).get(q)
            limit = target.get(t, {}).get(q, o if begin is None else begin)
            out[t][q] = max(min(o, limit), begin if begin is not None else min(o, limit))
    return out
