"""``sendMessage``: one message with an ``oms`` producer, optionally pinned to a broker and/or queue."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from oms.errors import OMSRuntimeException
from oms.message import BytesMessage
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.message.views import where
from oms.mqadmin.output import table
from oms.producer.result import SendResult
from oms.queue import ANY_QUEUE, MessageQueue
from orbitmq.errors import Code


class SendMessageSubCommand(SubCommand[SendResult]):
    name = "sendMessage"
    help = "Send one message (optionally to one broker and/or queue)."
    short_broker_addr = False  # -b is the broker name

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)
        parser.add_argument("-p", "--body", required=True, help="message body (UTF-8)")
        parser.add_argument("-k", "--keys", help="message keys, comma-separated")
        parser.add_argument("-c", "--tags")
        parser.add_argument("-b", "--brokerName", help="send to this broker")
        parser.add_argument("-i", "--queueId", type=int, help="send to this queue id")

    def execute(self, args: argparse.Namespace, admin: Admin) -> SendResult:
        keys = args.keys.split(",") if args.keys else None
        message = BytesMessage(args.body, args.topic, tags=args.tags, keys=keys)
        selector = None
        if args.brokerName is not None or args.queueId is not None:
            # a selector send: the chosen queue on any topic type (RocketMQ 4's partition order on NORMAL topics)
            selector = queue_selector(args.topic, args.brokerName, args.queueId)
        with admin.access_point.create_producer(operation_timeout=args.timeout) as producer:
            return producer.send(message, selector=selector)

    def render(self, result: SendResult, args: argparse.Namespace, out: TextIO) -> None:
        queue_id = "-" if result.queue.queue_id == ANY_QUEUE else str(result.queue.queue_id)
        table(
            ["Broker Name", "QID", "Queue Offset", "MsgId", "Send Result"],
            [(result.queue.broker_name, queue_id, result.queue_offset, result.message_id, result.status.value)],
            out,
        )


def queue_selector(
    topic: str, broker: str | None, queue_id: int | None
) -> Callable[[Sequence[MessageQueue], BytesMessage, Any], MessageQueue]:
    """The producer's queue selector for ``-b``/``-i``: the first writable queue matching both."""

    def select(queues: Sequence[MessageQueue], _message: BytesMessage, _arg: Any) -> MessageQueue:
        matching = [
            q
            for q in queues
            if (broker is None or q.broker_name == broker) and (queue_id is None or q.queue_id == queue_id)
        ]
        if not matching:
            raise OMSRuntimeException(
                Code.BAD_REQUEST,
                f"no writable queue {where(broker, queue_id)} of topic {topic!r}; writable: "
                + ", ".join(f"{q.broker_name}:{q.queue_id}" for q in sorted(queues)),
            )
        return matching[0]

    return select
