"""The executor side without Spark: ``read_range`` against a real broker, with several pulls in flight and several
pulls per record batch, including the cases where the planned pull offsets turn out wrong (a broker-side filter
skips, the range starts inside a pull, a queue's offsets were truncated)."""

from __future__ import annotations

import pytest

import oms
from spark_connector.errors import ConnectorErrorCode, RocketMQConnectorError
from spark_connector.options import MAX_PULLS_IN_FLIGHT, parse_read_options
from spark_connector.reader import QueueRange, read_range
from spark_connector.schema import source_schema
from tests.conftest import BrokerHandle
from tests.spark.conftest import create_topic, produce

TOPIC = "SparkReadRange"
ROWS = 300
pytestmark = pytest.mark.integration  # the spark_broker fixture starts a broker process


@pytest.fixture(scope="module")
def one_queue(spark_broker: BrokerHandle, access_point: oms.MessagingAccessPoint) -> str:
    create_topic(access_point, TOPIC, queues=1)
    produce(
        access_point,
        [oms.BytesMessage(f"r{i}", TOPIC, tags="A" if i % 3 == 0 else "B") for i in range(ROWS)],
        per_batch=50,
    )
    return TOPIC


def _read(spark_broker: BrokerHandle, start: int, end: int, **extra: str) -> list[list[int]]:
    """Each record batch's queue offsets (bodies checked against them)."""
    options = parse_read_options({"endpoints": spark_broker.addr, "subscribe": TOPIC, **extra}, streaming=False)
    part = QueueRange(TOPIC, spark_broker.name, 0, start, end)
    batches = []
    for batch in read_range(options, source_schema(False), part):
        offsets = batch.column("queueOffset").to_pylist()
        bodies = [bytes(b).decode() for b in batch.column("body").to_pylist()]
        assert bodies == [f"r{o}" for o in offsets], "each row's body is the one stored at its offset"
        batches.append(offsets)
    return batches


@pytest.mark.parametrize(("in_flight", "rows_per_batch"), [(1, 1), (4, 25), (MAX_PULLS_IN_FLIGHT, 1000)])
def test_every_row_once_in_order_with_pulls_in_flight_and_batches_of_several_pulls(
    spark_broker: BrokerHandle, one_queue: str, in_flight: int, rows_per_batch: int
) -> None:
    opts = {"pullBatchSize": "7", "pullsInFlight": str(in_flight), "recordBatchSize": str(rows_per_batch)}
    batches = _read(spark_broker, 5, 290, **opts)
    assert [o for b in batches for o in b] == list(range(5, 290))
    # a batch is handed over once it holds recordBatchSize rows: whole pulls of 7, only the last one shorter
    want = -(-rows_per_batch // 7) * 7
    assert [len(b) for b in batches[:-1]] == [want] * (len(batches) - 1)
    assert 0 < len(batches[-1]) <= want


def test_a_broker_side_filter_with_pulls_in_flight(spark_broker: BrokerHandle, one_queue: str) -> None:
    # the filter skips offsets, so pulls end where the plan did not expect them to: each row still comes once
    batches = _read(spark_broker, 0, ROWS, subExpression="A", pullBatchSize="10", pullsInFlight="4")
    assert [o for b in batches for o in b] == list(range(0, ROWS, 3))


def test_a_range_past_the_queue_end_is_data_loss(spark_broker: BrokerHandle, one_queue: str) -> None:
    with pytest.raises(RocketMQConnectorError) as err:
        _read(spark_broker, ROWS - 20, ROWS + 20, pullsInFlight="4", pullTimeoutMs="200", pullBatchSize="8")
    assert err.value.code is ConnectorErrorCode.DATA_LOSS
    rows = _read(
        spark_broker, ROWS - 20, ROWS + 20, pullsInFlight="4", pullTimeoutMs="200", pullBatchSize="8",
        failOnDataLoss="false",
    )  # fmt: skip
    assert [o for b in rows for o in b] == list(range(ROWS - 20, ROWS)), "what exists is read before the loss"


@pytest.mark.parametrize("properties", ["false", "true"])
def test_both_decodings_hand_over_the_same_record_batches(
    spark_broker: BrokerHandle, one_queue: str, properties: str
) -> None:
    def batches(decoding: str, **extra: str) -> list[object]:
        options = parse_read_options(
            {"endpoints": spark_broker.addr, "subscribe": TOPIC, "pullDecoding": decoding, "pullBatchSize": "16",
             "recordBatchSize": "40", "includeProperties": properties, **extra},
            streaming=False,
        )  # fmt: skip
        part = QueueRange(TOPIC, spark_broker.name, 0, 3, 250)
        return list(read_range(options, source_schema(properties == "true"), part))

    arrow, columns = batches("arrow"), batches("columns")
    assert len(arrow) == len(columns) > 1 and all(a.equals(c) for a, c in zip(arrow, columns, strict=True))
    assert sum(b.num_rows for b in arrow) == 247
    tagged = batches("ARROW", subExpression="A")
    assert tagged and all(a.equals(c) for a, c in zip(tagged, batches("columns", subExpression="A"), strict=True))


def test_read_tuning_options_are_checked() -> None:
    for name, value in (
        ("pullsInFlight", "0"),
        ("pullsInFlight", str(MAX_PULLS_IN_FLIGHT + 1)),
        ("recordBatchSize", "x"),
        ("pullDecoding", "fast"),
    ):
        with pytest.raises(RocketMQConnectorError, match=f"option '{name}'"):
            parse_read_options({"endpoints": "127.0.0.1:1", "subscribe": "t", name: value}, streaming=False)
