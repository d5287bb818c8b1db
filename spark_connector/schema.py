"""The source's row schema and the pulled messages as Arrow record batches (built column by column, not per row)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.types import (
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_connector.errors import ConnectorErrorCode, RocketMQConnectorError

if TYPE_CHECKING:
    import pyarrow as pa

    import oms
    from oms.consumer.arrow_columns import ArrowColumns

BASE_FIELDS = (
    StructField("topic", StringType(), False),
    StructField("brokerName", StringType(), False),
    StructField("queueId", IntegerType(), False),
    StructField("queueOffset", LongType(), False),
    StructField("msgId", StringType(), True),
    StructField("tags", StringType(), True),
    StructField("keys", StringType(), True),  # space-separated, as RocketMQ stores KEYS
    StructField("body", BinaryType(), True),
    StructField("bornTimestamp", TimestampType(), True),
    StructField("storeTimestamp", TimestampType(), True),
    StructField("reconsumeTimes", IntegerType(), True),
)
PROPERTIES_FIELD = StructField("properties", MapType(StringType(), StringType(), True), True)


def source_schema(include_properties: bool) -> StructType:
    return StructType([*BASE_FIELDS, *([PROPERTIES_FIELD] if include_properties else [])])


def check_schema(given: StructType, include_properties: bool) -> None:
    """A user schema (``.schema(...)``) must be ours: the rows are built for exactly these columns."""
    expected = source_schema(include_properties)
    if [f.name for f in given.fields] != expected.fieldNames():
        raise RocketMQConnectorError(
            ConnectorErrorCode.INVALID_OPTION,
            f"the rocketmq source has a fixed schema {expected.simpleString()}; got {given.simpleString()} "
            "(select or cast columns after load() instead)",
            "schema",
        )


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark checks every batch against (timestamps in UTC microseconds)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")


def concat_columns(chunks: list[oms.MessageColumns]) -> oms.MessageColumns:
    """Consecutive pulls' columns as one (list extends: C loops, no per-row Python)."""
    if len(chunks) == 1:
        return chunks[0]
    import oms

    first = chunks[0]
    out = oms.MessageColumns(properties=None if first.properties is None else [])
    for chunk in chunks:
        out.queue_offsets.extend(chunk.queue_offsets)
        out.message_ids.extend(chunk.message_ids)
        out.tags.extend(chunk.tags)
        out.keys.extend(chunk.keys)
        out.bodies.extend(chunk.bodies)
        out.born_timestamps.extend(chunk.born_timestamps)
        out.store_timestamps.extend(chunk.store_timestamps)
        out.reconsume_times.extend(chunk.reconsume_times)
        if out.properties is not None:
            out.properties.extend(chunk.properties or [{} for _ in range(len(chunk))])
    return out


def to_record_batch(
    cols: oms.MessageColumns,
    topic: str,
    broker_name: str,
    queue_id: int,
    schema: pa.Schema,
    include_properties: bool,
) -> pa.RecordBatch:
    """``arrow_record_batch`` for columns decoded into Python lists (``pull_columns``)."""
    import pyarrow as pa

    from oms.consumer.arrow_columns import ArrowColumns

    arrow = ArrowColumns(
        queue_offsets=pa.array(cols.queue_offsets, pa.int64()),
        message_ids=pa.array(cols.message_ids, pa.string()),
        tags=pa.array(cols.tags, pa.string()),
        keys=pa.array(cols.keys, pa.string()),
        bodies=pa.array(cols.bodies, pa.binary()),
        born_timestamps=pa.array(cols.born_timestamps, pa.int64()),
        store_timestamps=pa.array(cols.store_timestamps, pa.int64()),
        reconsume_times=pa.array(cols.reconsume_times, pa.int32()),
        properties=cols.properties,
    )
    return arrow_record_batch(arrow, topic, broker_name, queue_id, schema, include_properties)


def arrow_record_batch(
    cols: ArrowColumns,
    topic: str,
    broker_name: str,
    queue_id: int,
    schema: pa.Schema,
    include_properties: bool,
) -> pa.RecordBatch:
    """One Arrow record batch of the connector's schema from one queue's columns (``oms.consumer.arrow_columns``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(cols)

    def micros(values: pa.Array, name: str) -> pa.Array:
        return pc.multiply(values, 1000).cast(schema.field(name).type)

    columns: list[pa.Array] = [
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(broker_name, pa.string()), n),
        pa.repeat(pa.scalar(queue_id, pa.int32()), n),
        cols.queue_offsets,
        cols.message_ids,
        cols.tags,
        cols.keys,
        cols.bodies,
        micros(cols.born_timestamps, "bornTimestamp"),
        micros(cols.store_timestamps, "storeTimestamp"),
        cols.reconsume_times,
    ]
    if include_properties:
        props = cols.properties or [{} for _ in range(n)]
        columns.append(pa.array([list(p.items()) for p in props], schema.field("properties").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
