"""Pulled records (``RecordFrames``) as Arrow arrays, built from the ``PullBatch`` payload's bytes.

The payload becomes one binary array whose segments are the records' bodies, properties and the bytes between
(``RecordFrames.spans`` are its offsets); ``take`` copies the bodies and the property strings out in C, and the
message id, tag and keys come out of the property strings split once into items. Per record, Python
only walks the frames (``locate_frames``); the values equal ``decode_columns``' for the same payload. Needs pyarrow
(the ``spark`` extra); nothing else in ``oms`` imports this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

import pyarrow as pa
import pyarrow.compute as pc

from oms.consumer.columns import normalised_keys, user_properties
from oms.consumer.frames import (
    H_BORN_TIMESTAMP,
    H_COMMITLOG_OFFSET,
    H_QUEUE_OFFSET,
    H_RECONSUME_TIMES,
    H_STORE_TIMESTAMP,
    H_SYS_FLAG,
    RecordFrames,
)
from oms.consumer.records import COMPRESSED_FLAG, _body_of, _corrupted
from orbitmq import message_const as mc
from orbitmq.record import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

_UNIQ_KEY = mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
# the fields of the header tuple the columns need
_NEEDED = (H_QUEUE_OFFSET, H_COMMITLOG_OFFSET, H_SYS_FLAG, H_BORN_TIMESTAMP, H_STORE_TIMESTAMP, H_RECONSUME_TIMES)


@dataclass(frozen=True)
class ArrowColumns:
    """``MessageColumns`` as Arrow arrays: row ``i`` of each is one message, in queue order. Timestamps are ms
    since the epoch (int64); ``properties`` (user properties, when asked for) stays Python dicts."""

    queue_offsets: pa.Array
    message_ids: pa.Array
    tags: pa.Array
    keys: pa.Array
    bodies: pa.Array
    born_timestamps: pa.Array
    store_timestamps: pa.Array
    reconsume_times: pa.Array
    properties: list[dict[str, str]] | None = None

    def __len__(self) -> int:
        return len(self.queue_offsets)


def _segments(frames: RecordFrames) -> pa.Array:
    """The payload as a binary array: segment ``4i+1`` is record i's body, ``4i+3`` its properties."""
    offsets = pa.array([0, *frames.spans], pa.int64())
    return pa.Array.from_buffers(
        pa.large_binary(), len(frames.spans), [None, offsets.buffers()[1], pa.py_buffer(frames.buffer)]
    )


class _Properties:
    """The rows' property strings split into ``name\\x01value`` items once (in C), for looking names up."""

    def __init__(self, strings: pa.Array) -> None:
        self.rows = len(strings)
        lists = pc.split_pattern(strings, PROPERTY_SEPARATOR)
        self.items = lists.flatten()
        self.row_of = pc.list_parent_indices(lists)

    def value(self, name: str) -> pa.Array:
        """Each row's first value of property ``name``; null where it is missing or empty (as
        ``columns._value(...) or None``: an item starting with the name and the separator is that property)."""
        needle = name + NAME_VALUE_SEPARATOR
        hit = pc.starts_with(self.items, needle)
        rows = self.row_of.filter(hit)
        values = pc.utf8_slice_codeunits(self.items.filter(hit), len(needle))  # the name is ASCII: chars = bytes
        if len(rows) > 1 and pc.count_distinct(rows).as_py() < len(rows):  # a name given twice: the first counts
            first = pc.not_equal(rows.slice(1), rows.slice(0, len(rows) - 1))
            keep = pa.concat_arrays([pa.array([True]), first])
            rows, values = rows.filter(keep), values.filter(keep)
        if len(rows) != self.rows:  # rows without the property: nulls there
            found = pc.is_in(pa.array(range(self.rows), rows.type), value_set=rows)
            values = pc.replace_with_mask(pa.nulls(self.rows, values.type), found, values)
        return pc.if_else(pc.greater(pc.binary_length(values), 0), values, pa.scalar(None, values.type))


def _empty(properties: bool) -> ArrowColumns:
    i64, s = pa.array([], pa.int64()), pa.array([], pa.string())
    return ArrowColumns(
        i64, s, s, s, pa.array([], pa.binary()), i64, i64, pa.array([], pa.int32()), [] if properties else None
    )


def to_arrow(chunks: Sequence[RecordFrames], properties: bool = False) -> ArrowColumns:
    """The records of ``chunks`` (consecutive pulls) as one set of Arrow columns."""
    chunks = [c for c in chunks if len(c)]
    if not chunks:
        return _empty(properties)
    n = sum(len(c) for c in chunks)
    segments = pa.concat_arrays([_segments(c) for c in chunks]) if len(chunks) > 1 else _segments(chunks[0])
    bodies = segments.take(pa.array(range(1, 4 * n, 4), pa.int64())).cast(pa.binary())
    try:
        props = segments.take(pa.array(range(3, 4 * n, 4), pa.int64())).cast(pa.large_string())
    except pa.ArrowInvalid as exc:
        raise _corrupted(f"record properties are not UTF-8: {exc}") from exc
    fields = {k: list(chain.from_iterable(map(itemgetter(k), c.headers) for c in chunks)) for k in _NEEDED}
    found = _Properties(props)
    uniq = found.value(_UNIQ_KEY)
    if uniq.null_count:  # no client id: the record's CommitLog offset, as decode_records names it
        stored_at = pa.array(fields[H_COMMITLOG_OFFSET], pa.int64()).cast(uniq.type)
        uniq = pc.if_else(pc.is_valid(uniq), uniq, stored_at)
    keys = found.value(mc.PROPERTY_KEYS)
    if pc.any(pc.match_substring(keys, mc.KEY_SEPARATOR)).as_py():  # several keys: drop duplicates row by row
        keys = pa.array([normalised_keys(k) for k in keys.to_pylist()], pa.string())
    if any(map(COMPRESSED_FLAG.__and__, fields[H_SYS_FLAG])):
        bodies = pa.array(_decompressed(chunks, bodies.to_pylist()), pa.binary())
    return ArrowColumns(
        queue_offsets=pa.array(fields[H_QUEUE_OFFSET], pa.int64()),
        message_ids=uniq.cast(pa.string()),
        tags=found.value(mc.PROPERTY_TAGS).cast(pa.string()),
        keys=keys.cast(pa.string()),
        bodies=bodies,
        born_timestamps=pa.array(fields[H_BORN_TIMESTAMP], pa.int64()),
        store_timestamps=pa.array(fields[H_STORE_TIMESTAMP], pa.int64()),
        reconsume_times=pa.array(fields[H_RECONSUME_TIMES], pa.int32()),
        properties=[user_properties(p) for p in props.to_pylist()] if properties else None,
    )


def _decompressed(chunks: list[RecordFrames], bodies: list[bytes]) -> list[bytes]:
    """Stored bodies with the compressed ones decompressed (as ``stored_body``)."""
    row = 0
    for frames in chunks:
        for i, h in enumerate(frames.headers):
            if h[H_SYS_FLAG] & COMPRESSED_FLAG:
                bodies[row] = _body_of(frames.topic(i), h, bodies[row])
            row += 1
    return bodies
