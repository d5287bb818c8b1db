"""The source's row schema and the pulled messages as Arrow record batches (built column by column, not per row)."""

from __future__ import annotations

from collections.abc import Sequence
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


def to_record_batch(
    messages: Sequence[oms.BytesMessage],
    topic: str,
    broker_name: str,
    queue_id: int,
    schema: pa.Schema,
    include_properties: bool,
) -> pa.RecordBatch:
    import pyarrow as pa

    n = len(messages)
    columns: list[pa.Array] = [
        pa.array([topic] * n, pa.string()),
        pa.array([broker_name] * n, pa.string()),
        pa.array([queue_id] * n, pa.int32()),
        pa.array([m.queue_offset for m in messages], pa.int64()),
        pa.array([m.message_id for m in messages], pa.string()),
        pa.array([m.tags for m in messages], pa.string()),
        pa.array([" ".join(m.keys) or None for m in messages], pa.string()),
        pa.array([m.body for m in messages], pa.binary()),
        pa.array([(m.born_timestamp or 0) * 1000 for m in messages], schema.field("bornTimestamp").type),
        pa.array([(m.store_timestamp or 0) * 1000 for m in messages], schema.field("storeTimestamp").type),
        pa.array([m.reconsume_times for m in messages], pa.int32()),
    ]
    if include_properties:
        columns.append(pa.array([list(m.user_headers().items()) for m in messages], schema.field("properties").type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
