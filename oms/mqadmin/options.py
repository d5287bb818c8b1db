"""The flags every ``mqadmin`` command takes, and the value types RocketMQ's flags use (booleans, timestamps,
``+key=value,-key`` attributes, ``key=value`` options)."""

from __future__ import annotations

import argparse
import time
from datetime import datetime

from oms.url import NAMESRV_ENV

ROCKETMQ_TIME_FORMAT = "%Y-%m-%d#%H:%M:%S:%f"  # RocketMQ's yyyy-MM-dd#HH:mm:ss:SSS
DEFAULT_TIMEOUT_MS = 10_000


def add_shared_arguments(parser: argparse.ArgumentParser, *, short_broker_addr: bool) -> None:
    """-n, --json, --timeout, --accessKey, --secretKey, then the broker address (``-b`` too where it is free)."""
    parser.add_argument("-n", "--namesrvAddr", help=f"name server host:port[;host:port] (default: ${NAMESRV_ENV})")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--timeout", type=int, default=DEFAULT_TIMEOUT_MS, metavar="MS", help="per-call timeout (default 10000)"
    )
    parser.add_argument("--accessKey", help="ACL access key")
    parser.add_argument("--secretKey", help="ACL secret key")
    if short_broker_addr:
        parser.add_argument("-b", "--brokerAddr", help="broker host:port (used directly when there is no name server)")
    else:
        parser.add_argument("--brokerAddr", help="broker host:port to talk to directly (no name server)")


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "y", "on"):
        return True
    if value in ("false", "0", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_timestamp(text: str, now_ms: int | None = None) -> int:
    """``now``, milliseconds since the epoch, RocketMQ's ``yyyy-MM-dd#HH:mm:ss:SSS`` or ISO 8601 (local time)."""
    value = text.strip()
    if value.lower() == "now":
        return int(time.time() * 1000) if now_ms is None else now_ms
    if value.isdigit():
        return int(value)
    for parse in (lambda v: datetime.strptime(v, ROCKETMQ_TIME_FORMAT), datetime.fromisoformat):
        try:
            return int(parse(value).timestamp() * 1000)
        except ValueError:
            continue
    raise argparse.ArgumentTypeError(
        f"timestamp {text!r}: use now, milliseconds since the epoch, or yyyy-MM-dd#HH:mm:ss:SSS"
    )


def parse_attributes(text: str) -> dict[str, str | None]:
    """RocketMQ's ``+key=value,-key`` topic attributes: ``+`` (or nothing) sets, ``-`` removes (value None)."""
    out: dict[str, str | None] = {}
    for item in _items(text):
        if item.startswith("-"):
            out[item[1:]] = None
        else:
            key, value = _pair(item, item.lstrip("+"), "attribute", "+key=value or -key")
            out[key] = value
    return out


def parse_options(text: str) -> dict[str, str]:
    """``key=value,key=value`` (allocation strategy options)."""
    return dict(_pair(item, item, "option", "key=value") for item in _items(text))


def _items(text: str) -> list[str]:
    return [item for item in (part.strip() for part in text.split(",")) if item]


def _pair(item: str, text: str, what: str, expected: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{what} {item!r}: expected {expected}")
    return key, value
