"""Tail the logs an application shipped to OrbitMQ: read the topic with an ``oms`` pull consumer and print each
record (a message holds one record, or several JSON lines when the appender packed a backlog).

Usage: ``python examples/logappender/tail_logs.py [--addr host:port] [--topic AppLogs] [--count N] [--follow]``.
``mqadmin consumeMessage -t AppLogs`` shows the raw messages too.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> int:
    import oms
    from plugins.logappender import iter_records

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", default=os.environ.get("NAMESRV_ADDR") or "127.0.0.1:8081")
    parser.add_argument("--topic", default="AppLogs")
    parser.add_argument("--count", type=int, default=0, help="stop after this many records (0: what is stored)")
    parser.add_argument("--follow", action="store_true", help="keep waiting for new records")
    parser.add_argument("--timeout", type=float, default=30.0, help="give up waiting for --count after this")
    args = parser.parse_args()

    seen = 0
    deadline = time.monotonic() + args.timeout
    with (
        oms.get_messaging_access_point(f"oms:rocketmq://{args.addr}/") as ap,
        ap.create_pull_consumer(consumer_id="log-tail") as consumer,
    ):
        offsets = {q: 0 for q in consumer.queues(args.topic)}
        while True:
            got = 0
            for queue, offset in offsets.items():
                result = consumer.pull(queue, offset, 256, timeout=0.2 if args.follow else 0.0)
                for message in result.messages:
                    for rec in iter_records(message.get_body(), message.user_headers().get("records")):
                        got += 1
                        keys = ",".join(message.keys or [])
                        print(f"{rec.get('timestamp', '')} {message.tags:<8} {rec.get('logger', '')}: "
                              f"{rec.get('message', rec)} [keys={keys}]", flush=True)  # fmt: skip
                        if "exception" in rec:
                            print("    " + rec["exception"].splitlines()[-1], flush=True)
                offsets[queue] = result.next_offset
            seen += got
            if args.count and seen >= args.count:
                break
            if not args.follow and not args.count and got == 0:
                break
            if not args.follow and time.monotonic() > deadline:
                print(f"FAILED: {seen} records, expected {args.count}", file=sys.stderr)
                return 1
            if got == 0:
                time.sleep(0.2)
    print(f"tailed {seen} records")
    print("OK")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    raise SystemExit(main())
