"""Route model shared by name server, broker and clients: topic configs, queue data, broker data.

Plain dataclasses (no protobuf) mirroring RocketMQ's TopicConfig / QueueData / BrokerData / TopicRouteData.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntFlag, StrEnum
from typing import Any

from orbitmq.limits import DEFAULT_MAX_DELIVERY_ATTEMPTS

MASTER_ID = 0


class PermName(IntFlag):
    """RocketMQ permission bits (``PermName`` in the Java code)."""

    PERM_NONE = 0
    PERM_INHERIT = 1
    PERM_WRITE = 2
    PERM_READ = 4
    PERM_PRIORITY = 8

    @staticmethod
    def is_readable(perm: int) -> bool:
        return bool(perm & PermName.PERM_READ)

    @staticmethod
    def is_writeable(perm: int) -> bool:
        return bool(perm & PermName.PERM_WRITE)

    @staticmethod
    def to_string(perm: int) -> str:
        return (
            ("R" if perm & PermName.PERM_READ else "-")
            + ("W" if perm & PermName.PERM_WRITE else "-")
            + ("X" if perm & PermName.PERM_INHERIT else "-")
        )


READ_WRITE = int(PermName.PERM_READ | PermName.PERM_WRITE)


class TopicMessageType(StrEnum):
    """The topic attribute ``message.type``: which message types a topic accepts."""

    UNSPECIFIED = "UNSPECIFIED"
    NORMAL = "NORMAL"
    FIFO = "FIFO"
    DELAY = "DELAY"
    TRANSACTION = "TRANSACTION"
    MIXED = "MIXED"

    @classmethod
    def parse(cls, value: str | None) -> TopicMessageType:
        if not value:
            return cls.NORMAL
        return cls(value.strip().upper())


QUEUE_TYPE_ATTRIBUTE = "queue.type"


class CQType(StrEnum):
    """The topic attribute ``queue.type`` (RocketMQ's ``CQType``).

    ``BatchCQ`` topics store each ``Produce/SendBatch`` request as one inner-batch CommitLog record; readers see
    the messages one by one (``docs/storage.md``, inner batches)."""

    SIMPLE = "SimpleCQ"
    BATCH = "BatchCQ"

    @classmethod
    def parse(cls, value: str | None) -> CQType:
        if not value:
            return cls.SIMPLE
        for member in cls:
            if member.value.lower() == value.strip().lower():
                return member
        allowed = ", ".join(m.value for m in cls)
        raise ValueError(f"attribute {QUEUE_TYPE_ATTRIBUTE}={value!r} is not one of {allowed}")


@dataclass
class TopicConfig:
    """One topic on one broker: queue counts, permission, message type, free-form attributes."""

    topic_name: str
    read_queue_nums: int = 4
    write_queue_nums: int = 4
    perm: int = READ_WRITE
    order: bool = False
    message_type: TopicMessageType = TopicMessageType.NORMAL
    attributes: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topicName": self.topic_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": int(self.perm),
            "order": self.order,
            "messageType": self.message_type.value,
            "attributes": dict(self.attributes),
        }

    @property
    def cq_type(self) -> CQType:
        return CQType.parse(self.attributes.get(QUEUE_TYPE_ATTRIBUTE))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TopicConfig:
        return cls(
            topic_name=str(data["topicName"]),
            read_queue_nums=int(data.get("readQueueNums", 4)),
            write_queue_nums=int(data.get("writeQueueNums", 4)),
            perm=int(data.get("perm", READ_WRITE)),
            order=bool(data.get("order", False)),
            message_type=TopicMessageType.parse(data.get("messageType")),
            attributes={str(k): str(v) for k, v in (data.get("attributes") or {}).items()},
        )


@dataclass
class BrokerData:
    """One broker group (brokerName) of a cluster: broker id -> gRPC ``host:port`` (0 = master)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def master_addr(self) -> str | None:
        return self.broker_addrs.get(MASTER_ID)


@dataclass
class QueueData:
    """A topic's queues on one broker group."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    message_type: TopicMessageType = TopicMessageType.NORMAL


@dataclass
class TopicRouteData:
    """Where a topic lives: its queues per broker group and those groups' addresses."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)

    def broker(self, broker_name: str) -> BrokerData | None:
        for data in self.broker_datas:
            if data.broker_name == broker_name:
                return data
        return None


@dataclass(frozen=True)
class GroupPolicy:
    """A subscription group's consume settings a broker reports, so an access point answers Telemetry like it.

    The client latches ``fifo`` and the retry policy from its FIRST settings reply, which may come from a name server.
    """

    group_name: str
    fifo: bool = False
    max_delivery_attempts: int = DEFAULT_MAX_DELIVERY_ATTEMPTS


@dataclass
class ClusterInfo:
    """All broker groups by name and the broker names of each cluster."""

    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
