"""Batch and streaming readers: queues and offset ranges planned on the driver, ranges pulled on executors.

One input partition per queue (ranges above ``maxOffsetsPerPartition``, or fewer than ``minPartitions``, are split);
``read`` pulls its range with ``PullConsumer.pull_frames`` and yields Arrow record batches built from the pulled
payloads (``oms.consumer.arrow_columns``), or with ``pull_columns`` under ``pullDecoding=columns``.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from orbitmq.limits import MAX_PULL_BATCH_SIZE
from spark_connector.clients import CLIENTS, Catalog, QueueState
from spark_connector.errors import ConnectorErrorCode, RocketMQConnectorError, option_error
from spark_connector.offsets import (
    EARLIEST,
    LATEST,
    Offsets,
    QueueKey,
    cap,
    from_json_dict,
    rate_limit,
    to_json_dict,
    total_between,
)
from spark_connector.options import Decoding, Position, ReadOptions, TopicMode
from spark_connector.schema import arrow_record_batch, arrow_schema, concat_columns, to_record_batch

if TYPE_CHECKING:
    import pyarrow as pa

    import oms
    from oms.consumer import PendingPull
    from oms.consumer.frames import RecordFrames

log = logging.getLogger("spark_connector")

Queues = dict[str, dict[QueueKey, QueueState]]


@dataclass(frozen=True)
class QueueRange(InputPartition):
    """Offsets ``[start, end)`` of one queue: all a task needs (executors see nothing of the driver's reader)."""

    topic: str
    broker_name: str
    queue_id: int
    start: int
    end: int


# -- driver: topics, queues, positions, ranges -------------------------------------------------------------------


def resolve_queues(options: ReadOptions, catalog: Catalog) -> Queues:
    """The queues the query reads now, with their offset ranges (a pattern re-evaluated on every call)."""
    if options.mode is TopicMode.SUBSCRIBE:
        return {t: catalog.status(t, "subscribe") for t in options.topics}
    if options.mode is TopicMode.PATTERN:
        pattern = re.compile(options.pattern or "")
        out: Queues = {}
        for topic in catalog.topics():
            if pattern.fullmatch(topic):
                try:
                    out[topic] = catalog.status(topic, "subscribePattern")
                except RocketMQConnectorError:
                    continue  # deleted between listing and asking: it no longer matches
        return out
    assigned: Queues = {}
    for topic, wanted in options.assigned.items():
        status = catalog.status(topic, "assign")
        missing = [str(q) for q in wanted if q not in status]
        if missing:
            raise option_error(
                "assign", f"topic {topic!r} has no queue {', '.join(missing)} (it has {', '.join(map(str, status))})"
            )
        assigned[topic] = {q: status[q] for q in wanted}
    return assigned


def resolve_position(position: Position, queues: Queues, catalog: Catalog, option: str, default: int) -> Offsets:
    """Per queue offsets for a start or end position (``default`` for queues the JSON does not name)."""
    out: Offsets = {}
    specific = position.specific or {}
    for topic, per_queue in specific.items():
        unknown = [str(q) for q in per_queue if q not in queues.get(topic, {})]
        if topic in queues and unknown:
            raise option_error(option, f"topic {topic!r} has no queue {', '.join(unknown)}")
    for topic, states in queues.items():
        out[topic] = {}
        for queue, state in states.items():
            if position.timestamp_ms is not None:
                offset = catalog.offset_for_time(topic, queue, position.timestamp_ms)
            else:
                offset = specific.get(topic, {}).get(
                    queue, position.default if position.default is not None else default
                )
            if offset == EARLIEST:
                offset = state.min_offset
            elif offset == LATEST:
                offset = state.max_offset
            out[topic][queue] = offset
    return out


def plan_ranges(start: Offsets, end: Offsets, options: ReadOptions, catalog: Catalog | None = None) -> list[QueueRange]:
    """One range per queue with something to read, split into pieces of at most ``maxOffsetsPerPartition`` (and
    more pieces when ``minPartitions`` asks for more tasks). A queue missing from ``start`` is new: from earliest."""
    spans: list[tuple[str, QueueKey, int, int]] = []
    for topic in sorted(end):
        begin_of = start.get(topic, {})
        states: dict[QueueKey, QueueState] | None = None
        for queue in sorted(end[topic]):
            stop = end[topic][queue]
            begin = begin_of.get(queue)
            if begin is None:
                if states is None:
                    states = catalog.status(topic) if catalog is not None else {}
                begin = states[queue].min_offset if queue in states else 0
            if stop > begin:
                spans.append((topic, queue, begin, stop))
    piece = options.max_offsets_per_partition
    total = sum(stop - begin for _, _, begin, stop in spans)
    if options.min_partitions and total and len(spans) < options.min_partitions:
        piece = max(1, min(piece, math.ceil(total / options.min_partitions)))
    ranges: list[QueueRange] = []
    for topic, queue, begin, stop in spans:
        for lo in range(begin, stop, piece):
            ranges.append(QueueRange(topic, queue.broker_name, queue.queue_id, lo, min(stop, lo + piece)))
    return ranges


# -- executors: pulling a range -------------------------------------------------------------------------------------


def read_range(options: ReadOptions, schema: StructType, part: QueueRange) -> Iterator[pa.RecordBatch]:
    """The messages of ``part`` in offset order, in record batches of about ``recordBatchSize`` rows.

    ``pullsInFlight`` pulls are outstanding at once, planned at the offsets the previous ones should end at
    (``_Pulls``), so the broker's work, the network and the client's decoding overlap the Arrow conversion. Several
    pulls go into one record batch: Spark's Arrow hand-over costs per batch as well as per row.
    """
    import oms
    from oms.consumer import PullShape

    if part.end <= part.start:
        return
    consumer = CLIENTS.consumer(options.connection, options.consumer_group)
    queue = oms.MessageQueue(part.topic, part.broker_name, part.queue_id)
    target = arrow_schema(schema)
    stride = min(options.pull_batch_size, MAX_PULL_BATCH_SIZE)  # the broker never answers more per pull

    arrow = options.decoding is Decoding.ARROW
    shape = PullShape.FRAMES if arrow else PullShape.COLUMNS

    def pull(at: int, wait_s: float) -> PendingPull:
        """A pull started on the client's loop (no thread per outstanding pull)."""
        return consumer.start_pull(
            queue,
            at,
            min(stride, part.end - at),
            wait_s,
            shape=shape,
            expression=options.expression,
            expression_type=options.expression_type,
            properties=options.include_properties and not arrow,
        )

    def batch(chunks: list[Any]) -> pa.RecordBatch:
        where = (part.topic, part.broker_name, part.queue_id)
        if arrow:
            from oms.consumer.arrow_columns import to_arrow

            cols = to_arrow(chunks, options.include_properties)
            return arrow_record_batch(cols, *where, target, options.include_properties)
        return to_record_batch(concat_columns(chunks), *where, target, options.include_properties)

    offset, waited = part.start, False
    chunks: list[Any] = []  # the pulls' frames (or columns) since the last record batch
    buffered = 0
    pulls = _Pulls(pull, stride, options.pulls_in_flight, part.end)
    try:
        while offset < part.end:
            if waited:  # planned from the broker's max offset; give a lagging answer one long poll
                pulls.drop()
                result = pull(offset, options.pull_timeout_ms / 1000).result()
            else:
                result = pulls.take(offset)
            if result.status is oms.PullStatus.OFFSET_ILLEGAL:
                if offset < result.min_offset:
                    _lost(options, part, offset, min(result.min_offset, part.end))
                    offset = result.min_offset
                    continue
                _lost(options, part, offset, part.end)  # the queue ends before the range does: truncated
                break
            if result.min_offset > offset:
                _lost(options, part, offset, min(result.min_offset, part.end))
            if result.status is oms.PullStatus.NO_NEW_MSG:
                if not waited:
                    waited = True
                    continue
                _lost(options, part, offset, part.end)
                break
            waited = False
            if result.next_offset <= offset:
                raise RocketMQConnectorError(
                    ConnectorErrorCode.DATA_LOSS, f"{queue}: the broker did not move past offset {offset}", None
                )
            cols = _rows_before(result, part.end)
            if len(cols):
                chunks.append(cols)
                buffered += len(cols)
            if buffered >= options.record_batch_size:
                yield batch(chunks)
                chunks, buffered = [], 0
            offset = result.next_offset
        if chunks:
            yield batch(chunks)
    finally:
        pulls.drop()


def _rows_before(result: oms.PullResult, end: int) -> RecordFrames | oms.MessageColumns:
    """A pull's rows below offset ``end`` (the pull may run past the task's range)."""
    import oms

    if result.frames is not None:
        return result.frames.before(end)
    cols = result.columns or oms.MessageColumns()
    if cols.queue_offsets and cols.queue_offsets[-1] >= end:
        cols = cols.take([i for i, at in enumerate(cols.queue_offsets) if at < end])
    return cols


class _Pulls:
    """One range's pulls, up to ``depth`` outstanding, each planned at the offset where the one before it should
    end (``start + k * stride``). A pull that ends elsewhere (a filter that skipped, a byte limit that cut it short,
    a lost range) makes the plan wrong: what is outstanding is dropped and pulling starts again from where it is."""

    def __init__(self, pull: Callable[[int, float], PendingPull], stride: int, depth: int, end: int) -> None:
        self._pull = pull
        self._stride = stride
        self._depth = depth
        self._end = end
        self._ahead: deque[tuple[int, PendingPull]] = deque()

    def take(self, offset: int) -> oms.PullResult:
        """The pull from ``offset`` (no waiting at the queue's end), with the next ones asked for."""
        if self._ahead and self._ahead[0][0] != offset:
            self.drop()
        if not self._ahead:
            self._ahead.append((offset, self._pull(offset, 0.0)))
        at = self._ahead[-1][0] + self._stride
        while len(self._ahead) < self._depth and at < self._end:
            self._ahead.append((at, self._pull(at, 0.0)))
            at += self._stride
        return self._ahead.popleft()[1].result()

    def drop(self) -> None:
        """Forget what is outstanding (a pull already sent finishes on the loop; nobody reads its answer)."""
        while self._ahead:
            self._ahead.popleft()[1].cancel()


def _lost(options: ReadOptions, part: QueueRange, start: int, stop: int) -> None:
    where = f"queue {part.topic}/{part.broker_name}:{part.queue_id}"
    if options.fail_on_data_loss:
        raise RocketMQConnectorError(
            ConnectorErrorCode.DATA_LOSS,
            f"option 'failOnDataLoss': {where} offsets [{start}, {stop}) are gone before the query read them "
            f"(retention deleted them, or the topic was recreated). Set failOnDataLoss=false to skip lost "
            f"messages and go on.",
            "failOnDataLoss",
        )
    log.warning(
        "%s: skipped %d lost messages, offsets [%d, %d) (failOnDataLoss=false)", where, stop - start, start, stop
    )


# -- batch --------------------------------------------------------------------------------------------------------


class RocketMQBatchReader(DataSourceReader):
    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[QueueRange]:
        catalog = Catalog(self.options.connection, self.options.consumer_group)
        queues = resolve_queues(self.options, catalog)
        start = resolve_position(self.options.starting, queues, catalog, _start_option(self.options), EARLIEST)
        end = resolve_position(self.options.ending, queues, catalog, _end_option(self.options), LATEST)
        return plan_ranges(start, end, self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueueRange):  # Spark's stand-in when there is nothing to read
            return iter(())
        return read_range(self.options, self.schema, partition)


def _start_option(options: ReadOptions) -> str:
    return "startingTimestamp" if options.starting.timestamp_ms is not None else "startingOffsets"


def _end_option(options: ReadOptions) -> str:
    return "endingTimestamp" if options.ending.timestamp_ms is not None else "endingOffsets"


# -- streaming ----------------------------------------------------------------------------------------------------


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Driver side: offsets and ranges per micro-batch. ``commit``/``stop`` are hints (Spark's checkpoint is the
    truth): committing to ``group`` is best effort and one trigger late, for lag tools only."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        # driver-process state, never needed by read(): resolved once because Spark asks initialOffset twice
        self._initial: dict[str, Any] | None = None
        self._target: Offsets | None = None  # AvailableNow's snapshot
        self._latest: Offsets | None = None  # unthrottled, for progress reports
        self._last_trigger: float | None = None
        self._catalog: Catalog | None = None

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = Catalog(self.options.connection, self.options.consumer_group)
        return self._catalog

    def initialOffset(self) -> dict[str, Any]:
        if self._initial is None:
            queues = resolve_queues(self.options, self.catalog)
            start = resolve_position(self.options.starting, queues, self.catalog, _start_option(self.options), LATEST)
            self._initial = to_json_dict(start)
        return self._initial

    def prepareForTriggerAvailableNow(self) -> None:
        queues = resolve_queues(self.options, self.catalog)
        self._target = {t: {q: s.max_offset for q, s in qs.items()} for t, qs in queues.items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = from_json_dict(start)
        queues = resolve_queues(self.options, self.catalog)
        latest: Offsets = {t: {q: s.max_offset for q, s in qs.items()} for t, qs in queues.items()}
        self._latest = latest
        end: Offsets = {}
        for topic in sorted(set(begin) | set(latest)):
            end[topic] = {}
            for queue in sorted(set(begin.get(topic, {})) | set(latest.get(topic, {}))):
                at = begin.get(topic, {}).get(queue)
                state = queues.get(topic, {}).get(queue)
                if state is None:
                    assert at is not None
                    self._gone(topic, queue, at)
                    continue
                if at is None:  # a new queue (or a new topic of the pattern): from its first message, as Kafka
                    begin.setdefault(topic, {})[queue] = at = state.min_offset
                if at > state.max_offset:
                    self._gone(topic, queue, at, state.max_offset)
                    begin[topic][queue] = at = state.max_offset
                end[topic][queue] = max(at, state.max_offset)
        if self._target is not None:
            end = cap(begin, end, self._target)
        if isinstance(limit, ReadMaxRows):
            end = rate_limit(begin, end, limit.max_rows)
        if self._waits_for_more(begin, end, limit):
            return start
        return to_json_dict({t: qs for t, qs in end.items() if qs})

    def _waits_for_more(self, begin: Offsets, end: Offsets, limit: ReadLimit) -> bool:
        """``minOffsetsPerTrigger``: hold the trigger until that many are there or ``maxTriggerDelay`` passed."""
        wanted = self.options.min_offsets_per_trigger
        now = time.monotonic()
        if self._last_trigger is None:
            self._last_trigger = now
        if wanted is None or self._target is not None or isinstance(limit, ReadAllAvailable):
            return False
        available = total_between(begin, end)
        if available < wanted and (now - self._last_trigger) * 1000 < self.options.max_trigger_delay_ms:
            return True
        self._last_trigger = now
        return False

    def _gone(self, topic: str, queue: QueueKey, at: int, now_max: int | None = None) -> None:
        where = f"queue {topic}/{queue}"
        what = "no longer exists" if now_max is None else f"now ends at offset {now_max}"
        if self.options.fail_on_data_loss:
            raise RocketMQConnectorError(
                ConnectorErrorCode.DATA_LOSS,
                f"option 'failOnDataLoss': {where} {what}, but the query was at offset {at} (the topic was deleted "
                "or recreated). Set failOnDataLoss=false to go on without it.",
                "failOnDataLoss",
            )
        log.warning("%s %s (query at offset %d); going on (failOnDataLoss=false)", where, what, at)

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return to_json_dict(self._latest) if self._latest is not None else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[QueueRange]:
        return plan_ranges(from_json_dict(start), from_json_dict(end), self.options, self.catalog)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, QueueRange):  # Spark's stand-in when there is nothing to read
            return iter(())
        return read_range(self.options, self.schema, partition)

    def commit(self, end: dict[str, Any]) -> None:
        if self.options.group is None:
            return
        for topic, per_queue in from_json_dict(end).items():
            for queue, offset in per_queue.items():
                try:
                    self.catalog.commit(topic, queue, offset)
                except Exception as exc:  # progress for lag tools only: the checkpoint has the truth
                    log.warning(
                        "committing %s/%s=%d for group %s failed: %s", topic, queue, offset, self.options.group, exc
                    )

    def stop(self) -> None:
        CLIENTS.close()
