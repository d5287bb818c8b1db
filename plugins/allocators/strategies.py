"""The six queue allocation strategies of RocketMQ's rebalance, with RocketMQ's names and semantics.

``create_strategy(name, options)`` builds one from a group's config; names are case-insensitive.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from plugins.allocators.base import AllocateStrategy, AllocationError, QueueRef, machine_room, normalized
from plugins.allocators.consistent_hash import ConsistentHashRing

DEFAULT_VIRTUAL_NODES = 10


@dataclass(frozen=True)
class Averagely:
    """AllocateMessageQueueAveragely: contiguous blocks, the first ``len(mq) % len(cid)`` clients get one more."""

    name: str = "AVG"

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        mqs, cids = normalized(mq_all, cid_all)
        if not mqs or current_cid not in cids:
            return []
        return _average(mqs, len(cids), cids.index(current_cid))


def _average(mqs: list[QueueRef], n_cids: int, index: int) -> list[QueueRef]:
    size = len(mqs)
    mod = size % n_cids
    average = 1 if size <= n_cids else size // n_cids + (1 if mod > 0 and index < mod else 0)
    start = index * average if mod > 0 and index < mod else index * average + mod
    count = min(average, size - start)
    return [mqs[(start + i) % size] for i in range(max(0, count))]


@dataclass(frozen=True)
class AveragelyByCircle:
    """AllocateMessageQueueAveragelyByCircle: queue i goes to client ``i % len(cid)`` (round robin)."""

    name: str = "AVG_BY_CIRCLE"

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        mqs, cids = normalized(mq_all, cid_all)
        if not mqs or current_cid not in cids:
            return []
        return mqs[cids.index(current_cid) :: len(cids)]


@dataclass(frozen=True)
class ByConfig:
    """AllocateMessageQueueByConfig: the configured queues (option ``queues`` = ``broker:queueId,...``),
    whatever the other clients do; queues the route does not have are left out."""

    queues: frozenset[QueueRef]
    name: str = "CONFIG"

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ByConfig:
        refs: set[QueueRef] = set()
        for item in (options.get("queues") or "").split(","):
            item = item.strip()
            if not item:
                continue
            broker, sep, qid = item.rpartition(":")
            try:
                refs.add(QueueRef(broker, int(qid)))
            except ValueError:
                sep = ""
            if not sep or not broker:
                raise AllocationError(f"CONFIG option queues: {item!r} is not brokerName:queueId")
        if not refs:
            raise AllocationError("CONFIG needs option queues = brokerName:queueId[,brokerName:queueId...]")
        return cls(frozenset(refs))

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        mqs, cids = normalized(mq_all, cid_all)
        if current_cid not in cids:
            return []
        return [q for q in mqs if q in self.queues]


@dataclass(frozen=True)
class ByMachineRoom:
    """AllocateMessageQueueByMachineRoom: only queues of brokers in the rooms ``consumeridcs`` serves
    (broker name ``room@name``), split in equal blocks, the remainder one each to the first clients.
    Queues of other rooms are left to other consumer sets."""

    rooms: frozenset[str]
    name: str = "MACHINE_ROOM"

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ByMachineRoom:
        rooms = frozenset(r.strip() for r in (options.get("consumeridcs") or "").split(",") if r.strip())
        if not rooms:
            raise AllocationError("MACHINE_ROOM needs option consumeridcs = room[,room...]")
        return cls(rooms)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        mqs, cids = normalized(mq_all, cid_all)
        if current_cid not in cids:
            return []
        mine = [q for q in mqs if machine_room(q.broker_name) in self.rooms]
        index, n = cids.index(current_cid), len(cids)
        block, rem = divmod(len(mine), n)
        result = mine[index * block : index * block + block]
        if index < rem:
            result.append(mine[block * n + index])
        return result


@dataclass(frozen=True)
class ConsistentHash:
    """AllocateMessageQueueConsistentHash: each queue goes to the client its key routes to on a ring of
    ``virtualNodeCnt`` virtual nodes per client; a joining or leaving client moves only its own queues."""

    virtual_nodes: int = DEFAULT_VIRTUAL_NODES
    name: str = "CONSISTENT_HASH"

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ConsistentHash:
        raw = options.get("virtualNodeCnt", str(DEFAULT_VIRTUAL_NODES))
        try:
            count = int(raw)
        except ValueError:
            raise AllocationError(f"CONSISTENT_HASH option virtualNodeCnt {raw!r} is not an integer") from None
        if count < 1:
            raise AllocationError(f"CONSISTENT_HASH option virtualNodeCnt is {count}, it must be >= 1")
        return cls(count)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        mqs, cids = normalized(mq_all, cid_all)
        if not mqs or current_cid not in cids:
            return []
        ring = ConsistentHashRing(cids, self.virtual_nodes)
        return [q for q in mqs if ring.route(str(q)) == current_cid]


@dataclass(frozen=True)
class MachineRoomNearby:
    """AllocateMachineRoomNearby: queues of a room go to the consumers of the same room (client id
    ``room@...``) with the ``inner`` strategy; queues of rooms without a consumer go to all consumers."""

    inner: AllocateStrategy = field(default_factory=Averagely)
    name: str = "MACHINE_ROOM_NEARBY"

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> MachineRoomNearby:
        inner_name = options.get("inner", "AVG")
        if canonical_name(inner_name) == "MACHINE_ROOM_NEARBY":
            raise AllocationError("MACHINE_ROOM_NEARBY cannot nest itself as its inner strategy")
        inner_options = {k[len("inner.") :]: v for k, v in options.items() if k.startswith("inner.")}
        return cls(create_strategy(inner_name, inner_options))

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        mqs, cids = normalized(mq_all, cid_all)
        if current_cid not in cids:
            return []
        mqs_by_room: dict[str | None, list[QueueRef]] = defaultdict(list)
        for q in mqs:
            mqs_by_room[machine_room(q.broker_name)].append(q)
        cids_by_room: dict[str | None, list[str]] = defaultdict(list)
        for c in cids:
            cids_by_room[machine_room(c)].append(c)
        result: list[QueueRef] = []
        my_room = machine_room(current_cid)
        if my_room is not None and my_room in mqs_by_room:
            result += self.inner.allocate(group, current_cid, mqs_by_room[my_room], cids_by_room[my_room])
        orphans = [q for room, qs in mqs_by_room.items() if room is None or room not in cids_by_room for q in qs]
        if orphans:
            result += self.inner.allocate(group, current_cid, orphans, cids)
        return sorted(result)


_FACTORIES: dict[str, Callable[[Mapping[str, str]], AllocateStrategy]] = {
    "AVG": lambda options: Averagely(),
    "AVG_BY_CIRCLE": lambda options: AveragelyByCircle(),
    "CONFIG": ByConfig.from_options,
    "MACHINE_ROOM": ByMachineRoom.from_options,
    "CONSISTENT_HASH": ConsistentHash.from_options,
    "MACHINE_ROOM_NEARBY": MachineRoomNearby.from_options,
}
STRATEGY_NAMES: tuple[str, ...] = tuple(_FACTORIES)
_ALIASES = {
    "ALLOCATEMESSAGEQUEUEAVERAGELY": "AVG",
    "ALLOCATEMESSAGEQUEUEAVERAGELYBYCIRCLE": "AVG_BY_CIRCLE",
    "ALLOCATEMESSAGEQUEUEBYCONFIG": "CONFIG",
    "ALLOCATEMESSAGEQUEUEBYMACHINEROOM": "MACHINE_ROOM",
    "ALLOCATEMESSAGEQUEUECONSISTENTHASH": "CONSISTENT_HASH",
    "ALLOCATEMACHINEROOMNEARBY": "MACHINE_ROOM_NEARBY",
}


def canonical_name(name: str) -> str | None:
    """The canonical strategy name for ``name`` (RocketMQ's name or Java class name), None if unknown."""
    key = name.strip().upper()
    return key if key in _FACTORIES else _ALIASES.get(key)


def create_strategy(name: str, options: Mapping[str, str] | None = None) -> AllocateStrategy:
    canonical = canonical_name(name)
    if canonical is None:
        raise AllocationError(f"unknown allocation strategy {name!r}; known: {', '.join(STRATEGY_NAMES)}")
    strategy: AllocateStrategy = _FACTORIES[canonical](options or {})
    return strategy
