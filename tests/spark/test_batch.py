"""Batch reads and writes of ``format("rocketmq")`` against a real broker process and a local SparkSession."""

from __future__ import annotations

import time
from typing import Any

import pytest

import oms
from spark_connector import IDEMPOTENCE_KEY
from tests.conftest import BrokerHandle
from tests.spark.conftest import body_set, create_topic, per_queue_in_order, produce

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(300)]


def read(spark: Any, broker: BrokerHandle, **options: str) -> Any:
    return spark.read.format("rocketmq").option("endpoints", broker.addr).options(**options).load()


@pytest.fixture(scope="module")
def known(access_point: oms.MessagingAccessPoint) -> str:
    """100 known messages on 4 queues: tag A (odd) or B (even), key k<i>, property n=<i>."""
    create_topic(access_point, "SparkKnown")
    produce(
        access_point,
        [
            oms.BytesMessage(f"m{i}", "SparkKnown", tags="A" if i % 2 else "B", keys=[f"k{i}"], user_headers={"n": i})
            for i in range(100)
        ],
    )
    return "SparkKnown"


def test_batch_read_every_message_with_its_columns(spark: Any, spark_broker: BrokerHandle, known: str) -> None:
    rows = read(spark, spark_broker, subscribe=known).collect()
    assert body_set(rows) == sorted(f"m{i}" for i in range(100))
    assert per_queue_in_order(rows)
    assert len({r["queueId"] for r in rows}) > 1, "the batches spread over several queues"
    by_body = {bytes(r["body"]).decode(): r for r in rows}
    r7 = by_body["m7"]
    assert (r7["topic"], r7["brokerName"], r7["tags"], r7["keys"]) == (known, spark_broker.name, "A", "k7")
    assert r7["msgId"] and r7["reconsumeTimes"] == 0
    assert r7["storeTimestamp"] >= r7["bornTimestamp"]
    assert "properties" not in rows[0].asDict()

    with_props = read(spark, spark_broker, subscribe=known, includeProperties="true").collect()
    assert sorted(int(r["properties"]["n"]) for r in with_props) == list(range(100))

    # split into tasks of at most 10 offsets: the same rows
    split = read(spark, spark_broker, subscribe=known, maxOffsetsPerPartition="10")
    assert split.rdd.getNumPartitions() >= 10
    assert body_set(split.collect()) == body_set(rows)
    assert read(spark, spark_broker, subscribe=known, minPartitions="8").rdd.getNumPartitions() >= 8


def test_batch_read_filters_on_the_broker(spark: Any, spark_broker: BrokerHandle, known: str) -> None:
    odd = read(spark, spark_broker, subscribe=known, subExpression="A").collect()
    assert body_set(odd) == sorted(f"m{i}" for i in range(1, 100, 2))
    assert {r["tags"] for r in odd} == {"A"}
    assert len(read(spark, spark_broker, subscribe=known, subExpression="A || B").collect()) == 100
    high = read(spark, spark_broker, subscribe=known, sql92="n >= 90").collect()
    assert body_set(high) == sorted(f"m{i}" for i in range(90, 100))


def test_batch_read_offsets_assign_and_pattern(
    spark: Any, spark_broker: BrokerHandle, known: str, access_point: oms.MessagingAccessPoint
) -> None:
    rows = read(spark, spark_broker, subscribe=known).collect()
    counts: dict[int, int] = {}
    for r in rows:
        counts[r["queueId"]] = counts.get(r["queueId"], 0) + 1
    qid = max(counts, key=lambda q: counts[q])
    assert counts[qid] >= 6
    queue = f"{spark_broker.name}:{qid}"
    ranged = read(
        spark,
        spark_broker,
        subscribe=known,
        startingOffsets=f'{{"{known}": {{"{queue}": 2}}}}',
        endingOffsets=f'{{"{known}": {{"{queue}": 5}}}}',
    ).collect()
    # the named queue from 2 to 5; every other queue from earliest (start) to latest (end)
    expected = [r for r in rows if r["queueId"] != qid or 2 <= r["queueOffset"] < 5]
    assert body_set(ranged) == body_set(expected)
    assert read(spark, spark_broker, subscribe=known, startingOffsets="latest").count() == 0
    assert read(spark, spark_broker, subscribe=known, endingOffsets=f'{{"{known}": {{"{queue}": -1}}}}').count() == 100

    assigned = read(spark, spark_broker, assign=f'{{"{known}": ["{queue}"]}}').collect()
    assert {r["queueId"] for r in assigned} == {qid} and len(assigned) == counts[qid]

    create_topic(access_point, "SparkKnownToo", queues=2)
    produce(access_point, [oms.BytesMessage(f"t{i}", "SparkKnownToo") for i in range(5)])
    both = read(spark, spark_broker, subscribePattern="SparkKnown.*").collect()
    assert {r["topic"] for r in both} == {known, "SparkKnownToo"} and len(both) == 105
    assert read(spark, spark_broker, subscribePattern="NothingMatches.*").count() == 0


def test_batch_read_by_timestamps(
    spark: Any, spark_broker: BrokerHandle, access_point: oms.MessagingAccessPoint
) -> None:
    create_topic(access_point, "SparkTimes")
    produce(access_point, [oms.BytesMessage(f"early{i}", "SparkTimes") for i in range(20)], per_batch=5)
    time.sleep(0.05)
    cut = int(time.time() * 1000)
    time.sleep(0.05)
    produce(access_point, [oms.BytesMessage(f"late{i}", "SparkTimes") for i in range(20)], per_batch=5)
    late = read(spark, spark_broker, subscribe="SparkTimes", startingTimestamp=str(cut)).collect()
    assert body_set(late) == sorted(f"late{i}" for i in range(20))
    early = read(spark, spark_broker, subscribe="SparkTimes", endingTimestamp=str(cut)).collect()
    assert body_set(early) == sorted(f"early{i}" for i in range(20))


def test_batch_read_of_an_empty_topic(
    spark: Any, spark_broker: BrokerHandle, access_point: oms.MessagingAccessPoint
) -> None:
    create_topic(access_point, "SparkEmpty")
    df = read(spark, spark_broker, subscribe="SparkEmpty")
    assert df.count() == 0
    assert df.columns[:4] == ["topic", "brokerName", "queueId", "queueOffset"]


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "SparkKnown", "startingOfsets": "earliest"}, "option 'startingOfsets': unknown read option"),
        ({"subscribe": "SparkKnown", "startingOffsets": '{"SparkKnown": {"broker-1:0": 1'}, "option 'startingOffsets'"),
        ({"subscribe": "SparkKnown", "endingOffsets": "earliest"}, "option 'endingOffsets'"),
        ({"subscribe": "SparkKnown", "assign": '{"SparkKnown": ["broker-1:0"]}'}, "option 'assign'"),
        ({"subscribe": "SparkKnown", "maxOffsetsPerTrigger": "10"}, "option 'maxOffsetsPerTrigger'"),
        ({"assign": '{"SparkKnown": ["broker-1"]}'}, "option 'assign': queue 'broker-1' is not <brokerName>:<queueId>"),
        ({"subscribe": "NoSuchTopic"}, "option 'subscribe': topic 'NoSuchTopic' does not exist"),
        ({"subscribe": "SparkKnown", "includeProperties": "yes"}, "option 'includeProperties'"),
        ({}, "option 'subscribe': one of subscribe, subscribePattern, assign is required"),
    ],
)
def test_bad_options_fail_at_query_start_naming_the_option(
    spark: Any, spark_broker: BrokerHandle, known: str, options: dict[str, str], named: str
) -> None:
    with pytest.raises(Exception, match="ROCKETMQ_") as info:
        read(spark, spark_broker, **options).collect()
    # Spark hands the source lower-cased option names
    assert named.lower() in str(info.value).lower()


def test_batch_write_every_column_and_read_back(
    spark: Any, spark_broker: BrokerHandle, access_point: oms.MessagingAccessPoint
) -> None:
    create_topic(access_point, "SparkWritten")
    create_topic(access_point, "SparkWrittenToo")
    rows = [
        (f"v{i}", "SparkWritten" if i % 2 else "SparkWrittenToo", f"T{i % 3}", [f"a{i}", f"b{i}"], {"i": str(i)})
        for i in range(200)
    ]
    df = spark.createDataFrame(
        rows, "value string, topic string, tags string, keys array<string>, properties map<string,string>"
    )
    df.repartition(2).write.format("rocketmq").option("endpoints", spark_broker.addr).option("batchSize", "16").mode(
        "append"
    ).save()
    back = read(spark, spark_broker, subscribe="SparkWritten,SparkWrittenToo", includeProperties="true").collect()
    assert body_set(back) == sorted(f"v{i}" for i in range(200))
    for r in back:
        i = int(bytes(r["body"]).decode()[1:])
        assert r["topic"] == ("SparkWritten" if i % 2 else "SparkWrittenToo")
        assert (r["tags"], r["keys"], r["properties"]["i"]) == (f"T{i % 3}", f"a{i} b{i}", str(i))
    keys = [r["properties"][IDEMPOTENCE_KEY] for r in back]
    assert len(set(keys)) == 200
    write_id, batch_id, partition, seq = keys[0].split(":")
    assert len(write_id) == 32 and batch_id == "0" and partition in ("0", "1") and seq.isdigit()

    # the option's topic wins over the column (as Kafka's); binary bodies, string keys, no idempotence keys
    create_topic(access_point, "SparkWrittenBinary")
    binary = spark.createDataFrame(
        [(bytes([i, 0, 255]), "ignored", "k1 k2") for i in range(10)], "body binary, topic string, keys string"
    )
    binary.write.format("rocketmq").option("endpoints", spark_broker.addr).option("topic", "SparkWrittenBinary").option(
        "idempotenceKeys", "false"
    ).mode("append").save()
    got = read(spark, spark_broker, subscribe="SparkWrittenBinary", includeProperties="true").collect()
    assert sorted(bytes(r["body"]) for r in got) == sorted(bytes([i, 0, 255]) for i in range(10))
    assert {r["keys"] for r in got} == {"k1 k2"} and all(IDEMPOTENCE_KEY not in r["properties"] for r in got)


def test_batch_write_message_group_and_timed_delivery(
    spark: Any, spark_broker: BrokerHandle, access_point: oms.MessagingAccessPoint
) -> None:
    with access_point.resource_manager() as rm:
        rm.create_topic("SparkFifo", read_queue_nums=4, write_queue_nums=4, message_type="FIFO")
        rm.create_topic("SparkTimed", read_queue_nums=2, write_queue_nums=2, message_type="DELAY")
    rows = [(f"g{i % 3}-{i}", f"group{i % 3}") for i in range(30)]
    spark.createDataFrame(rows, "body string, messageGroup string").coalesce(1).write.format("rocketmq").option(
        "endpoints", spark_broker.addr
    ).option("topic", "SparkFifo").mode("append").save()
    back = read(spark, spark_broker, subscribe="SparkFifo").orderBy("queueId", "queueOffset").collect()
    for g in range(3):
        mine = [r for r in back if bytes(r["body"]).decode().startswith(f"g{g}-")]
        assert len({r["queueId"] for r in mine}) == 1, "one message group, one queue"
        assert [bytes(r["body"]).decode() for r in mine] == [f"g{g}-{i}" for i in range(g, 30, 3)], "in order"

    now_ms = int(time.time() * 1000)
    timed = spark.createDataFrame(
        [("at", now_ms + 2500, None), ("level", None, 1)], "body string, deliveryTimestamp long, delayTimeLevel int"
    )
    timed.write.format("rocketmq").option("endpoints", spark_broker.addr).option("topic", "SparkTimed").mode(
        "append"
    ).save()
    assert read(spark, spark_broker, subscribe="SparkTimed").count() == 0, "nothing is due yet"
    deadline = time.monotonic() + 20
    seen: list[str] = []
    while time.monotonic() < deadline and len(seen) < 2:
        time.sleep(0.5)
        seen = body_set(read(spark, spark_broker, subscribe="SparkTimed").collect())
    assert seen == ["at", "level"]
    assert int(time.time() * 1000) >= now_ms + 2500


@pytest.mark.parametrize(
    ("schema", "options", "named"),
    [
        ("body string, value string", {"topic": "SparkWritten"}, "column 'body'"),
        ("payload string", {"topic": "SparkWritten"}, "column 'body'"),
        ("body string", {}, "option 'topic'"),
        ("body int", {"topic": "SparkWritten"}, "column 'body' must be string or binary"),
        ("body string, tags int", {"topic": "SparkWritten"}, "column 'tags' must be string"),
        ("body string", {"topic": "SparkWritten", "sendTimeoutMs": "soon"}, "option 'sendTimeoutMs'"),
        ("body string", {"topic": "SparkWritten", "linger": "5"}, "option 'linger': unknown write option"),
    ],
)
def test_bad_writes_fail_naming_the_column_or_option(
    spark: Any, spark_broker: BrokerHandle, schema: str, options: dict[str, str], named: str
) -> None:
    first = "x" if "int" not in schema.split(",")[0] else 1
    row = tuple([first] + ["y" if "string" in c else 1 for c in schema.split(",")[1:]])
    df = spark.createDataFrame([row], schema)
    with pytest.raises(Exception, match="ROCKETMQ_") as info:
        df.write.format("rocketmq").option("endpoints", spark_broker.addr).options(**options).mode("append").save()
    assert named.lower() in str(info.value).lower()


def test_overwrite_is_refused(spark: Any, spark_broker: BrokerHandle) -> None:
    df = spark.createDataFrame([("x",)], "body string")
    with pytest.raises(Exception, match="ROCKETMQ_INVALID_OPTION") as info:
        df.write.format("rocketmq").option("endpoints", spark_broker.addr).option("topic", "SparkWritten").mode(
            "overwrite"
        ).save()
    assert "append" in str(info.value)
