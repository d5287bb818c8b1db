"""``topicStatus``: min/max offset and last store time of every queue of a topic."""

from __future__ import annotations

import argparse
from typing import TextIO

from oms.admin import models as m
from oms.mqadmin.command import Admin, SubCommand
from oms.mqadmin.output import human_time, table


class TopicStatusSubCommand(SubCommand[m.TopicStatus]):
    name = "topicStatus"
    help = "Show min/max offsets and last update time of every queue."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("-t", "--topic", required=True)

    def execute(self, args: argparse.Namespace, admin: Admin) -> m.TopicStatus:
        return admin.resources.topic_status(args.topic)

    def render(self, result: m.TopicStatus, args: argparse.Namespace, out: TextIO) -> None:
        rows = [
            (q.broker_name, q.queue_id, q.min_offset, q.max_offset, human_time(q.last_update_timestamp_ms))
            for q in result.queues
        ]
        table(["Broker Name", "QID", "Min Offset", "Max Offset", "Last Updated"], rows, out)
