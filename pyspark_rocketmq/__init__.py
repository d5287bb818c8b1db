"""Spark's auto-registration hook: Python workers import every ``pyspark_*`` module and register its
``DefaultSource``, which makes ``format("rocketmq")`` work without ``spark.dataSource.register``."""

from spark_connector.source import RocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
