"""v2 MessageQueue building from a TopicRouteData: masters (a slave read-only when its master is down), schemes,
permissions, message types."""

from __future__ import annotations

import pytest
from rocketmq.grpc_protocol import definition_pb2 as d

from orbitmq.errors import MQError
from orbitmq.route import BrokerData, PermName, QueueData, TopicMessageType, TopicRouteData
from orbitmq.v2.routes import endpoints_from_address, message_queues, route_assignments


def route(*brokers: tuple[str, dict[int, str], int, int, int, TopicMessageType]) -> TopicRouteData:
    r = TopicRouteData()
    for name, addrs, reads, writes, perm, mtype in brokers:
        r.queue_datas.append(QueueData(name, reads, writes, perm, mtype))
        r.broker_datas.append(BrokerData("DefaultCluster", name, addrs))
    return r


RW = int(PermName.PERM_READ | PermName.PERM_WRITE)


def test_endpoints_scheme_per_host_kind() -> None:
    v4 = endpoints_from_address("127.0.0.1:8081")
    assert v4.scheme == d.AddressScheme.IPv4
    assert [(a.host, a.port) for a in v4.addresses] == [("127.0.0.1", 8081)]
    assert endpoints_from_address("broker-a.local:9000").scheme == d.AddressScheme.DOMAIN_NAME
    v6 = endpoints_from_address("[::1]:8081")
    assert v6.scheme == d.AddressScheme.IPv6 and v6.addresses[0].host == "::1"
    with pytest.raises(MQError) as exc:
        endpoints_from_address("nohostport")
    assert exc.value.code == d.Code.BAD_REQUEST


def test_masters_only_rw_queues_with_accept_types() -> None:
    r = route(
        ("b", {0: "127.0.0.1:2", 1: "127.0.0.1:3"}, 2, 2, RW, TopicMessageType.FIFO),
        ("a", {0: "127.0.0.1:1"}, 4, 4, RW, TopicMessageType.NORMAL),
        ("c", {2: "127.0.0.1:5", 1: "127.0.0.1:4"}, 4, 4, RW, TopicMessageType.NORMAL),  # no master: read-only
    )
    queues = message_queues(d.Resource(name="t", resource_namespace="ns"), r)
    slave_queues = [q for q in queues if q.broker.name == "c"]
    # the lowest-id slave, shown as the acting master (v2 clients read from id 0 only)
    assert [(q.id, q.broker.id, q.permission) for q in slave_queues] == [(i, 0, d.Permission.READ) for i in range(4)]
    assert slave_queues[0].broker.endpoints.addresses[0].port == 4
    queues = [q for q in queues if q.broker.name != "c"]
    assert [(q.broker.name, q.id) for q in queues] == [("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0), ("b", 1)]
    for q in queues:
        assert q.broker.id == 0
        assert q.permission == d.Permission.READ_WRITE
        assert q.topic.name == "t" and q.topic.resource_namespace == "ns"
        assert q.broker.endpoints.scheme == d.AddressScheme.IPv4
    assert list(queues[0].accept_message_types) == [d.MessageType.NORMAL]
    assert list(queues[-1].accept_message_types) == [d.MessageType.FIFO]
    assert queues[-1].broker.endpoints.addresses[0].port == 2


def test_mixed_accepts_four_types_and_unequal_counts_give_read_or_write_only_queues() -> None:
    r = route(("a", {0: "h:1"}, 4, 2, RW, TopicMessageType.MIXED))
    queues = message_queues("t", r)
    assert set(queues[0].accept_message_types) == {
        d.MessageType.NORMAL,
        d.MessageType.FIFO,
        d.MessageType.DELAY,
        d.MessageType.TRANSACTION,
    }
    assert [q.permission for q in queues] == [d.Permission.READ_WRITE] * 2 + [d.Permission.READ] * 2
    write_only = message_queues("t", route(("a", {0: "h:1"}, 4, 4, int(PermName.PERM_WRITE), TopicMessageType.NORMAL)))
    assert {q.permission for q in write_only} == {d.Permission.WRITE}


def test_same_broker_gives_identical_endpoints_every_time() -> None:
    r = route(("a", {0: "127.0.0.1:1"}, 2, 2, RW, TopicMessageType.NORMAL))
    first = message_queues("t", r)[0].broker.endpoints.SerializeToString(deterministic=True)
    again = message_queues("t", r)[1].broker.endpoints.SerializeToString(deterministic=True)
    assert first == again


def test_assignments_read_from_a_slave_when_the_master_is_down() -> None:
    r = route(("a", {1: "127.0.0.1:3"}, 2, 2, RW, TopicMessageType.NORMAL))
    [only] = route_assignments("t", r, fifo=False)
    assert only.message_queue.permission == d.Permission.READ
    assert only.message_queue.broker.endpoints.addresses[0].port == 3
    assert message_queues("t", route(("a", {}, 2, 2, RW, TopicMessageType.NORMAL))) == []


def test_assignments_any_queue_per_broker_or_per_queue_for_fifo() -> None:
    r = route(
        ("a", {0: "127.0.0.1:1"}, 3, 3, RW, TopicMessageType.NORMAL),
        ("b", {0: "127.0.0.1:2"}, 2, 2, int(PermName.PERM_WRITE), TopicMessageType.NORMAL),
    )
    plain = route_assignments("t", r, fifo=False)
    assert [(a.message_queue.broker.name, a.message_queue.id) for a in plain] == [("a", -1)]
    assert plain[0].message_queue.broker.endpoints.addresses[0].port == 1
    fifo = route_assignments("t", r, fifo=True)
    assert [a.message_queue.id for a in fifo] == [0, 1, 2]
