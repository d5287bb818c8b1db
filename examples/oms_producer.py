"""OpenMessaging SimpleProducer: one access point, one producer, a sync, an async and a one-way send.

Usage: ``python examples/oms_producer.py [--addr host:port]`` (default ``$NAMESRV_ADDR`` or 127.0.0.1:8081).
"""

from __future__ import annotations

import argparse
import threading

import _common

import oms

TOPIC = "OMS_HELLO_TOPIC"


def main(args: argparse.Namespace) -> None:
    with _common.access_point(args.addr) as ap, ap.create_producer() as producer:
        _common.say(f"access point {ap!r} (oms {ap.impl_version()})")
        _common.ensure_topic(ap, TOPIC)
        rm = ap.resource_manager()
        before = rm.topic_status(TOPIC).total_messages

        result = producer.send(oms.BytesMessage("OMS_HELLO_BODY", TOPIC))
        _common.say(f"send sync message OK, msgId: {result.message_id}")

        future = producer.send_async(oms.BytesMessage("OMS_HELLO_BODY", TOPIC))
        reported = threading.Event()

        def on_sent(f: oms.Future[oms.SendResult]) -> None:
            _common.say(f"send async message OK, msgId: {f.get().message_id}")
            reported.set()

        future.add_listener(on_sent)
        future.get(timeout=args.timeout)
        reported.wait(args.timeout)  # the listener runs on a producer callback thread

        producer.send_oneway(oms.BytesMessage("OMS_HELLO_BODY", TOPIC))
        _common.say("send oneway message OK")
        # a one-way send returns before the request goes out: wait until the broker has it before shutting down
        _common.wait_for(
            lambda: rm.topic_status(TOPIC).total_messages - before >= 3, args.timeout, "the three messages stored"
        )
        _common.say("broker stored the sync, async and one-way messages")


if __name__ == "__main__":
    _common.run(main, __doc__.splitlines()[0])
