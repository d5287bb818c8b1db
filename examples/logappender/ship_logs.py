"""Ship an application's logs to OrbitMQ: ``RocketMQHandler`` configured with ``logging.config.dictConfig``.

Usage: ``python examples/logappender/ship_logs.py [--addr host:port] [--topic AppLogs] [--count 20]``
(default address ``$NAMESRV_ADDR`` or 127.0.0.1:8081). Read them back with ``tail_logs.py``.
"""

from __future__ import annotations

import argparse
import logging
import logging.config
import os
import sys
import uuid


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default=os.environ.get("NAMESRV_ADDR") or "127.0.0.1:8081")
    parser.add_argument("--topic", default="AppLogs")
    parser.add_argument("--count", type=int, default=20)
    args = parser.parse_args()

    logging.config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {"console": {"format": "%(levelname)s %(name)s: %(message)s"}},
            "handlers": {
                "console": {"class": "logging.StreamHandler", "formatter": "console", "stream": "ext://sys.stderr"},
                "orbitmq": {
                    "class": "plugins.logappender.RocketMQHandler",
                    "topic": args.topic,
                    "namesrv_addr": args.addr,
                    "service": "checkout",
                    "key_fields": ["request_id"],
                    "overflow": "drop_oldest",
                    "queue_size": 10_000,
                },
            },
            "root": {"level": "INFO", "handlers": ["console", "orbitmq"]},
        }
    )
    log = logging.getLogger("shop.checkout")
    run = uuid.uuid4().hex[:8]
    for i in range(args.count):
        log.info("order %d paid", i, extra={"request_id": f"{run}-{i}", "amount": 10 + i})
    try:
        raise ValueError("card declined")
    except ValueError:
        log.exception("payment failed", extra={"request_id": f"{run}-fail"})

    handler = logging.getHandlerByName("orbitmq") if hasattr(logging, "getHandlerByName") else None
    if handler is None:
        handler = next(h for h in logging.getLogger().handlers if h.get_name() == "orbitmq")
    delivered = handler.flush(30)  # type: ignore[call-arg]
    counters = handler.counters()  # type: ignore[attr-defined]
    print(f"run {run}: shipped {counters.sent} records to {args.topic}, dropped "
          f"{counters.dropped_overflow + counters.dropped_error}", flush=True)  # fmt: skip
    if not delivered or counters.sent != args.count + 1:
        print("FAILED: not every record reached the broker", file=sys.stderr)
        return 1
    print("OK")
    return 0  # logging.shutdown at exit closes the handler within its close_timeout


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    raise SystemExit(main())
