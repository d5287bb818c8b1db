"""structlog as a logger factory: ``structlog.configure(logger_factory=RocketMQLoggerFactory(topic=...))``.

The last processor may render a string (``JSONRenderer``: shipped as it is) or leave the event dict (shipped as
the appender's JSON document, with keys from it). The other way, structlog through the stdlib and
``ProcessorFormatter`` on a ``RocketMQHandler``, needs nothing from this module.
"""

from __future__ import annotations

import json
import time
from typing import Any

from plugins.logappender.config import AppenderConfig
from plugins.logappender.record import Entry, RecordEncoder, batch_of, clean_tag, keys_of
from plugins.logappender.shipper import Counters, LogShipper, in_sender_thread

APPENDER_TYPE = "STRUCTLOG_APPENDER"
LEVEL_OF_METHOD = {
    "debug": "DEBUG",
    "info": "INFO",
    "msg": "INFO",
    "log": "INFO",
    "warn": "WARNING",
    "warning": "WARNING",
    "err": "ERROR",
    "error": "ERROR",
    "exception": "ERROR",
    "failure": "ERROR",
    "critical": "CRITICAL",
    "fatal": "CRITICAL",
}
_Item = tuple[str, str, "str | bytes | dict[str, Any]", float]


class RocketMQLoggerFactory:
    """Makes ``RocketMQLogger``s that share one shipper; every ``AppenderConfig`` field is a keyword option."""

    def __init__(self, topic: str, **options: Any) -> None:
        self.config = AppenderConfig.build(topic, **options)
        self._encoder = RecordEncoder(self.config)
        self.shipper = LogShipper(self.config, batch_of(self._encode), APPENDER_TYPE)

    def __call__(self, *args: Any) -> RocketMQLogger:
        name = str(args[0]) if args and args[0] is not None else ""
        return RocketMQLogger(self, name)

    def _encode(self, item: _Item, seq: int) -> Entry:
        level, logger, event, created = item
        cfg = self.config
        if isinstance(event, dict):
            doc = dict(event)
            doc.setdefault("timestamp", self._encoder.stamp(created))
            doc.setdefault("level", level.lower())
            doc.setdefault("logger", logger)
            if "event" in doc:
                doc["message"] = doc.pop("event")
            return self._encoder.document(doc, level, logger, seq, keys_of(cfg.key_fields, event))
        body = event.encode("utf-8") if isinstance(event, str) else bytes(event)
        keys: tuple[str, ...] = ()
        if cfg.key_fields and body[:1] == b"{":
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict):
                keys = keys_of(cfg.key_fields, parsed)
        return Entry(cfg.tag or clean_tag(level), logger, keys, body, seq)

    def counters(self) -> Counters:
        return self.shipper.counters()

    def flush(self, timeout: float | None = None) -> bool:
        return self.shipper.flush(timeout)

    def close(self, timeout: float | None = None) -> bool:
        return self.shipper.close(timeout)


class RocketMQLogger:
    """The wrapped logger structlog calls with the rendered event (a str) or, without renderer, the event dict."""

    def __init__(self, factory: RocketMQLoggerFactory, name: str) -> None:
        self._factory = factory
        self.name = name

    def _ship(self, level: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if in_sender_thread():
            return
        event: str | bytes | dict[str, Any]
        if kwargs:
            event = kwargs
            level = str(kwargs.get("level") or level).upper()
        elif args and isinstance(args[0], str | bytes):
            event = args[0]
        else:
            event = " ".join(str(a) for a in args)
        self._factory.shipper.offer((level, self.name, event, time.time()))

    def __getattr__(self, method: str) -> Any:
        level = LEVEL_OF_METHOD.get(method)
        if level is None:
            raise AttributeError(method)

        def log(*args: Any, **kwargs: Any) -> None:
            self._ship(level, args, kwargs)

        return log

    def __repr__(self) -> str:
        return f"<RocketMQLogger {self.name!r} topic={self._factory.config.topic}>"
