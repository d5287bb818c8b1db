"""Shared plumbing of the oms examples: the ``--addr`` flag, the access point URL, a run id and typed topics.

Every example imports it as ``_common`` (Python puts the script's directory on ``sys.path``).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
import uuid
from collections.abc import Callable

import oms

DEFAULT_ADDR = "127.0.0.1:8081"


_OUTPUT_LOCK = threading.Lock()


def say(*parts: object) -> None:
    """Print one line atomically: listener threads and the main thread never interleave inside a line."""
    line = " ".join(str(p) for p in parts) + "\n"
    with _OUTPUT_LOCK:
        sys.stdout.write(line)
        sys.stdout.flush()


class ExampleError(Exception):
    """The example did not see what it expected; ``run`` prints the message and exits 1."""


def parse_args(description: str, timeout: float = 30.0) -> argparse.Namespace:
    """``--addr`` (else ``NAMESRV_ADDR``, else 127.0.0.1:8081) and ``--timeout`` (seconds for the whole run)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--addr",
        default=os.environ.get("NAMESRV_ADDR") or DEFAULT_ADDR,
        help="name server or broker host:port[;host:port] (default: $NAMESRV_ADDR or %(default)s)",
    )
    parser.add_argument("--timeout", type=float, default=timeout, help="seconds to wait (default: %(default)s)")
    return parser.parse_args()


def access_point(addr: str) -> oms.MessagingAccessPoint:
    """A started access point for ``host:port[;host:port]``."""
    return oms.get_messaging_access_point(f"oms:rocketmq://{addr}/").startup()


def run_id() -> str:
    """A short id that tells this run's messages from those of earlier runs on the same topic."""
    return uuid.uuid4().hex[:8]


def ensure_topic(ap: oms.MessagingAccessPoint, topic: str, message_type: str = "NORMAL", queues: int = 4) -> None:
    """Create (or update) ``topic`` on every master with the given message type (RocketMQ's createOrUpdate)."""
    ap.resource_manager().create_topic(
        topic, read_queue_nums=queues, write_queue_nums=queues, message_type=message_type
    )


def ensure_group(ap: oms.MessagingAccessPoint, group: str, *, orderly: bool = False) -> None:
    """Create (or update) the consumer group on every master; ``orderly`` makes it a FIFO group."""
    ap.resource_manager().create_group(group, orderly=orderly)


def wait_for(condition: Callable[[], bool], timeout: float, what: str, event: threading.Event | None = None) -> None:
    """Poll ``condition`` until it holds, or raise ``ExampleError`` naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise ExampleError(f"timed out after {timeout:.0f}s waiting for {what}")
        if event is not None:
            event.wait(0.05)
            event.clear()
        else:
            time.sleep(0.05)


def run(main: Callable[[argparse.Namespace], None], description: str, timeout: float = 30.0) -> None:
    """Parse the flags, run ``main`` and exit: 0 on success, 1 with a message on stderr on any failure."""
    args = parse_args(description, timeout)
    try:
        main(args)
    except ExampleError as exc:
        print(f"FAILED: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)
    except oms.OMSException as exc:
        print(f"FAILED: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        sys.exit(1)
    say("OK")
    sys.exit(0)
