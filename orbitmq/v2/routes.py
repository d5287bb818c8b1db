"""Turning a ``TopicRouteData`` into v2 ``MessageQueue``s and ``Assignment``s for the official clients.

Masters only (broker id 0), endpoints from the broker's gRPC address with a real AddressScheme, and the same
``Endpoints`` for the same broker every time so clients never see a spurious route change (protocol §8).
"""

from __future__ import annotations

import dataclasses
import ipaddress

from rocketmq.grpc_protocol import definition_pb2

from orbitmq.errors import MQError
from orbitmq.route import MASTER_ID, PermName, QueueData, TopicMessageType, TopicRouteData

_MIXED_TYPES = (
    definition_pb2.MessageType.NORMAL,
    definition_pb2.MessageType.FIFO,
    definition_pb2.MessageType.DELAY,
    definition_pb2.MessageType.TRANSACTION,
)
_TYPE_MAP = {
    TopicMessageType.UNSPECIFIED: (definition_pb2.MessageType.NORMAL,),
    TopicMessageType.NORMAL: (definition_pb2.MessageType.NORMAL,),
    TopicMessageType.FIFO: (definition_pb2.MessageType.FIFO,),
    TopicMessageType.DELAY: (definition_pb2.MessageType.DELAY,),
    TopicMessageType.TRANSACTION: (definition_pb2.MessageType.TRANSACTION,),
    TopicMessageType.MIXED: _MIXED_TYPES,
}
ANY_QUEUE_ID = -1


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` -> (host, port), IPv6 host possibly bracketed; BAD_REQUEST naming it otherwise."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit():
        raise MQError(definition_pb2.Code.BAD_REQUEST, f"address {address!r} is not host:port")
    return host.strip("[]"), int(port)


def address_scheme(host: str) -> int:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return int(definition_pb2.AddressScheme.DOMAIN_NAME)
    return int(definition_pb2.AddressScheme.IPv4 if ip.version == 4 else definition_pb2.AddressScheme.IPv6)


def endpoints_from_address(address: str) -> definition_pb2.Endpoints:
    """Endpoints for one ``host:port``; the scheme is never UNSPECIFIED (P17)."""
    host, port = split_address(address)
    return definition_pb2.Endpoints(
        scheme=address_scheme(host),
        addresses=[definition_pb2.Address(host=host, port=port)],
    )


def permission(perm: int) -> int:
    readable, writeable = PermName.is_readable(perm), PermName.is_writeable(perm)
    if readable and writeable:
        return int(definition_pb2.Permission.READ_WRITE)
    if readable:
        return int(definition_pb2.Permission.READ)
    if writeable:
        return int(definition_pb2.Permission.WRITE)
    return int(definition_pb2.Permission.NONE)


def accept_message_types(message_type: TopicMessageType) -> list[int]:
    return [int(t) for t in _TYPE_MAP[message_type]]


def _queue_perms(data: QueueData) -> list[int]:
    """Permission per queue id, ids matching the broker's real queue ids.

    Ids below both counts are read-write, the rest read-only or write-only (the reference proxy numbers
    them differently but ignores ids anyway).
    """
    readable, writeable = PermName.is_readable(data.perm), PermName.is_writeable(data.perm)
    reads = data.read_queue_nums if readable else 0
    writes = data.write_queue_nums if writeable else 0
    perms: list[int] = []
    for qid in range(max(data.read_queue_nums, data.write_queue_nums)):
        bits = (PermName.PERM_READ if qid < reads else 0) | (PermName.PERM_WRITE if qid < writes else 0)
        perms.append(permission(int(bits)))
    return perms


def _topic_resource(topic: str | definition_pb2.Resource) -> definition_pb2.Resource:
    if isinstance(topic, definition_pb2.Resource):
        copy = definition_pb2.Resource()
        copy.CopyFrom(topic)
        return copy
    return definition_pb2.Resource(name=topic)


def master_broker(route: TopicRouteData, broker_name: str) -> definition_pb2.Broker | None:
    data = route.broker(broker_name)
    addr = data.master_addr() if data else None
    if addr is None:
        return None
    return definition_pb2.Broker(name=broker_name, id=MASTER_ID, endpoints=endpoints_from_address(addr))


def serving_broker(route: TopicRouteData, broker_name: str) -> tuple[definition_pb2.Broker, bool] | None:
    """The broker group's master, or with the master down its lowest-id slave and True: read-only (a consumer
    keeps reading from a slave, as RocketMQ's do; producers see no writable queue there).

    Like RocketMQ 5's slaveActingMaster, that slave is shown as the group's acting master (id 0): v2 clients
    read from master brokers only."""
    master = master_broker(route, broker_name)
    if master is not None:
        return master, False
    data = route.broker(broker_name)
    if data is None or not data.broker_addrs:
        return None
    endpoints = endpoints_from_address(data.broker_addrs[min(data.broker_addrs)])
    return definition_pb2.Broker(name=broker_name, id=MASTER_ID, endpoints=endpoints), True


def _read_only(data: QueueData) -> QueueData:
    return dataclasses.replace(data, perm=int(data.perm) & ~PermName.PERM_WRITE)


def message_queues(topic: str | definition_pb2.Resource, route: TopicRouteData) -> list[definition_pb2.MessageQueue]:
    """All queues of the topic, grouped by broker name (sorted, so the answer is stable): a master's, or read-only
    a slave's when its master is down."""
    resource = _topic_resource(topic)
    queues: list[definition_pb2.MessageQueue] = []
    for data in sorted(route.queue_datas, key=lambda q: q.broker_name):
        serving = serving_broker(route, data.broker_name)
        if serving is None:
            continue  # a broker group with no live process serves no client traffic
        broker, read_only = serving
        if read_only:
            data = _read_only(data)
        accept = accept_message_types(data.message_type)
        for qid, perm in enumerate(_queue_perms(data)):
            queues.append(
                definition_pb2.MessageQueue(
                    topic=resource,
                    id=qid,
                    permission=perm,
                    broker=broker,
                    accept_message_types=accept,
                )
            )
    return queues


def route_assignments(
    topic: str | definition_pb2.Resource, route: TopicRouteData, fifo: bool
) -> list[definition_pb2.Assignment]:
    """Route-based assignments: one per readable broker (queue id -1 = any), one per read queue if FIFO."""
    resource = _topic_resource(topic)
    result: list[definition_pb2.Assignment] = []
    for data in sorted(route.queue_datas, key=lambda q: q.broker_name):
        serving = serving_broker(route, data.broker_name)
        if serving is None or not PermName.is_readable(data.perm) or data.read_queue_nums <= 0:
            continue
        broker, read_only = serving
        if read_only:
            data = _read_only(data)
        perm = permission(data.perm)
        ids = range(data.read_queue_nums) if fifo else (ANY_QUEUE_ID,)
        for qid in ids:
            mq = definition_pb2.MessageQueue(topic=resource, id=qid, permission=perm, broker=broker)
            result.append(definition_pb2.Assignment(message_queue=mq))
    return result
