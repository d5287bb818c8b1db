"""Batch and streaming sinks: each task turns its Arrow batches into messages and sends them in batches, several in
flight, and returns only once the broker acknowledged all of them (at-least-once, like Spark's Kafka sink).

Each message can carry ``sparkIdempotenceKey = <query or write id>:<batch id>:<partition>:<sequence>``: a task
retried or a micro-batch replayed after a driver failure sends the same keys again, so consumers can drop replays.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    ByteType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from spark_connector.clients import CLIENTS
from spark_connector.errors import ConnectorErrorCode, RocketMQConnectorError
from spark_connector.options import WriteOptions

if TYPE_CHECKING:
    import pyarrow as pa

    import oms

log = logging.getLogger("spark_connector")

IDEMPOTENCE_KEY = "sparkIdempotenceKey"
_INT_TYPES = (IntegerType, LongType, ShortType, ByteType)
# (column, accepted types, what to say)
_COLUMN_TYPES: dict[str, tuple[tuple[type[DataType], ...], str]] = {
    "body": ((StringType, BinaryType), "string or binary"),
    "value": ((StringType, BinaryType), "string or binary"),
    "topic": ((StringType,), "string"),
    "tags": ((StringType,), "string"),
    "keys": ((StringType, ArrayType), "string (space-separated keys) or array<string>"),
    "properties": ((MapType,), "map<string,string>"),
    "messageGroup": ((StringType,), "string"),
    "shardingKey": ((StringType,), "string"),
    "deliveryTimestamp": ((TimestampType, TimestampNTZType, *_INT_TYPES), "timestamp or long (ms since the epoch)"),
    "delayTimeLevel": (_INT_TYPES, "int"),
}


@dataclass(frozen=True)
class Columns:
    """The input columns the sink uses (names as they appear in the DataFrame)."""

    body: str
    names: tuple[str, ...]  # every recognised column present, canonical names

    def has(self, name: str) -> bool:
        return name in self.names


def plan_columns(schema: StructType, options: WriteOptions) -> Columns:
    """Check the DataFrame's columns once on the driver; other columns are ignored, as Kafka's sink does."""
    fields = {f.name: f.dataType for f in schema.fields}
    bodies = [name for name in ("body", "value") if name in fields]
    if len(bodies) != 1:
        what = "both body and value" if bodies else f"neither body nor value (columns: {', '.join(fields)})"
        raise RocketMQConnectorError(
            ConnectorErrorCode.INVALID_COLUMN,
            f"column 'body': the sink needs exactly one of body/value, got {what}",
            "body",
        )
    if "messageGroup" in fields and "shardingKey" in fields:
        raise RocketMQConnectorError(
            ConnectorErrorCode.INVALID_COLUMN,
            "column 'shardingKey': give messageGroup or shardingKey, not both",
            "shardingKey",
        )
    for name, data_type in fields.items():
        if name not in _COLUMN_TYPES:
            continue
        accepted, what = _COLUMN_TYPES[name]
        ok = isinstance(data_type, accepted)
        if isinstance(data_type, ArrayType):
            ok = ok and isinstance(data_type.elementType, StringType)
        if isinstance(data_type, MapType):
            ok = isinstance(data_type.keyType, StringType) and isinstance(data_type.valueType, StringType)
        if not ok:
            raise RocketMQConnectorError(
                ConnectorErrorCode.INVALID_COLUMN,
                f"column '{name}' must be {what}, got {data_type.simpleString()}",
                name,
            )
    if options.topic is None and "topic" not in fields:
        raise RocketMQConnectorError(
            ConnectorErrorCode.INVALID_OPTION,
            "option 'topic': required when the DataFrame has no topic column",
            "topic",
        )
    return Columns(bodies[0], tuple(n for n in _COLUMN_TYPES if n in fields and n != "value"))


@dataclass
class SendCommitMessage(WriterCommitMessage):
    partition_id: int
    sent: int


def _ms(value: Any) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:  # TimestampNTZ: taken as UTC
            value = value.replace(tzinfo=dt.UTC)
        return int(value.timestamp() * 1000)
    return int(value)


def _bad_row(column: str, what: str) -> RocketMQConnectorError:
    return RocketMQConnectorError(ConnectorErrorCode.INVALID_COLUMN, f"column '{column}': {what}", column)


def to_messages(
    batch: pa.RecordBatch, columns: Columns, options: WriteOptions, key_prefix: str | None, seq: int
) -> list[oms.BytesMessage]:
    """One message per row; ``seq`` numbers the rows of the task for the idempotence key."""
    import oms

    n = batch.num_rows
    col = {name: batch.column(name).to_pylist() for name in {columns.body, *columns.names}}
    bodies = col[columns.body]
    topics = [options.topic] * n if options.topic is not None else col["topic"]
    tags = col.get("tags")
    keys = col.get("keys")
    props = col.get("properties")
    groups = col.get("messageGroup") or col.get("shardingKey")
    delivery = col.get("deliveryTimestamp")
    delay = col.get("delayTimeLevel")
    out: list[oms.BytesMessage] = []
    for i in range(n):
        body = bodies[i]
        if body is None:
            raise _bad_row(columns.body, f"row {seq + i} of the task has a null body (RocketMQ has no empty messages)")
        topic = topics[i]
        if not topic:
            raise _bad_row("topic", f"row {seq + i} of the task has no topic (set the topic option or column)")
        user: dict[str, str] = dict(props[i]) if props is not None and props[i] else {}
        if key_prefix is not None:
            user[IDEMPOTENCE_KEY] = f"{key_prefix}:{seq + i}"
        message = oms.BytesMessage(body, topic, user_headers=user)
        if tags is not None and tags[i]:
            message.tags = tags[i]
        if keys is not None and keys[i]:
            message.keys = keys[i].split() if isinstance(keys[i], str) else [k for k in keys[i] if k]
        if groups is not None and groups[i]:
            message.sharding_key = groups[i]
        at = delivery[i] if delivery is not None else None
        level = delay[i] if delay is not None else None
        if at is not None and level is not None:
            raise _bad_row("delayTimeLevel", f"row {seq + i} has both deliveryTimestamp and delayTimeLevel")
        if at is not None:
            message.put_sys_headers(oms.BuiltinKeys.START_TIME, _ms(at))
        if level is not None:
            message.put_sys_headers(oms.NonStandardKeys.DELAY_TIME_LEVEL, int(level))
        out.append(message)
    return out


# columns whose rows need message objects (message groups, delays): such chunks go through send_batch
_MESSAGE_ONLY = ("messageGroup", "shardingKey", "deliveryTimestamp", "delayTimeLevel")


@dataclass
class Rows:
    """A chunk as ``Producer.send_columns`` takes it: one list per column, row ``i`` of each is one message."""

    topic: str
    bodies: list[bytes]
    tags: list[str | None] | None
    keys: list[Any] | None
    properties: list[dict[str, str]] | None
    # the idempotence key per row, as a property column: checked per column, not per row
    property_columns: dict[str, list[str | None]] | None = None

    def __len__(self) -> int:
        return len(self.bodies)


def to_rows(
    batch: pa.RecordBatch, columns: Columns, options: WriteOptions, key_prefix: str | None, seq: int
) -> Rows | None:
    """The chunk as columns (no message object per row), or None when its rows need messages: a topic per row,
    message groups or delays. Same checks and the same messages as ``to_messages``."""
    if options.topic is None or any(columns.has(name) for name in _MESSAGE_ONLY):
        return None
    import pyarrow as pa

    body = batch.column(columns.body)
    if body.null_count:
        first = body.is_null().to_pylist().index(True)
        raise _bad_row(columns.body, f"row {seq + first} of the task has a null body (RocketMQ has no empty messages)")
    # a string column is cast to binary in Arrow (its UTF-8 bytes as they are): no encode() per row
    if pa.types.is_string(body.type):
        body = body.cast(pa.binary())
    elif pa.types.is_large_string(body.type):
        body = body.cast(pa.large_binary())
    bodies: list[bytes] = body.to_pylist()
    col = {name: batch.column(name).to_pylist() for name in columns.names if name not in ("topic", "body")}
    props = col.get("properties")
    user = [dict(p) if p else {} for p in props] if props is not None else None
    idempotence: dict[str, list[str | None]] | None = None
    if key_prefix is not None:  # after the row's own properties, and in their place if one has the same name
        idempotence = {IDEMPOTENCE_KEY: [f"{key_prefix}:{i}" for i in range(seq, seq + len(bodies))]}
    return Rows(options.topic, bodies, col.get("tags"), col.get("keys"), user, idempotence)


def _send(producer: oms.Producer, chunk: list[oms.BytesMessage] | Rows, deadline: float) -> int:
    """The chunk sent until acknowledged (``send_columns``, or ``send_batch`` for messages); a broker that is down
    or restarting is waited for until ``deadline``."""
    import oms

    pause = 0.1
    while True:
        remaining = deadline - time.monotonic()
        timeout = max(0.5, min(remaining, 10.0))
        try:
            if isinstance(chunk, Rows):
                return len(
                    producer.send_columns(
                        chunk.topic,
                        chunk.bodies,
                        tags=chunk.tags,
                        keys=chunk.keys,
                        properties=chunk.properties,
                        property_columns=chunk.property_columns,
                        timeout=timeout,
                    )
                )
            return len(producer.send_batch(chunk, timeout=timeout))
        except (oms.OMSMessageFormatException, oms.OMSSecurityException, oms.OMSNotSupportedException) as exc:
            raise RocketMQConnectorError(ConnectorErrorCode.SEND_FAILED, f"the broker refused a batch: {exc}") from exc
        except oms.OMSResourceNotExistException as exc:
            raise RocketMQConnectorError(
                ConnectorErrorCode.SEND_FAILED, f"option 'topic': {exc} (create the topic first)", "topic"
            ) from exc
        except oms.OMSException as exc:
            if time.monotonic() + pause > deadline:
                raise RocketMQConnectorError(
                    ConnectorErrorCode.SEND_FAILED,
                    f"a batch of {len(chunk)} messages was not acknowledged within option 'sendTimeoutMs': {exc}",
                    "sendTimeoutMs",
                ) from exc
            log.warning("send_batch failed (%s); again in %.1f s", exc, pause)
            time.sleep(pause)
            pause = min(pause * 2, 2.0)


def send_all(
    options: WriteOptions, columns: Columns, batches: Iterator[pa.RecordBatch], key_base: str | None
) -> SendCommitMessage:
    """Everything of one task, sent ``batchSize`` messages per call with ``maxInFlight`` calls outstanding."""
    from pyspark import TaskContext

    context = TaskContext.get()
    partition_id = context.partitionId() if context is not None else 0
    key_prefix = None
    if options.idempotence_keys:
        query_id = context.getLocalProperty("sql.streaming.queryId") if context is not None else None
        batch_id = context.getLocalProperty("streaming.sql.batchId") if context is not None else None
        key_prefix = f"{query_id or key_base}:{batch_id or 0}:{partition_id}"
    producer = CLIENTS.producer(options.connection, options.producer_group, options.send_timeout_ms)
    sent = seq = 0
    pending: list[Future[int]] = []
    with ThreadPoolExecutor(options.max_in_flight, thread_name_prefix="rocketmq-sink") as pool:
        try:
            for batch in batches:
                for lo in range(0, batch.num_rows, options.batch_size):
                    chunk = batch.slice(lo, options.batch_size)
                    rows = to_rows(chunk, columns, options, key_prefix, seq)
                    messages = rows if rows is not None else to_messages(chunk, columns, options, key_prefix, seq)
                    seq += len(messages)
                    deadline = time.monotonic() + options.send_timeout_ms / 1000
                    pending.append(pool.submit(_send, producer, messages, deadline))
                    while len(pending) >= options.max_in_flight:
                        sent += pending.pop(0).result()
            while pending:
                sent += pending.pop(0).result()
        finally:
            for future in pending:  # a failure above: do not start what is still queued
                future.cancel()
    return SendCommitMessage(partition_id, sent)


def _total(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.sent for m in messages if isinstance(m, SendCommitMessage))


class RocketMQWriter(DataSourceArrowWriter):
    def __init__(self, options: WriteOptions, columns: Columns, write_id: str) -> None:
        self.options = options
        self.columns = columns
        self.write_id = write_id  # made on the driver: the same in every task of this write

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SendCommitMessage:
        return send_all(self.options, self.columns, iterator, self.write_id)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("rocketmq write %s: %d messages acknowledged", self.write_id, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # at-least-once: what finished tasks sent stays stored; consumers drop replays by idempotence key
        log.warning("rocketmq write %s aborted after %d acknowledged messages", self.write_id, _total(messages))


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: WriteOptions, columns: Columns, write_id: str) -> None:
        self.options = options
        self.columns = columns
        self.write_id = write_id

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SendCommitMessage:
        return send_all(self.options, self.columns, iterator, self.write_id)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("rocketmq stream write, batch %d: %d messages acknowledged", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("rocketmq stream write, batch %d aborted after %d acknowledged", batchId, _total(messages))
