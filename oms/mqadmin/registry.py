"""Every ``mqadmin`` command, in the order ``mqadmin --help`` lists them (RocketMQ's ``MQAdminStartup.initCommand``).

A new command is a module of its own under its topic's folder, with one ``SubCommand``, added here.
"""

from __future__ import annotations

from typing import Any

from oms.mqadmin.broker.broker_consume_stats import BrokerConsumeStatsSubCommand
from oms.mqadmin.broker.get_broker_config import GetBrokerConfigSubCommand
from oms.mqadmin.broker.send_msg_status import SendMsgStatusSubCommand
from oms.mqadmin.broker.stats_all import StatsAllSubCommand
from oms.mqadmin.broker.update_broker_config import UpdateBrokerConfigSubCommand
from oms.mqadmin.cluster.broker_status import BrokerStatusSubCommand
from oms.mqadmin.cluster.cluster_list import ClusterListSubCommand
from oms.mqadmin.cluster.cluster_rt import ClusterRTSubCommand
from oms.mqadmin.command import SubCommand
from oms.mqadmin.group.consumer_connection import ConsumerConnectionSubCommand
from oms.mqadmin.group.consumer_status import ConsumerStatusSubCommand
from oms.mqadmin.group.delete_sub_group import DeleteSubGroupSubCommand
from oms.mqadmin.group.group_list import GroupListSubCommand
from oms.mqadmin.group.producer_connection import ProducerConnectionSubCommand
from oms.mqadmin.group.update_sub_group import UpdateSubGroupSubCommand
from oms.mqadmin.ha.get_broker_epoch import GetBrokerEpochSubCommand
from oms.mqadmin.ha.get_sync_state_set import GetSyncStateSetSubCommand
from oms.mqadmin.ha.ha_status import HAStatusSubCommand
from oms.mqadmin.message.check_msg_send_rt import CheckMsgSendRTSubCommand
from oms.mqadmin.message.consume_message import ConsumeMessageSubCommand
from oms.mqadmin.message.print_msg import PrintMsgSubCommand
from oms.mqadmin.message.print_msg_by_queue import PrintMsgByQueueSubCommand
from oms.mqadmin.message.query_msg_by_id import QueryMsgByIdSubCommand
from oms.mqadmin.message.query_msg_by_key import QueryMsgByKeySubCommand
from oms.mqadmin.message.query_msg_by_offset import QueryMsgByOffsetSubCommand
from oms.mqadmin.message.query_msg_by_unique_key import QueryMsgByUniqueKeySubCommand
from oms.mqadmin.message.resend_dead_letter import ResendDeadLetterSubCommand
from oms.mqadmin.message.send_message import SendMessageSubCommand
from oms.mqadmin.namesrv.add_write_perm import AddWritePermSubCommand
from oms.mqadmin.namesrv.delete_kv_config import DeleteKvConfigSubCommand
from oms.mqadmin.namesrv.get_namesrv_config import GetNamesrvConfigSubCommand
from oms.mqadmin.namesrv.update_kv_config import UpdateKvConfigSubCommand
from oms.mqadmin.namesrv.update_namesrv_config import UpdateNamesrvConfigSubCommand
from oms.mqadmin.namesrv.wipe_write_perm import WipeWritePermSubCommand
from oms.mqadmin.offset.clone_group_offset import CloneGroupOffsetSubCommand
from oms.mqadmin.offset.consumer_progress import ConsumerProgressSubCommand
from oms.mqadmin.offset.reset_offset_by_time import ResetOffsetByTimeSubCommand
from oms.mqadmin.offset.skip_accumulated_message import SkipAccumulatedMessageSubCommand
from oms.mqadmin.topic.allocate_mq import AllocateMQSubCommand
from oms.mqadmin.topic.delete_topic import DeleteTopicSubCommand
from oms.mqadmin.topic.topic_cluster_list import TopicClusterListSubCommand
from oms.mqadmin.topic.topic_list import TopicListSubCommand
from oms.mqadmin.topic.topic_route import TopicRouteSubCommand
from oms.mqadmin.topic.topic_status import TopicStatusSubCommand
from oms.mqadmin.topic.update_topic import UpdateTopicSubCommand
from oms.mqadmin.topic.update_topic_perm import UpdateTopicPermSubCommand

COMMANDS: tuple[SubCommand[Any], ...] = (
    UpdateTopicSubCommand(),
    DeleteTopicSubCommand(),
    UpdateSubGroupSubCommand(),
    DeleteSubGroupSubCommand(),
    UpdateBrokerConfigSubCommand(),
    UpdateTopicPermSubCommand(),
    TopicRouteSubCommand(),
    TopicStatusSubCommand(),
    TopicClusterListSubCommand(),
    BrokerStatusSubCommand(),
    QueryMsgByIdSubCommand(),
    QueryMsgByKeySubCommand(),
    QueryMsgByUniqueKeySubCommand(),
    QueryMsgByOffsetSubCommand(),
    PrintMsgSubCommand(),
    PrintMsgByQueueSubCommand(),
    SendMsgStatusSubCommand(),
    BrokerConsumeStatsSubCommand(),
    ProducerConnectionSubCommand(),
    ConsumerConnectionSubCommand(),
    ConsumerProgressSubCommand(),
    ConsumerStatusSubCommand(),
    CloneGroupOffsetSubCommand(),
    ClusterListSubCommand(),
    TopicListSubCommand(),
    UpdateKvConfigSubCommand(),
    DeleteKvConfigSubCommand(),
    WipeWritePermSubCommand(),
    AddWritePermSubCommand(),
    ResetOffsetByTimeSubCommand(),
    StatsAllSubCommand(),
    SkipAccumulatedMessageSubCommand(),
    AllocateMQSubCommand(),
    CheckMsgSendRTSubCommand(),
    ClusterRTSubCommand(),
    GetNamesrvConfigSubCommand(),
    UpdateNamesrvConfigSubCommand(),
    GetBrokerConfigSubCommand(),
    HAStatusSubCommand(),
    GetSyncStateSetSubCommand(),
    GetBrokerEpochSubCommand(),
    SendMessageSubCommand(),
    ConsumeMessageSubCommand(),
    GroupListSubCommand(),
    ResendDeadLetterSubCommand(),
)
