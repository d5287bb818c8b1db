"""The driver side without Spark: options, offset arithmetic, and the stream reader's plans against a real broker
(admission control, minOffsetsPerTrigger, AvailableNow's snapshot, new queues and topics, range splitting)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

import oms
from spark_connector.errors import ConnectorErrorCode, RocketMQConnectorError
from spark_connector.offsets import QueueKey, from_json_dict, rate_limit, to_json_dict, total_between
from spark_connector.options import parse_read_options, parse_write_options
from spark_connector.reader import QueueRange, RocketMQStreamReader
from spark_connector.schema import source_schema
from tests.conftest import BrokerHandle
from tests.spark.conftest import create_topic, produce

A0, A1, B0 = QueueKey("a", 0), QueueKey("a", 1), QueueKey("b", 0)


def count(offsets: dict[str, dict[str, int]]) -> int:
    return sum(o for per_queue in offsets.values() for o in per_queue.values())


def test_rate_limit_shares_the_budget_by_backlog_and_spends_it_exactly() -> None:
    start = {"t": {A0: 0, A1: 10, B0: 5}}
    end = {"t": {A0: 100, A1: 12, B0: 5}}
    limited = rate_limit(start, end, 50)
    assert total_between(start, limited) == 50
    assert limited["t"][A1] == 11 and limited["t"][B0] == 5, "a small queue gets its rounded-up share"
    assert rate_limit(start, end, 1000) == end
    assert total_between(start, rate_limit(start, end, 1)) == 1


def test_offsets_json_round_trip_is_sorted_with_string_keys() -> None:
    offsets = {"z": {QueueKey("b", 10): 3, QueueKey("b", 2): 1}, "a": {A0: 7}}
    as_json = to_json_dict(offsets)
    assert list(as_json) == ["a", "z"] and list(as_json["z"]) == ["b:2", "b:10"]
    assert from_json_dict(as_json) == offsets


@pytest.mark.parametrize(
    ("options", "code", "named"),
    [
        ({"subscribe": "t", "assign": '{"t": ["a:0"]}'}, ConnectorErrorCode.INVALID_OPTION, "option 'assign'"),
        ({"subscribe": "t", "nosuch": "1"}, ConnectorErrorCode.UNKNOWN_OPTION, "option 'nosuch'"),
        ({"subscribe": "t", "startingOffsets": "{"}, ConnectorErrorCode.INVALID_OPTION, "malformed JSON"),
        ({"subscribe": "t", "startingOffsets": '{"u": {"a:0": 1}}'}, ConnectorErrorCode.INVALID_OPTION, "'u'"),
        ({"subscribe": "t", "startingOffsets": '{"t": {"a:0": -3}}'}, ConnectorErrorCode.INVALID_OPTION, ">= -2"),
        ({"subscribe": "t", "maxTriggerDelay": "soon"}, ConnectorErrorCode.INVALID_OPTION, "maxTriggerDelay"),
        ({"subscribe": "t", "endingOffsets": "latest"}, ConnectorErrorCode.INVALID_OPTION, "endingOffsets"),
        ({"subscribe": "t", "subExpression": "A", "sql92": "a > 1"}, ConnectorErrorCode.INVALID_OPTION, "sql92"),
        ({"subscribePattern": "("}, ConnectorErrorCode.INVALID_OPTION, "subscribePattern"),
        ({"subscribe": "t", "minOffsetsPerTrigger": "9", "maxOffsetsPerTrigger": "5"}, None, "minOffsetsPerTrigger"),
        ({"subscribe": "t", "group": "bad group"}, ConnectorErrorCode.INVALID_OPTION, "option 'group'"),
    ],
)
def test_bad_stream_options_name_the_option(
    options: dict[str, str], code: ConnectorErrorCode | None, named: str
) -> None:
    with pytest.raises(RocketMQConnectorError) as info:
        parse_read_options({"nameServer": "127.0.0.1:9876", **options}, streaming=True)
    assert named in str(info.value)
    assert code is None or info.value.code is code


def test_connection_comes_from_the_options_or_namesrv_addr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    with pytest.raises(RocketMQConnectorError, match="option 'nameServer': required"):
        parse_write_options({"topic": "t"})
    monkeypatch.setenv("NAMESRV_ADDR", "10.0.0.1:9876;10.0.0.2:9876")
    assert parse_write_options({"topic": "t"}).connection.url == "oms:rocketmq://10.0.0.1:9876;10.0.0.2:9876/"
    with pytest.raises(RocketMQConnectorError, match="option 'endpoints': 'nohost' is not host:port"):
        parse_write_options({"topic": "t", "endpoints": "nohost"})


@pytest.mark.integration
@pytest.mark.timeout(120)
def test_stream_reader_plans_limits_new_queues_and_available_now(
    spark_broker: BrokerHandle, access_point: oms.MessagingAccessPoint
) -> None:
    create_topic(access_point, "SparkPlanA", queues=2)
    produce(access_point, [oms.BytesMessage(f"p{i}", "SparkPlanA") for i in range(40)], per_batch=10)
    options = parse_read_options(
        {
            "endpoints": spark_broker.addr,
            "subscribePattern": "SparkPlan.*",
            "startingOffsets": "earliest",
            "maxOffsetsPerTrigger": "15",
            "minOffsetsPerTrigger": "5",
            "maxTriggerDelay": "1s",
            "maxOffsetsPerPartition": "4",
        },
        streaming=True,
    )
    reader = RocketMQStreamReader(options, source_schema(False))
    start = reader.initialOffset()
    assert reader.initialOffset() == start and count(start) == 0
    limit = reader.getDefaultReadLimit()
    assert isinstance(limit, ReadMaxRows) and limit.max_rows == 15
    end = reader.latestOffset(start, limit)
    assert total_between(from_json_dict(start), from_json_dict(end)) == 15
    ranges = reader.partitions(start, end)
    assert all(isinstance(r, QueueRange) and r.end - r.start <= 4 for r in ranges)
    assert sum(r.end - r.start for r in ranges) == 15
    assert reader.partitions(end, end) == []
    latest = reader.latestOffset(end, ReadAllAvailable())
    assert count(latest) == 40, "ReadAllAvailable ignores maxOffsetsPerTrigger"
    assert reader.reportLatestOffset() == latest

    # minOffsetsPerTrigger: two new messages wait until maxTriggerDelay passed
    produce(access_point, [oms.BytesMessage("late", "SparkPlanA"), oms.BytesMessage("later", "SparkPlanA")])
    assert reader.latestOffset(latest, limit) == latest
    time.sleep(1.1)
    moved = reader.latestOffset(latest, limit)
    assert total_between(from_json_dict(latest), from_json_dict(moved)) == 2

    # a new queue of the topic and a new topic of the pattern: read from their first message
    with access_point.resource_manager() as rm:
        rm.update_topic("SparkPlanA", read_queue_nums=3, write_queue_nums=3)
    create_topic(access_point, "SparkPlanB", queues=1)
    produce(access_point, [oms.BytesMessage(f"b{i}", "SparkPlanB") for i in range(3)])
    grown = reader.latestOffset(moved, ReadAllAvailable())
    assert f"{spark_broker.name}:2" in grown["SparkPlanA"]
    assert grown["SparkPlanB"] == {f"{spark_broker.name}:0": 3}
    assert sum(r.end - r.start for r in reader.partitions(moved, grown)) == 3

    # AvailableNow: never past the snapshot taken when the trigger started
    reader.prepareForTriggerAvailableNow()
    produce(access_point, [oms.BytesMessage(f"c{i}", "SparkPlanB") for i in range(5)])
    assert reader.latestOffset(grown, ReadAllAvailable()) == grown
    reader.stop()


def test_batch_options_refuse_streaming_only_ones() -> None:
    with pytest.raises(RocketMQConnectorError, match="option 'maxOffsetsPerTrigger': is for streaming queries"):
        parse_read_options({"nameServer": "h:1", "subscribe": "t", "maxOffsetsPerTrigger": "5"}, streaming=False)
    parsed = parse_read_options({"nameServer": "h:1", "subscribe": "t"}, streaming=False)
    assert parsed.starting.default == -2, "batch reads start at earliest by default"


def test_rows_become_messages_with_every_column() -> None:
    import datetime as dt

    import pyarrow as pa
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        MapType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    from spark_connector.writer import IDEMPOTENCE_KEY, plan_columns, to_messages

    schema = StructType(
        [
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("tags", StringType()),
            StructField("keys", ArrayType(StringType())),
            StructField("properties", MapType(StringType(), StringType())),
            StructField("messageGroup", StringType()),
            StructField("deliveryTimestamp", TimestampType()),
            StructField("delayTimeLevel", IntegerType()),
            StructField("ignored", StringType()),
        ]
    )
    options = parse_write_options({"nameServer": "h:1"})
    columns = plan_columns(schema, options)
    at = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    batch = pa.RecordBatch.from_pydict(
        {
            "value": [b"\x00one", b"two"],
            "topic": ["T1", "T2"],
            "tags": ["A", None],
            "keys": [["k1", "k2"], None],
            "properties": [[("p", "1")], None],
            "messageGroup": [None, "g"],
            "deliveryTimestamp": [at, None],
            "delayTimeLevel": [None, 3],
            "ignored": ["x", "y"],
        },
        schema=pa.schema(
            [
                ("value", pa.binary()),
                ("topic", pa.string()),
                ("tags", pa.string()),
                ("keys", pa.list_(pa.string())),
                ("properties", pa.map_(pa.string(), pa.string())),
                ("messageGroup", pa.string()),
                ("deliveryTimestamp", pa.timestamp("us", tz="UTC")),
                ("delayTimeLevel", pa.int32()),
                ("ignored", pa.string()),
            ]
        ),
    )
    one, two = to_messages(batch, columns, options, "query:7:1", 40)
    assert (one.body, one.destination, one.tags, one.keys) == (b"\x00one", "T1", "A", ["k1", "k2"])
    assert one.user_headers()["p"] == "1" and one.user_headers()[IDEMPOTENCE_KEY] == "query:7:1:40"
    assert one.start_time == int(at.timestamp() * 1000)
    assert (two.destination, two.sharding_key, two.delay_level) == ("T2", "g", 3)
    assert two.user_headers()[IDEMPOTENCE_KEY] == "query:7:1:41"

    # the topic option wins over the column; a null body is refused naming the column
    pinned = parse_write_options({"nameServer": "h:1", "topic": "Pinned"})
    assert {m.destination for m in to_messages(batch, plan_columns(schema, pinned), pinned, None, 0)} == {"Pinned"}
    nulls = pa.RecordBatch.from_pydict({"value": pa.array([None], pa.binary()), "topic": ["T"]})
    two_columns = plan_columns(StructType(schema.fields[:2]), options)
    with pytest.raises(RocketMQConnectorError, match="column 'value': row 0 of the task has a null body"):
        to_messages(nulls, two_columns, options, None, 0)


def _row_properties(rows: Any, i: int) -> dict[str, str]:
    """A row's user properties as ``send_columns`` stores them: its own, then its property columns' values."""
    user = dict(rows.properties[i]) if rows.properties is not None else {}
    for name, values in (rows.property_columns or {}).items():
        if values[i] is not None:
            user[name] = values[i]
    return user


def test_columns_path_gives_the_same_messages_as_the_message_path() -> None:
    import pyarrow as pa
    from pyspark.sql.types import ArrayType, MapType, StringType, StructField, StructType

    from spark_connector.writer import IDEMPOTENCE_KEY, plan_columns, to_messages, to_rows

    schema = StructType(
        [
            StructField("body", StringType()),
            StructField("tags", StringType()),
            StructField("keys", ArrayType(StringType())),
            StructField("properties", MapType(StringType(), StringType())),
        ]
    )
    options = parse_write_options({"nameServer": "h:1", "topic": "T"})
    columns = plan_columns(schema, options)
    batch = pa.RecordBatch.from_pydict(
        {
            "body": ["é1", "two", "3"],
            "tags": ["A", None, "C"],
            "keys": [["k1", "k2"], None, []],
            "properties": [[("p", "1")], None, []],
        },
        schema=pa.schema(
            [
                ("body", pa.string()),
                ("tags", pa.string()),
                ("keys", pa.list_(pa.string())),
                ("properties", pa.map_(pa.string(), pa.string())),
            ]
        ),
    )
    for prefix in ("query:7:1", None):
        rows = to_rows(batch, columns, options, prefix, 40)
        messages = to_messages(batch, columns, options, prefix, 40)
        assert rows is not None and rows.topic == "T"
        assert rows.bodies == [m.body for m in messages] == ["é1".encode(), b"two", b"3"]
        assert rows.tags == ["A", None, "C"] and rows.keys == [["k1", "k2"], None, []]
        assert [_row_properties(rows, i) for i in range(3)] == [dict(m.user_headers()) for m in messages]
    with_keys = to_rows(batch, columns, options, "query:7:1", 40)
    assert with_keys is not None and with_keys.property_columns is not None
    assert _row_properties(with_keys, 0) == {"p": "1", IDEMPOTENCE_KEY: "query:7:1:40"}
    assert _row_properties(with_keys, 2) == {IDEMPOTENCE_KEY: "query:7:1:42"}

    nulls = pa.RecordBatch.from_pydict({"body": pa.array(["x", None], pa.string())})
    only_body = plan_columns(StructType(schema.fields[:1]), options)
    with pytest.raises(RocketMQConnectorError, match="column 'body': row 8 of the task has a null body"):
        to_rows(nulls, only_body, options, None, 7)
