"""Pulled records (``RecordFrames``) as Arrow arrays, built from the ``PullBatch`` payload's bytes.

The payload becomes one binary array whose segments are the records' bodies, properties and the bytes between
(``RecordFrames.spans`` are its offsets); ``take`` copies the bodies and the property strings out in C, and the
message id, tag and keys come out of the property strings split once into items. Per record, Python
only walks the frames (``locate_frames``); the values equal ``decode_columns``' for the same payload. Needs pyarrow
(the ``spark`` extra); nothing else in ``oms`` imports this module.
"""

from __future__ import annotations

import functools
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from oms.consumer.columns import normalised_keys, user_properties
from oms.consumer.frames import SPANS_PER_RECORD, RecordFrames
from oms.consumer.records import COMPRESSED_FLAG, _body_of, _corrupted
from orbitmq import message_const as mc
from orbitmq.record import HEADER, NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

# Header fields read in bulk from the headers laid end to end (88 bytes each, a multiple of 8): as big-endian
# 64-bit words, the 8-aligned ones directly and those at 4 mod 8 from the bytes shifted by 4; 32-bit ones as words.
_WORDS64 = HEADER.size // 8
_WORDS32 = HEADER.size // 4
_BORN_TIMESTAMP, _STORE_TIMESTAMP = 40 // 8, 56 // 8  # byte offsets 40, 56
_QUEUE_OFFSET, _COMMITLOG_OFFSET = (20 - 4) // 8, (28 - 4) // 8  # byte offsets 20, 28, in the shifted words
_SYS_FLAG, _RECONSUME_TIMES = 36 // 4, 72 // 4
_SWAP = sys.byteorder == "little"


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


def _arrow(values: array[int], kind: pa.DataType) -> pa.Array:
    """An ``array`` of machine integers as an Arrow array over the same memory."""
    return pa.Array.from_buffers(kind, len(values), [None, pa.py_buffer(values)])


@functools.lru_cache(maxsize=32)  # a reader asks the same few sizes again and again
def _every(start: int, n: int) -> pa.Array:
    """Indices ``start, start + 5, ...``: segment ``start`` of each of ``n`` records."""
    return _arrow(array("q", range(start, SPANS_PER_RECORD * n, SPANS_PER_RECORD)), pa.int64())


def _segments(frames: RecordFrames) -> pa.Array:
    """The payload as a binary array: segment ``5i+1`` is record i's header, ``5i+2`` its body, ``5i+4`` its
    properties (``RecordFrames.spans`` are the offsets)."""
    offsets = array("q", (0,)) + frames.spans
    return pa.Array.from_buffers(
        pa.large_binary(), len(frames.spans), [None, pa.py_buffer(offsets), pa.py_buffer(frames.buffer)]
    )


def _words(raw: memoryview | bytes, typecode: str) -> array[int]:
    words = array(typecode)
    words.frombytes(raw)
    if _SWAP:
        words.byteswap()
    return words


class _Headers:
    """The records' headers end to end, read as big-endian words (no Python object per record)."""

    def __init__(self, headers: pa.Array, n: int) -> None:
        raw = memoryview(headers.buffers()[2])[: n * HEADER.size]  # a fresh array from take: its data at 0
        self.q = _words(raw, "q")
        self.shifted = _words(raw[4 : len(raw) - 4], "q")  # the last record's last word is not needed
        self.i = _words(raw, "i")

    def int64(self, word: int, shifted: bool = False) -> pa.Array:
        return _arrow((self.shifted if shifted else self.q)[word::_WORDS64], pa.int64())

    def int32(self, word: int) -> array[int]:
        return self.i[word::_WORDS32]


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
        if not len(rows):  # no record has it (tags and keys are often unused)
            return pa.nulls(self.rows, self.items.type)
        # each hit starts with the needle: dropping its first occurrence leaves the value (faster than a slice)
        values = pc.replace_substring(self.items.filter(hit), needle, "", max_replacements=1)
        later = pc.not_equal(rows.slice(1), rows.slice(0, len(rows) - 1))  # rows ascend: a repeat follows its first
        if len(rows) > 1 and not pc.all(later).as_py():  # a name given twice: the first counts
            keep = pa.concat_arrays([pa.array([True]), later])
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
    headers = _Headers(segments.take(_every(1, n)), n)
    bodies = segments.take(_every(2, n)).cast(pa.binary())
    try:
        props = segments.take(_every(4, n)).cast(pa.large_string())
    except pa.ArrowInvalid as exc:
        raise _corrupted(f"record properties are not UTF-8: {exc}") from exc
    found = _Properties(props)
    uniq = found.value(mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
    if uniq.null_count:  # no client id: the record's CommitLog offset, as decode_records names it
        stored_at = headers.int64(_COMMITLOG_OFFSET, shifted=True).cast(uniq.type)
        uniq = pc.if_else(pc.is_valid(uniq), uniq, stored_at)
    keys = found.value(mc.PROPERTY_KEYS)
    if pc.any(pc.match_substring(keys, mc.KEY_SEPARATOR)).as_py():  # several keys: drop duplicates row by row
        keys = pa.array([normalised_keys(k) for k in keys.to_pylist()], pa.string())
    flags = headers.int32(_SYS_FLAG)
    if any(map(COMPRESSED_FLAG.__and__, flags)):
        bodies = pa.array(_decompressed(chunks, flags, bodies.to_pylist()), pa.binary())
    return ArrowColumns(
        queue_offsets=headers.int64(_QUEUE_OFFSET, shifted=True),
        message_ids=uniq.cast(pa.string()),
        tags=found.value(mc.PROPERTY_TAGS).cast(pa.string()),
        keys=keys.cast(pa.string()),
        bodies=bodies,
        born_timestamps=headers.int64(_BORN_TIMESTAMP),
        store_timestamps=headers.int64(_STORE_TIMESTAMP),
        reconsume_times=_arrow(headers.int32(_RECONSUME_TIMES), pa.int32()),
        properties=[user_properties(p) for p in props.to_pylist()] if properties else None,
    )


def _decompressed(chunks: list[RecordFrames], flags: array[int], bodies: list[bytes]) -> list[bytes]:
    """Stored bodies with the compressed ones decompressed (as ``stored_body``)."""
    row = 0
    for frames in chunks:
        for i in range(len(frames)):
            if flags[row] & COMPRESSED_FLAG:
                at = frames.spans[SPANS_PER_RECORD * i]
                bodies[row] = _body_of(frames.topic(i), HEADER.unpack_from(frames.buffer, at), bodies[row])
            row += 1
    return bodies
