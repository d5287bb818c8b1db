"""A pull's records located in the ``Consume/PullBatch`` payload, not decoded: for readers that build columns from
the payload's bytes themselves (``oms.consumer.arrow_columns`` makes Arrow arrays of them with no Python object per
record, body, tag or id).

One pass over the frames reads each record's size, magic and body length and notes where its header, body and
properties lie; nothing is sliced, decoded or kept per record but five integers in one ``array``. ``decoded()``
gives the same ``MessageColumns`` as ``decode_columns`` on the same payload.
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field

from oms.consumer.columns import MessageColumns, decode_columns
from oms.consumer.records import _corrupted
from orbitmq.record import (
    HEADER,
    HEADER_SIZE,
    MESSAGE_MAGIC_CODE,
    MIN_RECORD_SIZE,
    OFF_QUEUE_OFFSET,
    PROPS_LEN,
    TRAILER,
)

SPANS_PER_RECORD = 5  # header start, body start (the header's end), body end, properties start, properties end
# size, magic and body length: the three header fields the walk needs (the rest is read in bulk from the spans)
_WALK = struct.Struct(f">iI{HEADER.size - 12}xi")
_QUEUE_OFFSET = struct.Struct(">q")


def _spans() -> array[int]:
    return array("q")


@dataclass(frozen=True)
class RecordFrames:
    """Records ``0..n-1`` of ``buffer`` in queue order: ``spans[5i:5i+5]`` are the byte offsets in ``buffer`` of
    record i's header start, body start, body end, properties start and properties end (the header is the
    ``orbitmq.record.HEADER`` layout). The spans never decrease, so ``[0, *spans]`` is a valid offsets array over
    ``buffer``: segment ``5i+1`` is record i's header, ``5i+2`` its stored body, ``5i+4`` its raw properties."""

    buffer: bytes = b""
    spans: array[int] = field(default_factory=_spans)

    def __len__(self) -> int:
        return len(self.spans) // SPANS_PER_RECORD

    def queue_offset(self, i: int) -> int:
        value: int = _QUEUE_OFFSET.unpack_from(self.buffer, self.spans[SPANS_PER_RECORD * i] + OFF_QUEUE_OFFSET)[0]
        return value

    @property
    def last_queue_offset(self) -> int:
        return self.queue_offset(len(self) - 1) if len(self) else -1

    def raw_properties(self, i: int) -> bytes:
        at = SPANS_PER_RECORD * i
        return self.buffer[self.spans[at + 3] : self.spans[at + 4]]

    def topic(self, i: int) -> str:
        """Record i's topic (for error messages: a reader knows what it pulled)."""
        at = self.spans[SPANS_PER_RECORD * i + 2]
        return self.buffer[at + 1 : at + 1 + self.buffer[at]].decode("utf-8", "replace")

    def take(self, rows: list[int]) -> RecordFrames:
        """Only ``rows`` (ascending), e.g. those a client-side tag check kept; the buffer is shared."""
        spans, kept = self.spans, _spans()
        for i in rows:
            kept.extend(spans[SPANS_PER_RECORD * i : SPANS_PER_RECORD * i + SPANS_PER_RECORD])
        return RecordFrames(self.buffer, kept)

    def before(self, queue_offset: int) -> RecordFrames:
        """The records below ``queue_offset`` (a pull that ran past the end of a reader's range); queue order is
        ascending, so they are a prefix."""
        if self.last_queue_offset < queue_offset:
            return self
        n = next(i for i in range(len(self)) if self.queue_offset(i) >= queue_offset)
        return RecordFrames(self.buffer, self.spans[: SPANS_PER_RECORD * n])

    def decoded(self, properties: bool = False) -> MessageColumns:
        """The records as ``MessageColumns``, exactly as ``decode_columns`` makes them."""
        buf, spans = self.buffer, self.spans
        whole = []
        for i in range(0, len(spans), SPANS_PER_RECORD):  # each record's bytes, header to trailer
            start = spans[i]
            whole.append(buf[start : start + HEADER.unpack_from(buf, start)[0]])
        return decode_columns(b"".join(whole), properties)


def locate_frames(raw: bytes) -> RecordFrames:
    """The records of a ``Consume/PullBatch`` answer located, with ``iter_frames``' framing checks plus one more:
    a record's topic and properties must lie inside it (the spans are used as offsets into the buffer)."""
    buf = raw if isinstance(raw, bytes) else bytes(raw)
    spans = _spans()
    add = spans.extend
    walk, props_len = _WALK.unpack_from, PROPS_LEN.unpack_from
    trailer = TRAILER.size
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < MIN_RECORD_SIZE:
            raise _corrupted(f"{end - pos} trailing bytes at {pos} are not a record")
        size, magic, body_len = walk(buf, pos)
        stop = pos + size
        if magic != MESSAGE_MAGIC_CODE or size < MIN_RECORD_SIZE + body_len or stop > end or body_len < 0:
            raise _corrupted(f"no record at {pos} (size {size}, magic {magic:#x}, body {body_len} bytes)")
        body = pos + HEADER_SIZE
        topic = body + body_len
        props = topic + 1 + buf[topic]
        if props + 2 > stop - trailer:
            raise _corrupted(f"the topic of the record at {pos} runs past its end")
        (plen,) = props_len(buf, props)
        if props + 2 + plen > stop - trailer:
            raise _corrupted(f"the properties of the record at {pos} run past its end")
        add((pos, body, topic, props + 2, props + 2 + plen))
        pos = stop
    return RecordFrames(buf, spans)
