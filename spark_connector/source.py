"""``RocketMQDataSource``: ``spark.read/readStream/write/writeStream.format("rocketmq")``.

Spark builds it on the driver from the user's options; readers and writers it returns are pickled to executors, so
they hold only parsed options (no connections).
"""

from __future__ import annotations

import uuid

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from spark_connector.errors import ConnectorErrorCode, RocketMQConnectorError
from spark_connector.options import parse_read_options, parse_write_options
from spark_connector.reader import RocketMQBatchReader, RocketMQStreamReader
from spark_connector.schema import check_schema, source_schema
from spark_connector.writer import RocketMQStreamWriter, RocketMQWriter, plan_columns

FORMAT = "rocketmq"


class RocketMQDataSource(DataSource):
    """OrbitMQ (and RocketMQ 5) topics as Spark tables and streams; see docs/spark.md."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        # checked here already, so a bad option fails at load(), before any query runs
        return source_schema(parse_read_options(self.options, streaming=None).include_properties)

    def reader(self, schema: StructType) -> RocketMQBatchReader:
        options = parse_read_options(self.options, streaming=False)
        check_schema(schema, options.include_properties)
        return RocketMQBatchReader(options, schema)

    def streamReader(self, schema: StructType) -> RocketMQStreamReader:
        options = parse_read_options(self.options, streaming=True)
        check_schema(schema, options.include_properties)
        return RocketMQStreamReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> RocketMQWriter:
        if overwrite:
            raise RocketMQConnectorError(
                ConnectorErrorCode.INVALID_OPTION,
                "mode 'overwrite': a topic is append-only; use mode('append')",
                "mode",
            )
        options = parse_write_options(self.options)
        return RocketMQWriter(options, plan_columns(schema, options), uuid.uuid4().hex)

    def streamWriter(self, schema: StructType, overwrite: bool) -> RocketMQStreamWriter:
        # complete output mode (overwrite) re-sends the whole result each batch, as Kafka's sink does
        options = parse_write_options(self.options)
        return RocketMQStreamWriter(options, plan_columns(schema, options), uuid.uuid4().hex)
