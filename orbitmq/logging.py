"""structlog setup for the servers: key-value lines on a console, JSON lines in production.

Call ``configure_logging`` once from a CLI ``main``; library code only calls ``get_logger``.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import structlog
from structlog.typing import FilteringBoundLogger


def configure_logging(json: bool = False, level: str = "INFO") -> None:
    """Route structlog (and stdlib logging) to stderr at ``level``; JSON when ``json`` is true."""
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    logging.basicConfig(stream=sys.stderr, level=numeric, format="%(name)s %(levelname)s %(message)s")
    renderer: Any = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str, **bound: Any) -> FilteringBoundLogger:
    """A structlog logger carrying ``logger_name=name`` and any extra bound key-values.

    Lazy: module-level loggers pick up ``configure_logging`` even when it runs after the import.
    """
    logger: FilteringBoundLogger = structlog.get_logger(name, logger_name=name, **bound)
    return logger
