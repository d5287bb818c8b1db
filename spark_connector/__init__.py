"""PySpark Python Data Source for OrbitMQ: ``format("rocketmq")`` for batch and streaming reads and writes.

``spark.dataSource.register(RocketMQDataSource)``, or nothing at all when the top-level ``pyspark_rocketmq`` module
is importable by Spark's Python workers (Spark registers ``pyspark_*`` modules' ``DefaultSource`` itself).
"""

from __future__ import annotations

from spark_connector.errors import ConnectorErrorCode, RocketMQConnectorError
from spark_connector.source import FORMAT, RocketMQDataSource
from spark_connector.writer import IDEMPOTENCE_KEY

__all__ = ["FORMAT", "IDEMPOTENCE_KEY", "ConnectorErrorCode", "RocketMQConnectorError", "RocketMQDataSource"]
