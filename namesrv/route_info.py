"""RouteInfoManager: broker registrations, expiry and topic routes, all in memory (no disk state).

Mirrors RocketMQ's RouteInfoManager tables: topic -> queue data, broker name -> addresses, cluster -> names.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from orbitmq.proto import namesrv_pb2 as pb
from orbitmq.route import (
    MASTER_ID,
    READ_WRITE,
    BrokerData,
    ClusterInfo,
    GroupPolicy,
    PermName,
    QueueData,
    TopicMessageType,
    TopicRouteData,
)
from orbitmq.route_proto import group_policy_from_proto, topic_config_from_proto
from orbitmq.topics import AUTO_CREATE_TOPIC_KEY_TOPIC


@dataclass
class BrokerLiveInfo:
    """One registered broker process (keyed by its gRPC address)."""

    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_addr: str
    last_update: float
    data_version: int
    auto_create_topic_enable: bool = False
    default_topic_queue_nums: int = 4
    session: object | None = None  # the BrokerSession stream that registered it last, if any
    group_policies: dict[str, GroupPolicy] = field(default_factory=dict)
    remoting_addr: str = ""  # where 4.x clients reach it (remotingListenPort), empty without a remoting listener


@dataclass
class RegisterOutcome:
    is_new: bool
    master_addr: str = ""
    ha_server_addr: str = ""


@dataclass
class RouteInfoManager:
    """Route tables of one name server. Single-threaded: call from the server's event loop only."""

    broker_expired_s: float
    clock: Callable[[], float] = time.monotonic
    topic_queue_table: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    broker_live_table: dict[str, BrokerLiveInfo] = field(default_factory=dict)
    # broker names whose queues routes show read-only (wipeWritePerm), whatever their registrations say
    write_wiped: set[str] = field(default_factory=set)

    # -- registration -------------------------------------------------------------------------------------------

    def register_broker(self, reg: pb.BrokerRegistration, session: object | None = None) -> RegisterOutcome:
        now = self.clock()
        addr = reg.broker_addr
        self.cluster_addr_table.setdefault(reg.cluster_name, set()).add(reg.broker_name)
        broker = self.broker_addr_table.get(reg.broker_name)
        if broker is None:
            broker = self.broker_addr_table[reg.broker_name] = BrokerData(reg.cluster_name, reg.broker_name)
        broker.cluster = reg.cluster_name
        # a broker id moved to a new address (or an address reused by another id): keep one entry per id
        for other_id, other_addr in list(broker.broker_addrs.items()):
            if other_addr == addr and other_id != reg.broker_id:
                del broker.broker_addrs[other_id]
        old_addr = broker.broker_addrs.get(reg.broker_id)
        if old_addr is not None and old_addr != addr:
            self.broker_live_table.pop(old_addr, None)
        broker.broker_addrs[reg.broker_id] = addr

        previous = self.broker_live_table.get(addr)
        is_new = previous is None
        self.broker_live_table[addr] = BrokerLiveInfo(
            cluster=reg.cluster_name,
            broker_name=reg.broker_name,
            broker_id=reg.broker_id,
            broker_addr=addr,
            ha_addr=reg.ha_addr,
            last_update=now,
            data_version=reg.data_version,
            auto_create_topic_enable=reg.auto_create_topic_enable,
            default_topic_queue_nums=reg.default_topic_queue_nums or 4,
            session=session,
            group_policies={g.group_name: group_policy_from_proto(g) for g in reg.group_policies},
            remoting_addr=reg.remoting_addr,
        )
        # the master owns the topic table of its group (RocketMQ: slaves only add themselves to the route)
        if reg.broker_id == MASTER_ID or not self._has_queue_data(reg.broker_name):
            self._replace_topics(reg)

        outcome = RegisterOutcome(is_new=is_new)
        master = broker.broker_addrs.get(MASTER_ID)
        if master is not None:
            outcome.master_addr = master
            live_master = self.broker_live_table.get(master)
            outcome.ha_server_addr = live_master.ha_addr if live_master else ""
        return outcome

    def _has_queue_data(self, broker_name: str) -> bool:
        return any(broker_name in queues for queues in self.topic_queue_table.values())

    def _replace_topics(self, reg: pb.BrokerRegistration) -> None:
        names = set()
        for data in reg.topic_configs:
            config = topic_config_from_proto(data)
            names.add(config.topic_name)
            self.topic_queue_table.setdefault(config.topic_name, {})[reg.broker_name] = QueueData(
                broker_name=reg.broker_name,
                read_queue_nums=config.read_queue_nums,
                write_queue_nums=config.write_queue_nums,
                perm=config.perm,
                message_type=config.message_type,
            )
        for topic in list(self.topic_queue_table):
            if topic not in names:
                self._remove_topic_queues(topic, reg.broker_name)

    def _remove_topic_queues(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return
        queues.pop(broker_name, None)
        if not queues:
            del self.topic_queue_table[topic]

    def delete_topic(self, topic: str, cluster: str = "") -> bool:
        """Drop a topic's routes (of ``cluster``'s brokers only, when named), as RocketMQ's deleteTopic; a broker
        that still has the topic lists it again at its next registration. False when there was no route."""
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            return False
        names = list(queues) if not cluster else [n for n in queues if n in self.cluster_addr_table.get(cluster, set())]
        for name in names:
            self._remove_topic_queues(topic, name)
        return bool(names)

    def touch(self, broker_addr: str) -> None:
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            live.last_update = self.clock()

    def unregister_broker(self, cluster: str, broker_name: str, broker_id: int, broker_addr: str) -> bool:
        live = self.broker_live_table.get(broker_addr)
        if live is None or live.broker_name != broker_name or live.broker_id != broker_id:
            return False
        self._remove(live)
        return True

    def drop_session(self, session: object) -> list[BrokerLiveInfo]:
        """The stream ``session`` closed: drop the brokers it registered last."""
        dead = [live for live in self.broker_live_table.values() if live.session is session]
        for live in dead:
            self._remove(live)
        return dead

    def expire(self, now: float | None = None) -> list[BrokerLiveInfo]:
        """Drop brokers silent for ``broker_expired_s``; returns them (for logging)."""
        now = self.clock() if now is None else now
        dead = [live for live in self.broker_live_table.values() if now - live.last_update > self.broker_expired_s]
        for live in dead:
            self._remove(live)
        return dead

    def _remove(self, live: BrokerLiveInfo) -> None:
        self.broker_live_table.pop(live.broker_addr, None)
        broker = self.broker_addr_table.get(live.broker_name)
        if broker is None:
            return
        if broker.broker_addrs.get(live.broker_id) == live.broker_addr:
            del broker.broker_addrs[live.broker_id]
        if broker.broker_addrs:
            return
        # last process of the group is gone: its queues leave every route
        del self.broker_addr_table[live.broker_name]
        names = self.cluster_addr_table.get(broker.cluster)
        if names is not None:
            names.discard(live.broker_name)
            if not names:
                del self.cluster_addr_table[broker.cluster]
        for topic in list(self.topic_queue_table):
            self._remove_topic_queues(topic, live.broker_name)

    # -- queries ------------------------------------------------------------------------------------------------

    def route(self, topic: str) -> TopicRouteData | None:
        queues = self.topic_queue_table.get(topic)
        if not queues:
            return None
        route = TopicRouteData()
        for name in sorted(queues):
            broker = self.broker_addr_table.get(name)
            if broker is None:
                continue
            queue = queues[name]
            if name in self.write_wiped:
                queue = dataclasses.replace(queue, perm=int(queue.perm) & ~PermName.PERM_WRITE)
            route.queue_datas.append(queue)
            route.broker_datas.append(BrokerData(broker.cluster, broker.broker_name, dict(broker.broker_addrs)))
        return route if route.queue_datas else None

    def auto_create_route(self, topic: str) -> TopicRouteData | None:
        """For a topic no broker has yet: the default queues of every master that auto-creates topics.

        Like RocketMQ's TBW102 fallback; the queue shape comes from the broker's registered TBW102 config.
        """
        route = TopicRouteData()
        template = self.topic_queue_table.get(AUTO_CREATE_TOPIC_KEY_TOPIC, {})
        for live in sorted(self.broker_live_table.values(), key=lambda b: b.broker_name):
            if live.broker_id != MASTER_ID or not live.auto_create_topic_enable or live.broker_name in self.write_wiped:
                continue
            broker = self.broker_addr_table.get(live.broker_name)
            if broker is None:
                continue
            tbw = template.get(live.broker_name)
            nums = live.default_topic_queue_nums
            route.queue_datas.append(
                QueueData(
                    broker_name=live.broker_name,
                    read_queue_nums=tbw.read_queue_nums if tbw else nums,
                    write_queue_nums=tbw.write_queue_nums if tbw else nums,
                    perm=READ_WRITE,
                    message_type=tbw.message_type if tbw else TopicMessageType.MIXED,
                )
            )
            route.broker_datas.append(BrokerData(broker.cluster, broker.broker_name, dict(broker.broker_addrs)))
        return route if route.queue_datas else None

    def set_write_perm(self, broker_name: str, writable: bool) -> int:
        """wipeWritePerm (``writable`` False) / addWritePerm: the number of topics whose route this changes.

        The mark outlives the broker's re-registrations, so producers stay away until addWritePerm (or a restart of
        this name server); the broker's own topic permissions are untouched."""
        if broker_name not in self.broker_addr_table:
            raise KeyError(broker_name)
        if writable:
            self.write_wiped.discard(broker_name)
        else:
            self.write_wiped.add(broker_name)
        return sum(
            1
            for queues in self.topic_queue_table.values()
            if broker_name in queues and queues[broker_name].perm & PermName.PERM_WRITE
        )

    def group_policy(self, group: str) -> GroupPolicy | None:
        """A group's consume settings as the live masters report them (FIFO if any master says so)."""
        found = [
            live.group_policies[group]
            for live in sorted(self.broker_live_table.values(), key=lambda b: b.broker_name)
            if live.broker_id == MASTER_ID and group in live.group_policies
        ]
        if not found:
            return None
        return GroupPolicy(group, any(p.fifo for p in found), found[0].max_delivery_attempts)

    def cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            broker_addr_table={
                name: BrokerData(b.cluster, b.broker_name, dict(b.broker_addrs))
                for name, b in self.broker_addr_table.items()
            },
            cluster_addr_table={name: set(names) for name, names in self.cluster_addr_table.items()},
        )

    def topics(self) -> list[str]:
        return sorted(self.topic_queue_table)

    def topics_of_cluster(self, cluster: str) -> list[str]:
        """Topics with queues on a broker of ``cluster`` (RocketMQ's getTopicsByCluster; none for an unknown one)."""
        names = self.cluster_addr_table.get(cluster, set())
        return sorted(t for t, queues in self.topic_queue_table.items() if names & queues.keys())
