"""``RocketMQHandler``: a stdlib ``logging.Handler`` shipping records to a topic through a ``LogShipper``.

``emit`` renders the message (and a traceback) on the logging thread, because arguments and tracebacks change
after the call, and queues the record; the JSON body is built on the sender thread. With a formatter set (for
example structlog's ``ProcessorFormatter``) the formatter's output is the body, formatted on the logging thread.
"""

from __future__ import annotations

import logging
from typing import Any

from plugins.logappender.config import AppenderConfig
from plugins.logappender.record import RecordEncoder
from plugins.logappender.shipper import Counters, LogShipper, sender_state

APPENDER_TYPE = "PYTHON_LOGGING_APPENDER"


class RocketMQHandler(logging.Handler):
    """Ship records to ``topic``. Every ``AppenderConfig`` field is a keyword option, so dictConfig can build it::

    "rmq": {"class": "plugins.logappender.RocketMQHandler", "topic": "app-logs",
            "namesrv_addr": "127.0.0.1:9876", "overflow": "drop_oldest", "spool_dir": "/var/spool/app-logs"}
    """

    def __init__(self, topic: str, level: int | str = logging.NOTSET, **options: Any) -> None:
        self.config = AppenderConfig.build(topic, **options)  # before registering with logging: may raise
        super().__init__(level)
        self._encoder = RecordEncoder(self.config)
        self._excluded: dict[str, bool] = {}
        self.shipper = LogShipper(self.config, self._encoder.encode_batch, APPENDER_TYPE)

    def _is_excluded(self, name: str) -> bool:
        excluded = self._excluded.get(name)
        if excluded is None:
            excluded = any(name == p or name.startswith(p + ".") for p in self.config.excluded_loggers)
            self._excluded[name] = excluded
        return excluded

    def handle(self, record: logging.LogRecord) -> logging.LogRecord | bool:  # type: ignore[override]
        """``Handler.handle`` without the handler lock: ``emit`` only appends to the shipper's thread-safe queue,
        and the lock costs every logging call (3.12+: a filter may return a replacement record)."""
        rv = self.filter(record) if self.filters else True
        if isinstance(rv, logging.LogRecord):
            record = rv
        if rv:
            self.emit(record)
        return rv

    def emit(self, record: logging.LogRecord) -> None:
        excluded = self._excluded.get(record.name)
        if excluded is None:
            excluded = self._is_excluded(record.name)
        if excluded or sender_state.active:
            return  # the client's own records, or records caused by sending: shipping them would loop
        try:
            if self.formatter is not None:
                self.shipper.offer((record, self.format(record)))
                return
            record.message = record.getMessage()
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            self.shipper.offer(record)
        except RecursionError:  # as logging.StreamHandler does
            raise
        except Exception:
            self.handleError(record)

    def counters(self) -> Counters:
        return self.shipper.counters()

    def flush(self, timeout: float | None = None) -> bool:  # type: ignore[override]
        """Wait (at most ``timeout``, default ``flush_timeout``) until queued records were sent or spooled."""
        return self.shipper.flush(timeout)

    def close(self, timeout: float | None = None) -> None:
        """Flush and stop the sender within ``timeout`` (default ``close_timeout``); idempotent."""
        try:
            self.shipper.close(timeout)
        finally:
            super().close()

    def __repr__(self) -> str:
        return f"<RocketMQHandler topic={self.config.topic} ({logging.getLevelName(self.level)})>"
