"""The six queue allocation strategies of RocketMQ's rebalance, with RocketMQ's names and semantics,
and ``create_strategy(name, options)`` to build one from a group's config (names are case-insensitive)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from broker.hookspecs import QueueRef
from orbitmq.allocation import average_block
from plugins.allocators.base import (
    AllocateStrategy,
    AllocationError,
    broker_room,
    client_room,
    lowercase_keys,
    prepare,
)
from plugins.allocators.consistent_hash import cached_ring

DEFAULT_VIRTUAL_NODES = 10


@dataclass(frozen=True)
class Averagely:
    """AVG (AllocateMessageQueueAveragely, RocketMQ's default): contiguous blocks in client id order,
    the first ``len(mq) % len(cid)`` clients one queue more. 8 queues / 3 clients: 0-2, 3-5, 6-7."""

    name: str = field(default="AVG", init=False)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        prepared = prepare(group, current_cid, mq_all, cid_all)
        if prepared is None:
            return []
        mqs, cids = prepared
        return average_block(mqs, len(cids), cids.index(current_cid))


@dataclass(frozen=True)
class AveragelyByCircle:
    """AVG_BY_CIRCLE (AllocateMessageQueueAveragelyByCircle): queue ``i`` goes to client ``i % len(cid)``,
    round robin. 8 queues / 3 clients: {0, 3, 6}, {1, 4, 7}, {2, 5}."""

    name: str = field(default="AVG_BY_CIRCLE", init=False)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        prepared = prepare(group, current_cid, mq_all, cid_all)
        if prepared is None:
            return []
        mqs, cids = prepared
        return mqs[cids.index(current_cid) :: len(cids)]


@dataclass(frozen=True)
class ByConfig:
    """CONFIG (AllocateMessageQueueByConfig): the queues listed in option ``queues``
    (``brokerName:queueId,...``), whatever the other clients get.

    RocketMQ configures this per consumer instance; here the option belongs to the group, so every live member
    gets the same list (queues are shared, not partitioned). Listed queues the route does not have are left out,
    so the broker never hands out a queue that does not exist."""

    queues: frozenset[QueueRef]
    name: str = field(default="CONFIG", init=False)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ByConfig:
        refs: set[QueueRef] = set()
        for raw in options.get("queues", "").split(","):
            item = raw.strip()
            if not item:
                continue
            # rpartition: the queue id is after the last colon, whatever the broker name contains.
            broker, _, qid = item.rpartition(":")
            queue_id: int | None
            try:
                queue_id = int(qid)
            except ValueError:
                queue_id = None
            if not broker.strip() or queue_id is None:
                raise AllocationError(f"CONFIG option queues: {item!r} is not brokerName:queueId")
            refs.add(QueueRef(broker.strip(), queue_id))
        if not refs:
            raise AllocationError("CONFIG needs option queues = brokerName:queueId[,brokerName:queueId...]")
        return cls(frozenset(refs))

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        prepared = prepare(group, current_cid, mq_all, cid_all)
        if prepared is None:
            return []
        mqs, _ = prepared
        return [q for q in mqs if q in self.queues]


@dataclass(frozen=True)
class ByMachineRoom:
    """MACHINE_ROOM (AllocateMessageQueueByMachineRoom): only queues of brokers named ``room@name`` whose room
    is in option ``consumeridcs``; those are cut into ``len(cid)`` blocks of ``n // len(cid)`` in client order,
    and the remainder goes one each to the first clients. 8 queues / 3 clients: {0,1,6}, {2,3,7}, {4,5}.

    Queues of other rooms, and of brokers whose name is not exactly ``room@name``, are left unassigned: they
    belong to the consumer set of another room. Clients' own rooms play no part."""

    rooms: frozenset[str]
    name: str = field(default="MACHINE_ROOM", init=False)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ByMachineRoom:
        rooms = frozenset(r.strip() for r in options.get("consumeridcs", "").split(",") if r.strip())
        if not rooms:
            raise AllocationError("MACHINE_ROOM needs option consumeridcs = room[,room...]")
        return cls(rooms)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        prepared = prepare(group, current_cid, mq_all, cid_all)
        if prepared is None:
            return []
        mqs, cids = prepared
        served = [q for q in mqs if broker_room(q.broker_name) in self.rooms]
        index, n = cids.index(current_cid), len(cids)
        block, rem = divmod(len(served), n)
        result = served[index * block : (index + 1) * block]
        if index < rem:
            result.append(served[block * n + index])
        return result


def _ring_key(q: QueueRef) -> str:
    # Spelled out rather than str(q): changing how a queue prints must not reshuffle every consistent-hash group.
    return f"{q.broker_name}:{q.queue_id}"


@dataclass(frozen=True)
class ConsistentHash:
    """CONSISTENT_HASH (AllocateMessageQueueConsistentHash): each queue goes to the client its key routes to on
    a ring of ``virtualNodeCnt`` (default 10) MD5-hashed virtual nodes per client. A joining or leaving client
    moves only the queues it gains or had; a client may get none when the ring is lopsided."""

    virtual_nodes: int = DEFAULT_VIRTUAL_NODES
    name: str = field(default="CONSISTENT_HASH", init=False)

    def __post_init__(self) -> None:
        if self.virtual_nodes < 1:
            raise AllocationError(f"CONSISTENT_HASH option virtualNodeCnt is {self.virtual_nodes}, it must be >= 1")

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ConsistentHash:
        raw = options.get("virtualnodecnt", str(DEFAULT_VIRTUAL_NODES)).strip()
        try:
            count = int(raw)
        except ValueError:
            raise AllocationError(f"CONSISTENT_HASH option virtualNodeCnt {raw!r} is not an integer") from None
        return cls(count)

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        prepared = prepare(group, current_cid, mq_all, cid_all)
        if prepared is None:
            return []
        mqs, cids = prepared
        ring = cached_ring(tuple(cids), self.virtual_nodes)
        return [q for q in mqs if ring.route(_ring_key(q)) == current_cid]


@dataclass(frozen=True)
class MachineRoomNearby:
    """MACHINE_ROOM_NEARBY (AllocateMachineRoomNearby) around an ``inner`` strategy (default AVG).

    A broker's room is that of ``room@name`` (as MACHINE_ROOM); a client's room is the prefix of its id before
    the first ``@`` (no ``@`` or an empty prefix: no room). Queues of a room with live clients go to those clients
    only; the queues of each room without a live client (and of brokers without a room) are shared by all
    clients, room by room, through ``inner``. Clients without a room get only such shared queues."""

    inner: AllocateStrategy = field(default_factory=Averagely)
    name: str = field(default="MACHINE_ROOM_NEARBY", init=False)

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> MachineRoomNearby:
        inner_name = options.get("inner", "AVG")
        if canonical_name(inner_name) == "MACHINE_ROOM_NEARBY":
            raise AllocationError("MACHINE_ROOM_NEARBY cannot nest itself as its inner strategy")
        # ``inner.<key>`` options configure the inner strategy, e.g. inner=CONSISTENT_HASH, inner.virtualNodeCnt=20.
        inner_options = {k.removeprefix("inner."): v for k, v in options.items() if k.startswith("inner.")}
        return cls(create_strategy(inner_name, inner_options))

    def allocate(
        self, group: str, current_cid: str, mq_all: Sequence[QueueRef], cid_all: Sequence[str]
    ) -> list[QueueRef]:
        prepared = prepare(group, current_cid, mq_all, cid_all)
        if prepared is None:
            return []
        mqs, cids = prepared
        mqs_by_room: dict[str | None, list[QueueRef]] = defaultdict(list)
        for q in mqs:
            mqs_by_room[broker_room(q.broker_name)].append(q)
        cids_by_room: dict[str, list[str]] = defaultdict(list)
        for c in cids:
            room = client_room(c)
            if room is not None:
                cids_by_room[room].append(c)
        my_room = client_room(current_cid)
        result: list[QueueRef] = []
        for room, queues in mqs_by_room.items():
            if room is not None and room in cids_by_room:
                if room == my_room:
                    result += self.inner.allocate(group, current_cid, queues, cids_by_room[room])
            else:
                # Nobody lives next to these queues: everyone shares them. Each room is allocated on its own,
                # as RocketMQ does, rather than pooling all orphan rooms into one list.
                result += self.inner.allocate(group, current_cid, queues, cids)
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
_JAVA_CLASS_NAMES = {
    "ALLOCATEMESSAGEQUEUEAVERAGELY": "AVG",
    "ALLOCATEMESSAGEQUEUEAVERAGELYBYCIRCLE": "AVG_BY_CIRCLE",
    "ALLOCATEMESSAGEQUEUEBYCONFIG": "CONFIG",
    "ALLOCATEMESSAGEQUEUEBYMACHINEROOM": "MACHINE_ROOM",
    "ALLOCATEMESSAGEQUEUECONSISTENTHASH": "CONSISTENT_HASH",
    "ALLOCATEMACHINEROOMNEARBY": "MACHINE_ROOM_NEARBY",
}


def canonical_name(name: str) -> str | None:
    """The canonical name for ``name`` (RocketMQ's getName() or the Java class name, simple or fully qualified,
    any case), None when it is none of the six."""
    key = name.strip().upper()
    if key in _FACTORIES:
        return key
    return _JAVA_CLASS_NAMES.get(key.rpartition(".")[2])


def create_strategy(name: str, options: Mapping[str, str] | None = None) -> AllocateStrategy:
    """Build a strategy from a group's config. Option keys are case-insensitive; keys a strategy does not use
    are ignored (a group that switches strategy may keep the old one's options)."""
    canonical = canonical_name(name)
    if canonical is None:
        raise AllocationError(f"unknown allocation strategy {name!r}; known: {', '.join(STRATEGY_NAMES)}")
    return _FACTORIES[canonical](lowercase_keys(options))
