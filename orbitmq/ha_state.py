"""Failover state kept in etcd (controller mode), shared by the controller (in mqnamesrv) and the brokers: one
key per broker group (master, epoch, SyncStateSet, epoch history), one leased key per live replica, the election.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

PREFIX = "/orbitmq/ha"
CONTROLLER_KEY = f"{PREFIX}/controller".encode()


def groups_prefix() -> bytes:
    return f"{PREFIX}/groups/".encode()


def state_key(cluster: str, broker_name: str) -> bytes:
    return f"{PREFIX}/groups/{cluster}/{broker_name}/state".encode()


def replicas_prefix(cluster: str, broker_name: str) -> bytes:
    return f"{PREFIX}/groups/{cluster}/{broker_name}/replicas/".encode()


def replica_key(cluster: str, broker_name: str, broker_id: int) -> bytes:
    return replicas_prefix(cluster, broker_name) + f"{broker_id:08d}".encode()


def parse_endpoints(controller_addr: str) -> list[tuple[str, int]]:
    """``controllerAddr`` (``host:port;host:port``, etcd client endpoints) -> [(host, port)]; ValueError if bad."""
    endpoints = []
    for part in controller_addr.replace(",", ";").split(";"):
        part = part.strip().removeprefix("http://")
        if not part:
            continue
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"controllerAddr entry {part!r} is not host:port")
        endpoints.append((host, int(port)))
    if not endpoints:
        raise ValueError("controllerAddr is empty: give the etcd endpoints as host:port;host:port")
    return endpoints


@dataclass
class ReplicaInfo:
    """What a live broker publishes under its lease."""

    broker_id: int
    addr: str  # gRPC host:port
    ha_addr: str  # host:haListenPort
    max_offset: int  # CommitLog end
    epoch: int  # the last epoch whose master's data it holds

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> ReplicaInfo:
        d = json.loads(data)
        return cls(int(d["broker_id"]), str(d["addr"]), str(d["ha_addr"]), int(d["max_offset"]), int(d["epoch"]))


@dataclass
class GroupState:
    """One broker group's master, written by the controller at each election (the epoch grows by one) and by the
    master for its SyncStateSet. ``epochs``: (epoch, CommitLog offset where it started), oldest first."""

    epoch: int
    master_id: int
    master_addr: str
    master_ha_addr: str
    sync_state_set: list[int] = field(default_factory=list)
    epochs: list[tuple[int, int]] = field(default_factory=list)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, data: bytes) -> GroupState:
        d = json.loads(data)
        return cls(
            int(d["epoch"]),
            int(d["master_id"]),
            str(d["master_addr"]),
            str(d["master_ha_addr"]),
            [int(i) for i in d.get("sync_state_set", [])],
            [(int(e), int(o)) for e, o in d.get("epochs", [])],
        )

    def truncation_point(self, last_epoch: int) -> int | None:
        """Where a replica whose data ends in ``last_epoch`` must cut its CommitLog to follow this master: the start
        of the first later epoch (what came after in its own log never reached this history); None = nothing."""
        for epoch, start in self.epochs:
            if epoch > last_epoch:
                return start
        return None


def elect(state: GroupState | None, replicas: list[ReplicaInfo], unclean: bool) -> ReplicaInfo | None:
    """RocketMQ's rules: a live replica of the SyncStateSet first, the highest CommitLog end, then the lowest id;
    an out-of-sync replica only with ``unclean`` (enableElectUncleanMaster) or for a group never elected."""
    if state is None:
        pool = replicas
    else:
        pool = [r for r in replicas if r.broker_id in state.sync_state_set]
        if not pool and unclean:
            pool = replicas
    if not pool:
        return None
    return max(pool, key=lambda r: (r.max_offset, -r.broker_id))


def next_state(state: GroupState | None, winner: ReplicaInfo) -> GroupState:
    epoch = (state.epoch if state else 0) + 1
    epochs = [*(state.epochs if state else []), (epoch, winner.max_offset)]
    return GroupState(epoch, winner.broker_id, winner.addr, winner.ha_addr, [winner.broker_id], epochs)
