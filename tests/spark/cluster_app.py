"""A Spark application on ``local-cluster``: executors in JVMs of their own (as on a real cluster), each with its
own Python workers, none sharing a process with the driver. Writes rows to a topic, reads them back batch and
streaming, and prints a JSON summary on its last line.

``python -m tests.spark.cluster_app <endpoints> <topic> <rows> <workdir>``
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession

from tests.spark.conftest import SPARK_CONF

# two executors of one core each, in their own JVMs: the smallest layout where no task runs beside the driver
MASTER = "local-cluster[2,1,1024]"


def main(endpoints: str, topic: str, rows: int, workdir: str) -> None:
    builder = SparkSession.builder.master(MASTER).appName("orbitmq-cluster")
    for key, value in {**SPARK_CONF, "spark.executor.memory": "512m"}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        source = spark.range(rows, numPartitions=4).selectExpr("CONCAT('c', CAST(id AS STRING)) AS body")
        source.write.format("rocketmq").option("endpoints", endpoints).option("topic", topic).mode("append").save()
        batch = (
            spark.read.format("rocketmq")
            .option("endpoints", endpoints)
            .option("subscribe", topic)
            .option("maxOffsetsPerPartition", str(max(1, rows // 8)))  # ranges split over several tasks
            .load()
            .selectExpr("CAST(body AS STRING) AS body")
            .collect()
        )
        out, checkpoint = os.path.join(workdir, "out"), os.path.join(workdir, "checkpoint")
        stream = (
            spark.readStream.format("rocketmq")
            .option("endpoints", endpoints)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("maxOffsetsPerTrigger", str(max(1, rows // 3)))
            .load()
        )
        query = (
            stream.selectExpr("CAST(body AS STRING) AS body", "queueId", "queueOffset")
            .writeStream.format("parquet")
            .option("path", out)
            .option("checkpointLocation", checkpoint)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(240)
        streamed = spark.read.parquet(out).collect()
        summary = {
            "master": spark.sparkContext.master,
            "executors": spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1,  # minus the driver
            "batch_bodies": sorted(r["body"] for r in batch),
            "stream_bodies": sorted(r["body"] for r in streamed),
            "stream_batches": len(os.listdir(os.path.join(checkpoint, "commits"))),
        }
    finally:
        spark.stop()
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
