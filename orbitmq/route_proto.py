"""Conversions between the route dataclasses (``orbitmq.route``) and the internal name server protocol.

Shared by the name server and ``broker.registration`` so both sides read and write the same fields.
"""

from __future__ import annotations

from orbitmq.limits import DEFAULT_MAX_DELIVERY_ATTEMPTS
from orbitmq.proto import namesrv_pb2 as pb
from orbitmq.route import (
    BrokerData,
    ClusterInfo,
    GroupPolicy,
    QueueData,
    TopicConfig,
    TopicMessageType,
    TopicRouteData,
)


def topic_config_to_proto(config: TopicConfig) -> pb.TopicConfigData:
    return pb.TopicConfigData(
        topic_name=config.topic_name,
        read_queue_nums=config.read_queue_nums,
        write_queue_nums=config.write_queue_nums,
        perm=int(config.perm),
        order=config.order,
        message_type=config.message_type.value,
        attributes=dict(config.attributes),
    )


def topic_config_from_proto(data: pb.TopicConfigData) -> TopicConfig:
    return TopicConfig(
        topic_name=data.topic_name,
        read_queue_nums=data.read_queue_nums,
        write_queue_nums=data.write_queue_nums,
        perm=data.perm,
        order=data.order,
        message_type=TopicMessageType.parse(data.message_type),
        attributes=dict(data.attributes),
    )


def group_policy_to_proto(policy: GroupPolicy) -> pb.GroupPolicyData:
    return pb.GroupPolicyData(
        group_name=policy.group_name, fifo=policy.fifo, max_delivery_attempts=policy.max_delivery_attempts
    )


def group_policy_from_proto(data: pb.GroupPolicyData) -> GroupPolicy:
    return GroupPolicy(data.group_name, data.fifo, data.max_delivery_attempts or DEFAULT_MAX_DELIVERY_ATTEMPTS)


def queue_data_to_proto(data: QueueData) -> pb.QueueDataProto:
    return pb.QueueDataProto(
        broker_name=data.broker_name,
        read_queue_nums=data.read_queue_nums,
        write_queue_nums=data.write_queue_nums,
        perm=data.perm,
        message_type=data.message_type.value,
    )


def queue_data_from_proto(data: pb.QueueDataProto) -> QueueData:
    return QueueData(
        broker_name=data.broker_name,
        read_queue_nums=data.read_queue_nums,
        write_queue_nums=data.write_queue_nums,
        perm=data.perm,
        message_type=TopicMessageType.parse(data.message_type),
    )


def broker_data_to_proto(data: BrokerData) -> pb.BrokerDataProto:
    return pb.BrokerDataProto(cluster=data.cluster, broker_name=data.broker_name, broker_addrs=dict(data.broker_addrs))


def broker_data_from_proto(data: pb.BrokerDataProto) -> BrokerData:
    return BrokerData(
        cluster=data.cluster,
        broker_name=data.broker_name,
        broker_addrs={int(k): v for k, v in data.broker_addrs.items()},
    )


def route_from_proto(resp: pb.GetRouteInfoResponse) -> TopicRouteData:
    return TopicRouteData(
        queue_datas=[queue_data_from_proto(q) for q in resp.queue_datas],
        broker_datas=[broker_data_from_proto(b) for b in resp.broker_datas],
    )


def cluster_info_from_proto(resp: pb.GetClusterInfoResponse) -> ClusterInfo:
    return ClusterInfo(
        broker_addr_table={k: broker_data_from_proto(v) for k, v in resp.broker_addr_table.items()},
        cluster_addr_table={k: set(v.broker_names) for k, v in resp.cluster_addr_table.items()},
    )
