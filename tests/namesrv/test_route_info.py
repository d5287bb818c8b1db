"""RouteInfoManager table rules, driven by a fake clock."""

from __future__ import annotations

from namesrv.route_info import RouteInfoManager
from orbitmq.proto import namesrv_pb2 as pb
from orbitmq.route import TopicMessageType


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def reg(name: str, broker_id: int, addr: str, *topics: str, cluster: str = "c", ha: str = "") -> pb.BrokerRegistration:
    return pb.BrokerRegistration(
        cluster_name=cluster,
        broker_name=name,
        broker_id=broker_id,
        broker_addr=addr,
        ha_addr=ha,
        topic_configs=[
            pb.TopicConfigData(topic_name=t, read_queue_nums=4, write_queue_nums=4, perm=6, message_type="FIFO")
            for t in topics
        ],
    )


def test_master_owns_topics_slave_adds_address_and_learns_master() -> None:
    rim = RouteInfoManager(broker_expired_s=10, clock=Clock())
    assert rim.register_broker(reg("a", 0, "h:1", "t1", "t2", ha="h:10")).is_new
    outcome = rim.register_broker(reg("a", 1, "h:2", "other"))
    assert (outcome.master_addr, outcome.ha_server_addr) == ("h:1", "h:10")
    assert rim.topics() == ["t1", "t2"]  # the slave's table does not replace the master's
    route = rim.route("t1")
    assert route is not None
    assert route.broker_datas[0].broker_addrs == {0: "h:1", 1: "h:2"}
    assert route.queue_datas[0].message_type == TopicMessageType.FIFO
    assert not rim.register_broker(reg("a", 0, "h:1", "t2")).is_new
    assert rim.route("t1") is None and rim.route("t2") is not None
    assert rim.cluster_info().cluster_addr_table == {"c": {"a"}}


def test_expiry_and_removal_of_the_last_process_clears_routes() -> None:
    clock = Clock()
    rim = RouteInfoManager(broker_expired_s=10, clock=clock)
    rim.register_broker(reg("a", 0, "h:1", "t1"))
    rim.register_broker(reg("a", 1, "h:2"))
    clock.now += 5
    rim.touch("h:2")
    clock.now += 6
    assert [b.broker_addr for b in rim.expire()] == ["h:1"]
    route = rim.route("t1")
    assert route is not None and route.broker_datas[0].broker_addrs == {1: "h:2"}  # slave still serves reads
    clock.now += 20
    assert [b.broker_addr for b in rim.expire()] == ["h:2"]
    assert rim.route("t1") is None and rim.cluster_info().cluster_addr_table == {} and rim.topics() == []


def test_session_drop_only_removes_brokers_of_that_session() -> None:
    rim = RouteInfoManager(broker_expired_s=10, clock=Clock())
    s1, s2 = object(), object()
    rim.register_broker(reg("a", 0, "h:1", "t1"), s1)
    rim.register_broker(reg("b", 0, "h:3", "t1"), s2)
    rim.register_broker(reg("a", 0, "h:1", "t1"), s2)  # "a" reconnected on a new session
    rim.drop_session(s1)
    route = rim.route("t1")
    assert route is not None and {b.broker_name for b in route.broker_datas} == {"a", "b"}
    rim.drop_session(s2)
    assert rim.route("t1") is None


def test_unregister_needs_matching_identity_and_moved_broker_keeps_one_address() -> None:
    rim = RouteInfoManager(broker_expired_s=10, clock=Clock())
    rim.register_broker(reg("a", 0, "h:1", "t1"))
    assert not rim.unregister_broker("c", "a", 1, "h:1")
    rim.register_broker(reg("a", 0, "h:9", "t1"))  # master restarted on a new port
    route = rim.route("t1")
    assert route is not None and route.broker_datas[0].broker_addrs == {0: "h:9"}
    assert set(rim.broker_live_table) == {"h:9"}
    assert rim.unregister_broker("c", "a", 0, "h:9")
    assert rim.route("t1") is None


def test_group_policy_comes_from_live_masters_only() -> None:
    rim = RouteInfoManager(broker_expired_s=10, clock=Clock())

    def with_groups(r: pb.BrokerRegistration, *groups: pb.GroupPolicyData) -> pb.BrokerRegistration:
        r.group_policies.extend(groups)
        return r

    rim.register_broker(with_groups(reg("b", 1, "h:3", "t"), pb.GroupPolicyData(group_name="g", fifo=True)))
    assert rim.group_policy("g") is None  # a slave's table does not count
    rim.register_broker(with_groups(reg("a", 0, "h:1", "t"), pb.GroupPolicyData(group_name="g", fifo=False)))
    rim.register_broker(
        with_groups(reg("b", 0, "h:2", "t"), pb.GroupPolicyData(group_name="g", fifo=True, max_delivery_attempts=3))
    )
    policy = rim.group_policy("g")
    assert policy is not None and policy.fifo and policy.max_delivery_attempts == 17  # attempts: first master (a)
    assert rim.unregister_broker("c", "b", 0, "h:2")
    policy = rim.group_policy("g")
    assert policy is not None and not policy.fifo


def test_delete_topic_drops_routes_of_the_named_cluster_only() -> None:
    rim = RouteInfoManager(broker_expired_s=10, clock=Clock())
    rim.register_broker(reg("a", 0, "h:1", "t1", cluster="c1"))
    rim.register_broker(reg("b", 0, "h:2", "t1", cluster="c2"))
    assert rim.delete_topic("t1", "c1")
    route = rim.route("t1")
    assert route is not None and [q.broker_name for q in route.queue_datas] == ["b"]
    assert not rim.delete_topic("t1", "elsewhere")
    assert rim.delete_topic("t1") and rim.route("t1") is None and "t1" not in rim.topics()
    assert not rim.delete_topic("t1"), "nothing left to delete"
