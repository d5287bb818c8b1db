"""``RocketMQHandler``: a stdlib ``logging.Handler`` shipping records to a topic through a ``LogShipper``.

``emit`` queues the record; the JSON body is built on the sender thread. A record's message must say what its
arguments were at the call, so ``prepare`` renders it (and a traceback) on the logging thread unless every argument
is of an immutable type: then the sender renders it, later but identically (about 1 us less per call here). The
usual record (a plain LogRecord, a str message with immutable arguments, no traceback, stack or extra fields) is
queued as a compact tuple of its fields and arguments (``record.compact_record``) and the LogRecord dies at once,
as with ``NullHandler``: queued LogRecords cost the garbage collector more than the encoding. With a formatter set
(for example structlog's ``ProcessorFormatter``) the formatter's output is the body, formatted on the logging
thread.
"""

from __future__ import annotations

import decimal
import logging
import uuid
from typing import Any

from plugins.logappender.config import AppenderConfig
from plugins.logappender.record import (
    N_PLAIN_ATTRIBUTES,
    Formatted,
    RecordEncoder,
    compact_fields,
    compact_record,
)
from plugins.logappender.shipper import Counters, LogShipper, sender_state

APPENDER_TYPE = "PYTHON_LOGGING_APPENDER"
# Arguments of these exact types cannot change after the call (subclasses could define a mutable __str__)
_LOG_RECORD = logging.LogRecord  # subclasses (a record factory's) may render their message otherwise
IMMUTABLE_ARG_TYPES = frozenset({str, int, float, bool, type(None), bytes, complex, decimal.Decimal, uuid.UUID})


def prepare(record: logging.LogRecord) -> logging.LogRecord:
    """What the logging thread must do before the record is queued (``QueueHandler.prepare``'s job): render what
    could change after the call. The message is left to the sender when ``msg`` is a str and every argument is
    immutable; the traceback is always rendered here (frames change as the stack unwinds)."""
    args = record.args
    if type(record.msg) is not str or (args and (type(args) is not tuple or not _immutable(args))):
        record.message = record.getMessage()
    if record.exc_info and not record.exc_text:
        record.exc_text = logging.Formatter().formatException(record.exc_info)
    return record


def compact(record: logging.LogRecord) -> tuple[Any, ...] | None:
    """The record as a compact tuple (``record.compact_record``) when that holds all its body needs: a plain
    LogRecord with a str message whose arguments are immutable, no traceback, stack or extra fields (a message or
    asctime set by another handler's formatter is allowed: the sender renders the same message). None otherwise."""
    attrs = record.__dict__
    n = len(attrs)
    args = attrs["args"]
    if (
        type(record) is _LOG_RECORD  # a subclass may render its message otherwise (getMessage)
        and type(attrs["msg"]) is str
        and not attrs["exc_info"]
        and not attrs["exc_text"]
        and not attrs["stack_info"]
        and (n == N_PLAIN_ATTRIBUTES or n - N_PLAIN_ATTRIBUTES == ("message" in attrs) + ("asctime" in attrs))
        and (not args or (type(args) is tuple and _immutable(args)))
    ):
        return compact_record(attrs, args or ())
    return None


def _immutable(args: tuple[object, ...]) -> bool:
    for arg in args:  # noqa: SIM110 - a loop costs half of all(<generator>) for the usual one or two arguments
        if type(arg) not in IMMUTABLE_ARG_TYPES:
            return False
    return True


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
        self._offer = self.shipper.offer  # the shipper lives as long as the handler (a fork resets it in place)
        self._compact = self._encoder.takes_compact

    def _is_excluded(self, name: str) -> bool:
        excluded = self._excluded.get(name)
        if excluded is None:
            excluded = any(name == p or name.startswith(p + ".") for p in self.config.excluded_loggers)
            self._excluded[name] = excluded
        return excluded

    def handle(self, record: logging.LogRecord) -> logging.LogRecord | bool:  # type: ignore[override]
        """``Handler.handle`` without the handler lock: ``emit`` only appends to the shipper's thread-safe queue,
        and the lock costs every logging call (3.12+: a filter may return a replacement record)."""
        if not self.filters:
            self.emit(record)
            return True
        rv = self.filter(record)
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
            if self.formatter is None and self._compact:
                # compact()'s usual case inline (one call less per record): a plain record, no or one argument
                attrs = record.__dict__
                args = attrs["args"]
                if (
                    len(attrs) == N_PLAIN_ATTRIBUTES
                    and type(record) is _LOG_RECORD
                    and type(attrs["msg"]) is str
                    and not attrs["exc_info"]
                    and not attrs["exc_text"]
                    and not attrs["stack_info"]
                    and type(args) is tuple
                    and (not args or (len(args) == 1 and type(args[0]) in IMMUTABLE_ARG_TYPES))
                ):
                    self._offer(compact_fields(attrs) + args)
                    return
            self._offer(self.queue_item(record))
        except RecursionError:  # as logging.StreamHandler does
            raise
        except Exception:
            self.handleError(record)

    def queue_item(self, record: logging.LogRecord) -> object:
        """What ``emit`` queues for ``record`` (the sender encodes it): its formatter's output, a compact record, or
        the record itself after ``prepare``."""
        if self.formatter is not None:
            return Formatted(record, self.format(record))
        if self._compact:
            item = compact(record)
            if item is not None:
                return item
        return prepare(record)

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
