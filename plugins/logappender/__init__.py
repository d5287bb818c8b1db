"""Log appender: Python applications ship their logs to an OrbitMQ topic (stdlib ``logging``, loguru, structlog).

``RocketMQHandler`` (a ``logging.Handler``), ``RocketMQSink`` (loguru) and ``RocketMQLoggerFactory`` (structlog)
share one core, ``LogShipper``: a bounded queue, a batching sender thread on the ``oms`` client, an optional disk
spool. ``iter_records`` reads the records back out of a message body. See docs/logappender.md.
"""

from plugins.logappender.config import AppenderConfig, AppenderConfigError, OverflowPolicy
from plugins.logappender.handler import RocketMQHandler
from plugins.logappender.loguru_sink import RocketMQSink
from plugins.logappender.record import iter_records
from plugins.logappender.shipper import Counters, LogShipper, close_all
from plugins.logappender.structlog_factory import RocketMQLogger, RocketMQLoggerFactory

__all__ = [
    "AppenderConfig",
    "AppenderConfigError",
    "Counters",
    "LogShipper",
    "OverflowPolicy",
    "RocketMQHandler",
    "RocketMQLogger",
    "RocketMQLoggerFactory",
    "RocketMQSink",
    "close_all",
    "iter_records",
]
