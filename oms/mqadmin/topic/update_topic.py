"""``updateTopic``: create a topic, or change the given fields of an existing one, on a cluster or one broker."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.options import parse_attributes, parse_bool
from oms.mqadmin.output import table


class UpdateTopicSubCommand(SubCommand[list[m.TopicInfo]]):
    name = "updateTopic"
    help = "Create or update a topic on a cluster or one broker."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)
        parser.add_argument("-c", "--clusterName", help="every master broker of this cluster")
        parser.add_argument("-r", "--readQueueNums", type=int, help="default 8 for a new topic")
        parser.add_argument("-w", "--writeQueueNums", type=int, help="default 8 for a new topic")
        parser.add_argument("-p", "--perm", type=int, help="2 write, 4 read, 6 read-write (default 6)")
        parser.add_argument("-o", "--order", type=parse_bool, help="true/false")
        parser.add_argument(
            "-a",
            "--attributes",
            help="+message.type=FIFO,+queue.type=BatchCQ,+key=value,-key (use --attributes=-key); queue.type "
            "(SimpleCQ/BatchCQ) is fixed once the topic exists",
        )

    def execute(self, args: argparse.Namespace, admin: Admin) -> list[m.TopicInfo]:
        return admin.resources.update_topic(
            args.topic,
            read_queue_nums=args.readQueueNums,
            write_queue_nums=args.writeQueueNums,
            perm=args.perm,
            order=args.order,
            attributes=parse_attributes(args.attributes) if args.attributes else None,
            cluster=args.clusterName,
            broker=args.brokerAddr,
            create=True,  # RocketMQ's updateTopic creates or updates
        )

    def render(self, result: list[m.TopicInfo], args: argparse.Namespace, out: TextIO) -> None:
        for info in result:
            out.write(f"create topic to {info.broker_name} success.\n")
        rows = [
            (
                i.topic,
                i.broker_name,
                i.read_queue_nums,
                i.write_queue_nums,
                i.perm_string,
                i.message_type,
                ",".join(f"{k}={v}" for k, v in sorted(i.attributes.items())) or "-",
            )
            for i in result
        ]
        headers = ["Topic", "Broker Name", "Read Queues", "Write Queues", "Perm", "Message Type", "Attributes"]
        table(headers, rows, out)
