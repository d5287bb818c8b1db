"""``RocketMQSink``: a loguru sink (``logger.add(RocketMQSink(topic=...))``), also with ``enqueue=True``.

``write`` turns loguru's record into the appender's JSON document on the calling thread (loguru's writer thread
with ``enqueue=True``) and queues it; it never calls loguru (loguru is not re-entrant). There is deliberately no
``flush`` method: loguru would call it after every message. ``stop`` (``logger.remove``) closes with a deadline;
``drain`` waits for delivery.
"""

from __future__ import annotations

import traceback
from typing import Any

from plugins.logappender.config import AppenderConfig
from plugins.logappender.record import STD_ATTRIBUTES, Entry, RecordEncoder, batch_of, keys_of
from plugins.logappender.shipper import Counters, LogShipper, in_sender_thread

APPENDER_TYPE = "LOGURU_APPENDER"
TRACEBACK_HEAD = "Traceback (most recent call last)"
_LoguruItem = tuple[dict[str, Any], str, str, tuple[str, ...]]


class RocketMQSink:
    """A loguru sink object; every ``AppenderConfig`` field is a keyword option."""

    def __init__(self, topic: str, **options: Any) -> None:
        self.config = AppenderConfig.build(topic, **options)
        self._encoder = RecordEncoder(self.config)
        self.shipper = LogShipper(self.config, batch_of(self._encode), APPENDER_TYPE)

    def write(self, message: Any) -> None:
        if in_sender_thread():
            return
        record = message.record
        name = record["name"] or ""
        if any(name == p or name.startswith(p + ".") for p in self.config.excluded_loggers):
            return
        extra = record["extra"]
        doc: dict[str, Any] = {
            "timestamp": self._encoder.stamp(record["time"].timestamp()),
            "level": record["level"].name,
            "logger": name,
            "message": record["message"],
            "thread": record["thread"].name,
            "process": record["process"].id,
            "module": record["module"],
            "func": record["function"],
            "line": record["line"],
        }
        exc = record["exception"]
        if exc is not None:
            doc["exception"] = _exception_text(exc, str(message))
        for key, value in extra.items():
            if key not in STD_ATTRIBUTES:
                doc[key] = value
        keys = keys_of(self.config.key_fields, extra)
        self.shipper.offer((doc, record["level"].name, name, keys))

    def _encode(self, item: _LoguruItem, seq: int) -> Entry:
        doc, level, logger, keys = item
        return self._encoder.document(doc, level, logger, seq, keys)

    def counters(self) -> Counters:
        return self.shipper.counters()

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until what was written so far is sent or spooled (``flush`` would be called per message)."""
        return self.shipper.flush(timeout)

    def stop(self) -> None:
        self.shipper.close()


def _exception_text(exc: Any, formatted: str) -> str:
    if exc.traceback is not None:
        return "".join(traceback.format_exception(exc.type, exc.value, exc.traceback))
    # with enqueue=True loguru drops the traceback when it pickles the record; its formatted text still has it
    start = formatted.find(TRACEBACK_HEAD)
    if start >= 0:
        return formatted[start:].rstrip()
    if exc.type is None:
        return ""
    return "".join(traceback.format_exception_only(exc.type, exc.value)).rstrip()
