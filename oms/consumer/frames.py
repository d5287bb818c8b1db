"""A pull's records located in the ``Consume/PullBatch`` payload, not decoded: for readers that build columns from
the payload's bytes themselves (``oms.consumer.arrow_columns`` makes Arrow arrays of them with no Python object per
body, tag or id).

One pass over the frames unpacks each record's fixed header and notes where its body and properties lie; nothing
is sliced or decoded. ``decoded()`` gives the same ``MessageColumns`` as ``decode_columns`` on the same payload.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oms.consumer.columns import MessageColumns, decode_columns
from oms.consumer.records import _corrupted
from orbitmq.record import HEADER, HEADER_SIZE, MESSAGE_MAGIC_CODE, MIN_RECORD_SIZE, PROPS_LEN, TRAILER

# fields of a record's header tuple (``orbitmq.record.HEADER``) that become columns
H_SIZE, H_MAGIC, H_QUEUE_OFFSET, H_COMMITLOG_OFFSET, H_SYS_FLAG = 0, 1, 5, 6, 7
H_BORN_TIMESTAMP, H_STORE_TIMESTAMP, H_RECONSUME_TIMES, H_BODY_LEN = 8, 11, 14, 16


@dataclass(frozen=True)
class RecordFrames:
    """Records ``0..n-1`` of ``buffer`` in queue order: ``headers[i]`` is record i's header tuple, and
    ``spans[4i:4i+4]`` the byte offsets in ``buffer`` of its stored body and its raw properties
    (``start, end, start, end``). The spans never decrease, so ``[0, *spans]`` is a valid offsets array over
    ``buffer``: segment ``4i+1`` is record i's body, ``4i+3`` its properties (the others are the bytes between)."""

    buffer: bytes = b""
    headers: list[tuple[Any, ...]] = field(default_factory=list)
    spans: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.headers)

    @property
    def last_queue_offset(self) -> int:
        return int(self.headers[-1][H_QUEUE_OFFSET]) if self.headers else -1

    def raw_properties(self, i: int) -> bytes:
        return self.buffer[self.spans[4 * i + 2] : self.spans[4 * i + 3]]

    def topic(self, i: int) -> str:
        """Record i's topic (for error messages: a reader knows what it pulled)."""
        at = self.spans[4 * i + 1]
        return self.buffer[at + 1 : at + 1 + self.buffer[at]].decode("utf-8", "replace")

    def take(self, rows: list[int]) -> RecordFrames:
        """Only ``rows`` (ascending), e.g. those a client-side tag check kept; the buffer is shared."""
        spans = self.spans
        return RecordFrames(
            self.buffer,
            [self.headers[i] for i in rows],
            [s for i in rows for s in spans[4 * i : 4 * i + 4]],
        )

    def before(self, queue_offset: int) -> RecordFrames:
        """The records below ``queue_offset`` (a pull that ran past the end of a reader's range)."""
        if self.last_queue_offset < queue_offset:
            return self
        n = sum(1 for h in self.headers if h[H_QUEUE_OFFSET] < queue_offset)
        return RecordFrames(self.buffer, self.headers[:n], self.spans[: 4 * n])

    def decoded(self, properties: bool = False) -> MessageColumns:
        """The records as ``MessageColumns``, exactly as ``decode_columns`` makes them."""
        if not self.headers:
            return MessageColumns(properties=[] if properties else None)
        buf, spans = self.buffer, self.spans
        # each record re-framed on its own: its bytes from the header to the trailer
        return decode_columns(
            b"".join(buf[spans[4 * i] - HEADER_SIZE : spans[4 * i] - HEADER_SIZE + h[H_SIZE]] for i, h in
                     enumerate(self.headers)),
            properties,
        )  # fmt: skip


def locate_frames(raw: bytes) -> RecordFrames:
    """The records of a ``Consume/PullBatch`` answer located, with ``iter_frames``' framing checks plus one more:
    a record's topic and properties must lie inside it (the spans are used as offsets into the buffer)."""
    buf = raw if isinstance(raw, bytes) else bytes(raw)
    headers: list[tuple[Any, ...]] = []
    spans: list[int] = []
    add_header, add_spans = headers.append, spans.extend
    unpack, props_len = HEADER.unpack_from, PROPS_LEN.unpack_from
    trailer = TRAILER.size
    pos, end = 0, len(buf)
    while pos < end:
        if end - pos < MIN_RECORD_SIZE:
            raise _corrupted(f"{end - pos} trailing bytes at {pos} are not a record")
        h = unpack(buf, pos)
        size, body_len = h[H_SIZE], h[H_BODY_LEN]
        stop = pos + size
        if h[H_MAGIC] != MESSAGE_MAGIC_CODE or size < MIN_RECORD_SIZE + body_len or stop > end or body_len < 0:
            raise _corrupted(f"no record at {pos} (size {size}, magic {h[H_MAGIC]:#x}, body {body_len} bytes)")
        body = pos + HEADER_SIZE
        topic = body + body_len
        props = topic + 1 + buf[topic]
        if props + 2 > stop - trailer:
            raise _corrupted(f"the topic of the record at {pos} runs past its end")
        (plen,) = props_len(buf, props)
        if props + 2 + plen > stop - trailer:
            raise _corrupted(f"the properties of the record at {pos} run past its end")
        add_header(h)
        add_spans((body, topic, props + 2, props + 2 + plen))
        pos = stop
    return RecordFrames(buf, headers, spans)
