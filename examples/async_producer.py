"""Asynchronous send: ``send_async`` returns a future at once, a listener reports each result (AsyncProducer).

Usage: ``python examples/async_producer.py [--addr host:port]`` (default ``$NAMESRV_ADDR`` or 127.0.0.1:8081).
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable

import _common

import oms

TOPIC = "ExampleAsyncTopic"
COUNT = 10


def main(args: argparse.Namespace) -> None:
    lock = threading.Lock()
    ok: list[int] = []
    failed: list[str] = []
    done = threading.Semaphore(0)  # RocketMQ's CountDownLatch: one release per finished send

    def on_complete(index: int) -> Callable[[oms.Future[oms.SendResult]], None]:
        def listener(future: oms.Future[oms.SendResult]) -> None:
            error = future.get_throwable()
            with lock:
                if error is None:
                    ok.append(index)
                    _common.say(f"{index:<4} OK {future.get().message_id}")
                else:
                    failed.append(f"{index}: {error}")
                    _common.say(f"{index:<4} Exception {error}")
            done.release()

        return listener

    with _common.access_point(args.addr) as ap, ap.create_producer(retry_times_when_send_failed=0) as producer:
        _common.ensure_topic(ap, TOPIC)
        for i in range(COUNT):
            msg = oms.BytesMessage("Hello world", TOPIC, tags="TagA", keys=["OrderID188"])
            producer.send_async(msg).add_listener(on_complete(i))
        _common.say(f"{COUNT} sends in flight")
        for _ in range(COUNT):
            if not done.acquire(timeout=args.timeout):
                raise _common.ExampleError(f"only {len(ok) + len(failed)} of {COUNT} async sends completed")
    if failed:
        raise _common.ExampleError(f"{len(failed)} async sends failed: {failed}")
    _common.say(f"sent {len(ok)} messages asynchronously")


if __name__ == "__main__":
    _common.run(main, __doc__.splitlines()[0])
