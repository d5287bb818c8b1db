"""Transactional messages: the local transaction answers "unknown", the broker's check-back decides later.

Usage: ``python examples/transaction.py [--addr host:port] [--timeout 60]``. The broker asks after
``transactionTimeOut`` (6 s by default), then every ``transactionCheckInterval``.
"""

from __future__ import annotations

import argparse
import threading
import time

import _common

import oms

TOPIC = "ExampleTransactionTopic"
GROUP = "ExampleTransactionGroup"
COUNT = 4  # even indexes are committed by the check-back, odd ones rolled back
QUIET = 2.0  # seconds to keep listening once the committed messages came, so a rolled-back one would show


def main(args: argparse.Namespace) -> None:
    run = _common.run_id()
    lock = threading.Lock()
    checked: dict[int, str] = {}
    received: list[int] = []
    arrived = threading.Event()
    started = time.monotonic()

    def index_of(message: oms.BytesMessage) -> int | None:
        tag, _, index = message.get_body(str).partition(":")
        return int(index) if tag == run else None

    def execute(message: oms.BytesMessage, context: oms.TransactionContext) -> str:
        _common.say(f"local transaction of {message.get_body(str)!r}: unknown")
        return "unknown"  # undecided: the broker will ask the producer later

    def check(message: oms.BytesMessage, context: oms.TransactionContext) -> str:
        index = index_of(message)
        if index is None:
            return "rollback"  # a half message left over from an earlier run
        decision = "commit" if index % 2 == 0 else "rollback"
        with lock:
            _common.say(f"check-back of {message.get_body(str)!r} after {time.monotonic() - started:.1f}s: {decision}")
            checked.setdefault(index, decision)
        arrived.set()
        return decision

    def on_message(message: oms.BytesMessage, context: oms.ConsumeContext) -> oms.ConsumeConcurrentlyStatus:
        index = index_of(message)
        with lock:
            _common.say(f"received {message.get_body(str)!r} transaction_id={message.transaction_id}")
            if index is not None:
                received.append(index)
        arrived.set()
        return oms.ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    with _common.access_point(args.addr) as ap:
        _common.ensure_topic(ap, TOPIC, "TRANSACTION")
        with (
            ap.create_push_consumer(consumer_id=GROUP, consume_from_where="first") as consumer,
            ap.create_producer(transaction_checker=check) as producer,
        ):
            consumer.attach_queue(TOPIC, on_message)
            for i in range(COUNT):
                result = producer.send(oms.BytesMessage(f"{run}:{i}", TOPIC, tags="TagA"), execute)
                _common.say(
                    f"sent half message {i}: transaction_id={result.transaction_id}"
                    f" resolution={result.transaction_resolution}"
                )
            commits = {i for i in range(COUNT) if i % 2 == 0}
            _common.say(
                "waiting for the broker's check-backs: it asks about a half message once it is older than "
                "transactionTimeOut (6 s by default), on its next check round (every transactionCheckInterval, "
                "30 s by default; a broker.conf with transactionCheckInterval=1000 answers in seconds)"
            )
            _common.wait_for(
                lambda: len(checked) >= COUNT and commits <= set(received),
                args.timeout,
                "the check-backs and the committed messages",
                arrived,
            )
            time.sleep(QUIET)
    for i in range(COUNT):
        _common.say(f"message {i}: unknown, then {checked[i]} by check-back")
    if sorted(received) != sorted(commits):
        raise _common.ExampleError(f"received {sorted(received)}, expected only the committed {sorted(commits)}")
    _common.say(f"received only the committed messages {sorted(received)}")


if __name__ == "__main__":
    _common.run(main, __doc__.splitlines()[0], timeout=60.0)
