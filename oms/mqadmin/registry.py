"""Every ``mqadmin`` command, in the order ``mqadmin --help`` lists them (RocketMQ's ``MQAdminStartup.initCommand``).

A new command is a module of its own under its topic's folder, with one ``SubCommand``, added here.
"""

from __future__ import annotations

from typing import Any

from oms.mqadmin.cluster.broker_status import BrokerStatusSubCommand
from oms.mqadmin.cluster.cluster_list import ClusterListSubCommand
from oms.mqadmin.command import SubCommand
from oms.mqadmin.group.delete_sub_group import DeleteSubGroupSubCommand
from oms.mqadmin.group.group_list import GroupListSubCommand
from oms.mqadmin.group.update_sub_group import UpdateSubGroupSubCommand
from oms.mqadmin.message.consume_message import ConsumeMessageSubCommand
from oms.mqadmin.message.query_msg_by_id import QueryMsgByIdSubCommand
from oms.mqadmin.message.query_msg_by_key import QueryMsgByKeySubCommand
from oms.mqadmin.message.query_msg_by_offset import QueryMsgByOffsetSubCommand
from oms.mqadmin.message.resend_dead_letter import ResendDeadLetterSubCommand
from oms.mqadmin.message.send_message import SendMessageSubCommand
from oms.mqadmin.offset.consumer_progress import ConsumerProgressSubCommand
from oms.mqadmin.offset.reset_offset_by_time import ResetOffsetByTimeSubCommand
from oms.mqadmin.topic.delete_topic import DeleteTopicSubCommand
from oms.mqadmin.topic.topic_list import TopicListSubCommand
from oms.mqadmin.topic.topic_route import TopicRouteSubCommand
from oms.mqadmin.topic.topic_status import TopicStatusSubCommand
from oms.mqadmin.topic.update_topic import UpdateTopicSubCommand

COMMANDS: tuple[SubCommand[Any], ...] = (
    ClusterListSubCommand(),
    BrokerStatusSubCommand(),
    TopicListSubCommand(),
    UpdateTopicSubCommand(),
    DeleteTopicSubCommand(),
    TopicRouteSubCommand(),
    TopicStatusSubCommand(),
    UpdateSubGroupSubCommand(),
    DeleteSubGroupSubCommand(),
    GroupListSubCommand(),
    ConsumerProgressSubCommand(),
    ResetOffsetByTimeSubCommand(),
    QueryMsgByIdSubCommand(),
    QueryMsgByKeySubCommand(),
    QueryMsgByOffsetSubCommand(),
    ResendDeadLetterSubCommand(),
    SendMessageSubCommand(),
    ConsumeMessageSubCommand(),
)
