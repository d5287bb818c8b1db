"""``PlainRun``: plain messages of one topic encoded once as a ``Produce/SendBatch`` payload, in one pass.

The batched produce path (``send_batch`` of plain messages, ``send_columns``) builds the request here, ids and
results in bulk; a row becomes a ``WireMessage`` only when a path needs one (v2 SendMessage, a selector).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from typing import TypeVar, cast, overload

from rocketmq.grpc_protocol import definition_pb2

from oms.client.batch_wire import SendBatchWire
from oms.client.identity import new_message_ids
from oms.convert import WireMessage, v2_message, validate_producer_body
from oms.message import BytesMessage
from oms.producer.result import SendResult, SendStatus
from oms.queue import MessageQueue
from orbitmq import message_const as mc
from orbitmq.errors import Code, MQError
from orbitmq.limits import MAX_PROPERTY_COUNT
from orbitmq.message_batch import BATCH_MAGIC_CODE, ENTRY_HEAD, MAX_PROPERTIES_BYTES, MIN_ENTRY_SIZE, PROPS_LEN
from orbitmq.proto import produce_pb2
from orbitmq.record import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR, decode_properties
from orbitmq.validation import (
    UserPropertiesCheck,
    has_control,
    validate_keys,
    validate_properties_size,
    validate_tag,
    validate_topic,
    validate_user_properties,
)

_NORMAL_ONLY = frozenset({definition_pb2.NORMAL})
_TAG_ITEM = mc.PROPERTY_TAGS + NAME_VALUE_SEPARATOR
_KEYS_ITEM = mc.PROPERTY_KEYS + NAME_VALUE_SEPARATOR
_ID_ITEM = mc.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX + NAME_VALUE_SEPARATOR


class PlainRun(Sequence[WireMessage]):
    """Rows of one topic, in one request: their ids, bodies, stored properties and the MessageBatch payload.

    ``positions`` are the rows' places in the caller's input (a ``send_batch`` may mix topics). As a sequence it
    gives each row's ``WireMessage``, made on demand (a new object per access: paths that change a wire keep it).
    """

    __slots__ = ("bodies", "born_host", "born_ms", "ids", "payload", "positions", "raw_properties", "sources", "topic")

    message_types = _NORMAL_ONLY

    def __init__(
        self,
        topic: str,
        bodies: list[bytes],
        ids: list[str],
        raw_properties: Sequence[bytes],
        payload: bytes,
        positions: Sequence[int],
        sources: Sequence[BytesMessage] | None,
        born_host: str,
        born_ms: int,
    ) -> None:
        self.topic = topic
        self.bodies = bodies
        self.ids = ids
        self.raw_properties = raw_properties
        self.payload = payload
        self.positions = positions
        self.sources = sources
        self.born_host = born_host
        self.born_ms = born_ms

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> WireMessage: ...
    @overload
    def __getitem__(self, index: slice) -> list[WireMessage]: ...
    def __getitem__(self, index: int | slice) -> WireMessage | list[WireMessage]:
        if isinstance(index, slice):
            return [self._row(i) for i in range(len(self.ids))[index]]
        return self._row(range(len(self.ids))[index])

    def __iter__(self) -> Iterator[WireMessage]:
        return (self._row(i) for i in range(len(self.ids)))

    def _row(self, i: int) -> WireMessage:
        source = self.sources[i] if self.sources is not None else None
        props = decode_properties(self.raw_properties[i])
        return WireMessage(source, self.topic, definition_pb2.NORMAL, self.bodies[i], self.ids[i], self._v2, props)

    def _v2(self, wire: WireMessage) -> definition_pb2.Message:
        """The row's v2 message, for a broker without ``Produce/SendBatch``: what ``to_wire`` would build."""
        props = wire.batch_properties or {}
        keys = props.get(mc.PROPERTY_KEYS)
        return v2_message(
            topic=wire.topic,
            namespace="",
            body=wire.body,
            message_id=wire.message_id,
            born_host=self.born_host,
            message_type=definition_pb2.NORMAL,
            encoding=definition_pb2.IDENTITY,
            born_ms=self.born_ms,
            tag=props.get(mc.PROPERTY_TAGS),
            keys=keys.split(mc.KEY_SEPARATOR) if keys else [],
            properties={k: v for k, v in props.items() if k not in mc.BATCH_SYSTEM_PROPERTIES},
        )

    def request(self, queue_id: int) -> produce_pb2.SendBatchRequest:
        return self.wire(queue_id).to_pb()

    def wire(self, queue_id: int) -> SendBatchWire:
        """The request serialized by hand (the direct path writes the payload as it is: ``batch_wire``)."""
        return SendBatchWire(
            topic=self.topic,
            queue_id=queue_id,
            messages=self.payload,
            count=len(self.ids),
            born_timestamp_ms=int(time.time() * 1000),
        )

    def results(self, queue: MessageQueue, first_offset: int, status: SendStatus) -> list[SendResult]:
        return SendResult.stored_run(self.ids, self.topic, queue, first_offset, status)


class _Untailed(Sequence[bytes]):
    """Each row's stored properties, read from entry tails (their 2-byte length, then the properties) on demand:
    only the paths that rebuild a row as a ``WireMessage`` ask for them."""

    __slots__ = ("_tails",)

    def __init__(self, tails: list[bytes]) -> None:
        self._tails = tails

    def __len__(self) -> int:
        return len(self._tails)

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...
    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        if isinstance(index, slice):
            return [tail[PROPS_LEN.size :] for tail in self._tails[index]]
        return self._tails[index][PROPS_LEN.size :]


class ColumnRefusal(Exception):
    """A property column refused: ``row`` says where (None: its name), ``error`` what, in the words of
    ``validate_user_properties``."""

    def __init__(self, row: int | None, error: MQError) -> None:
        super().__init__(row, error)
        self.row = row
        self.error = error


class PropertyColumns:
    """Named user-property columns of one call (``send_columns(property_columns=...)``), checked in bulk: each
    name once, each column's values in one pass, so a per-row property (an idempotence key) costs a string join.

    Row ``i`` gets ``encoded[i]`` (its items in the stored form), ``sizes[i]`` bytes and ``counts[i]`` properties;
    a None value leaves the property out of that row."""

    __slots__ = ("counts", "encoded", "names", "sizes")

    def __init__(self, columns: Mapping[str, Sequence[str | None]], n: int) -> None:
        self.names = frozenset(columns)
        if len(columns) > MAX_PROPERTY_COUNT:
            raise ColumnRefusal(
                None,
                MQError(
                    Code.MESSAGE_PROPERTIES_TOO_LARGE,
                    f"message has {len(columns)} user properties, the limit is {MAX_PROPERTY_COUNT}",
                ),
            )
        self.encoded = [""] * n
        self.sizes = [0] * n
        self.counts = [0] * n
        for name, values in columns.items():
            if len(values) != n:
                raise ValueError(f"property column {name!r} has {len(values)} rows, bodies has {n}")
            present = [v for v in values if v is not None]
            try:
                name_size = validate_user_properties({name: ""})
            except MQError as exc:
                raise ColumnRefusal(None, exc) from None
            strings = all(type(v) is str for v in present)
            joined = "".join(present) if strings else ""
            if not strings or has_control(joined):
                for row, value in enumerate(values):  # the first bad row, refused as any property would be
                    if value is not None:
                        try:
                            if not isinstance(value, str):
                                raise MQError(
                                    Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"user property {name!r} is not a string"
                                )
                            validate_user_properties({name: value})
                        except MQError as exc:
                            raise ColumnRefusal(row, exc) from None
            item = f"{name}{NAME_VALUE_SEPARATOR}"
            ascii_only = joined.isascii()
            encoded, sizes, counts = self.encoded, self.sizes, self.counts
            for row, value in enumerate(values):
                if value is not None:
                    encoded[row] = f"{encoded[row]}{item}{value}{PROPERTY_SEPARATOR}"
                    sizes[row] += name_size + (len(value) if ascii_only else len(value.encode("utf-8")))
                    counts[row] += 1


T = TypeVar("T")


def in_input_order(runs: Sequence[PlainRun], per_run: Sequence[Sequence[T]], n: int) -> list[T]:
    """What was made run by run, one item per row (results, wires), back in the rows' input order (``n`` rows)."""
    if len(runs) == 1:  # one topic, one request: its rows are the input, in order
        return list(per_run[0])
    out: list[T | None] = [None] * n
    for run, items in zip(runs, per_run, strict=True):
        for position, item in zip(run.positions, items, strict=True):
            out[position] = item
    return cast(list[T], out)


class PlainRunBuilder:
    """Checks plain rows as ``to_wire`` checks a message and cuts them into runs of at most ``max_bytes`` of
    bodies and ``max_count`` rows (a single larger row gets a run of its own), for one call.

    Raises ``MQError`` for the first refused row (``failed_row`` is its position); nothing is sent before every
    row of a call is checked."""

    def __init__(self, *, born_host: str, max_message_size: int, max_bytes: int, max_count: int) -> None:
        self.born_host = born_host
        self.max_message_size = max_message_size
        self.max_bytes = max_bytes
        self.max_count = max_count
        self.born_ms = int(time.time() * 1000)
        self.failed_row = -1
        self._checked_topics: set[str] = set()
        self._checked_tags: dict[str, int] = {}  # tag -> its UTF-8 size: a batch mostly repeats its tags
        self._check_user = UserPropertiesCheck()

    def runs(
        self,
        topic: str,
        bodies: Sequence[bytes],
        tags: Sequence[str | None] | None,
        keys: Sequence[list[str] | None] | None,
        properties: Sequence[Mapping[str, str] | None] | None,
        sources: Sequence[BytesMessage] | None = None,
        positions: Sequence[int] | None = None,
        columns: PropertyColumns | None = None,
    ) -> list[PlainRun]:
        """Row ``i`` is ``bodies[i]`` with ``tags[i]``, ``keys[i]``, ``properties[i]`` (a column may be None:
        no row has one) and its ``columns`` properties after those (a name in both: the column's value);
        ``sources[i]`` is its message, if any (the caller stamps the runs' ids on it once they are made, as
        ``to_wire`` gives a message its id); ``positions`` (default 0..n-1) are the rows' places in the caller's
        input."""
        n = len(bodies)
        if positions is None:
            positions = range(n)
        if topic not in self._checked_topics:
            try:
                validate_topic(topic)
            except MQError:
                self.failed_row = positions[0] if n else -1
                raise
            self._checked_topics.add(topic)
        ids = new_message_ids(n)
        if columns is None and not (properties and any(properties)) and not (keys and any(keys)):
            simple = self._simple_runs(topic, bodies, tags, ids, positions, sources)
            if simple is not None:
                return simple
        return self._row_runs(topic, bodies, tags, keys, properties, sources, positions, columns, ids)

    def _simple_runs(
        self,
        topic: str,
        bodies: Sequence[bytes],
        tags: Sequence[str | None] | None,
        ids: list[str],
        positions: Sequence[int],
        sources: Sequence[BytesMessage] | None,
    ) -> list[PlainRun] | None:
        """``_row_runs`` for rows whose only property besides the id is an ASCII tag (most batches): the checks once
        per distinct tag and over the body lengths, the payload in a loop that does nothing else (0.46 -> 0.33 us
        per row; with the tails below, 0.48 -> 0.41 us per row with the ids). None when a row needs what only the
        row loop does: a refusal, which names its row, a cut at ``max_bytes`` inside a run of ``max_count`` rows,
        or a tag whose UTF-8 length differs from its length in characters."""
        n = len(bodies)
        lengths = list(map(len, bodies))
        if not n or not min(lengths) or max(lengths) > self.max_message_size:
            return None
        max_count = self.max_count
        if any(sum(lengths[start : start + max_count]) > self.max_bytes for start in range(0, n, max_count)):
            return None
        distinct: set[str | None] = set(tags) if tags is not None else {None}
        if not self._tags_pass(distinct) or not all(tag.isascii() for tag in distinct if tag):
            return None
        # Each row's stored properties with their 2-byte length in front (the entry's tail), made by one f-string
        # and one encode per row: every part is ASCII, so a length written as two latin-1 characters encodes to
        # its two bytes. Per distinct tag, what comes before the id is made once.
        id_size = len(ids[0]) if ids else 0  # the ids of one call have one length
        heads: dict[str | None, str] = {}
        for tag in distinct:
            before = f"{_TAG_ITEM}{tag}{PROPERTY_SEPARATOR}{_ID_ITEM}" if tag else _ID_ITEM
            size = len(before) + id_size + len(PROPERTY_SEPARATOR)
            if size > MAX_PROPERTIES_BYTES:
                return None
            heads[tag] = PROPS_LEN.pack(size).decode("latin-1") + before
        if tags is None or len(distinct) == 1:
            head = heads[next(iter(distinct))]
            tails = [f"{head}{mid}{PROPERTY_SEPARATOR}".encode("latin-1") for mid in ids]
        else:
            tails = [
                f"{heads[tag]}{mid}{PROPERTY_SEPARATOR}".encode("latin-1") for tag, mid in zip(tags, ids, strict=True)
            ]
        head_pack, crc32 = ENTRY_HEAD.pack, zlib.crc32
        runs: list[PlainRun] = []
        for start in range(0, n, max_count):
            end = min(start + max_count, n)
            parts: list[bytes] = []
            for body, blen, tail in zip(bodies[start:end], lengths[start:end], tails[start:end], strict=True):
                parts += (head_pack(ENTRY_HEAD.size + blen + len(tail), BATCH_MAGIC_CODE, crc32(body), 0, blen),
                          body, tail)  # fmt: skip
            runs.append(
                self._run(topic, bodies, ids, _Untailed(tails[start:end]), parts, positions, sources, start, end)
            )
        return runs

    def _tags_pass(self, tags: set[str | None]) -> bool:
        """Whether every tag passes the row loop's checks (``validate_tag``, and the properties' size, which for
        a row with only a tag is the tag's): a tag that fails leaves the refusal to the row loop."""
        checked = self._checked_tags
        for tag in tags:
            if tag:
                try:
                    size = checked.get(tag)
                    if size is None:
                        validate_tag(tag)
                        size = checked[tag] = len(tag.encode("utf-8"))
                    validate_properties_size(size)
                except MQError:
                    return False
        return True

    def _row_runs(
        self,
        topic: str,
        bodies: Sequence[bytes],
        tags: Sequence[str | None] | None,
        keys: Sequence[list[str] | None] | None,
        properties: Sequence[Mapping[str, str] | None] | None,
        sources: Sequence[BytesMessage] | None,
        positions: Sequence[int],
        columns: PropertyColumns | None,
        ids: list[str],
    ) -> list[PlainRun]:
        """Every row checked and encoded in turn: any mix of user properties, property columns, tags and keys."""
        n = len(bodies)
        max_size, max_bytes, max_count = self.max_message_size, self.max_bytes, self.max_count
        checked_tags, check_user = self._checked_tags, self._check_user
        head_pack, len_pack, crc32 = ENTRY_HEAD.pack, PROPS_LEN.pack, zlib.crc32
        runs: list[PlainRun] = []
        parts: list[bytes] = []
        raws: list[bytes] = []
        start = size = i = 0
        try:
            for i in range(n):
                body = bodies[i]
                blen = len(body)
                if not blen or blen > max_size:
                    validate_producer_body(body, max_size)
                prefix = ""
                extra = 0
                if properties is not None and (user := properties[i]):
                    if columns is not None and not columns.names.isdisjoint(user):
                        user = {k: v for k, v in user.items() if k not in columns.names}
                    if columns is not None and len(user) + columns.counts[i] > MAX_PROPERTY_COUNT:
                        raise MQError(
                            Code.MESSAGE_PROPERTIES_TOO_LARGE,
                            f"message has {len(user) + columns.counts[i]} user properties, "
                            f"the limit is {MAX_PROPERTY_COUNT}",
                        )
                    if user:
                        extra = check_user(user)
                        prefix = (
                            PROPERTY_SEPARATOR.join(map(NAME_VALUE_SEPARATOR.join, user.items())) + PROPERTY_SEPARATOR
                        )
                if columns is not None and columns.counts[i]:
                    extra += columns.sizes[i]
                    prefix += columns.encoded[i]
                if tags is not None and (tag := tags[i]):
                    tag_size = checked_tags.get(tag)
                    if tag_size is None:
                        validate_tag(tag)
                        tag_size = checked_tags[tag] = len(tag.encode("utf-8"))
                    extra += tag_size
                    prefix = f"{prefix}{_TAG_ITEM}{tag}{PROPERTY_SEPARATOR}"
                if keys is not None and (key_list := keys[i]):
                    validate_keys(key_list)
                    extra += sum(len(k.encode("utf-8")) for k in key_list)
                    prefix = f"{prefix}{_KEYS_ITEM}{mc.KEY_SEPARATOR.join(key_list)}{PROPERTY_SEPARATOR}"
                if extra:
                    validate_properties_size(extra)
                # the order of the broker's from_v2_message (user properties, tag, keys, id), as to_wire gives it
                raw = f"{prefix}{_ID_ITEM}{ids[i]}{PROPERTY_SEPARATOR}".encode()
                if len(raw) > MAX_PROPERTIES_BYTES:  # the layout's own limit, beyond the property limits
                    raise MQError(
                        Code.MESSAGE_PROPERTIES_TOO_LARGE,
                        f"properties are {len(raw)} bytes, the limit of the batch layout is {MAX_PROPERTIES_BYTES}",
                    )
                if i > start and (size + blen > max_bytes or i - start >= max_count):
                    runs.append(self._run(topic, bodies, ids, raws, parts, positions, sources, start, i))
                    parts, raws, start, size = [], [], i, 0
                parts += (head_pack(MIN_ENTRY_SIZE + blen + len(raw), BATCH_MAGIC_CODE, crc32(body), 0, blen), body,
                          len_pack(len(raw)), raw)  # fmt: skip
                raws.append(raw)
                size += blen
        except MQError:
            self.failed_row = positions[i] if n else -1
            raise
        if n > start:
            runs.append(self._run(topic, bodies, ids, raws, parts, positions, sources, start, n))
        return runs

    def _run(
        self,
        topic: str,
        bodies: Sequence[bytes],
        ids: list[str],
        raws: Sequence[bytes],
        parts: list[bytes],
        positions: Sequence[int],
        sources: Sequence[BytesMessage] | None,
        start: int,
        end: int,
    ) -> PlainRun:
        return PlainRun(
            topic,
            list(bodies[start:end]),
            ids[start:end],
            raws,
            b"".join(parts),
            positions[start:end],
            sources[start:end] if sources is not None else None,
            self.born_host,
            self.born_ms,
        )
