"""A Spark driver in its own process for the SIGKILL test: streams a topic into Parquet until it is killed.

``python -m tests.spark.stream_driver <endpoints> <topic> <checkpoint> <output>``
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession

from tests.spark.conftest import SPARK_CONF


def main(endpoints: str, topic: str, checkpoint: str, output: str) -> None:
    builder = SparkSession.builder.master("local[2]").appName("orbitmq-killed-driver")
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    stream = (
        spark.readStream.format("rocketmq")
        .option("endpoints", endpoints)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "20")
        .load()
    )
    query = (
        stream.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="1 second")
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main(*sys.argv[1:5])
