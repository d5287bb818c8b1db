"""``oms`` clients shared by the tasks of one Python worker, and the driver-side view of topics and queues.

Spark reuses Python workers across tasks and micro-batches but unpickles a fresh reader or writer for each task, so
connections live here, keyed by access-point URL, not on those objects (a gRPC channel per task would cost more
than the task's pulls).
"""

from __future__ import annotations

import atexit
import logging
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spark_connector.errors import ConnectorErrorCode, RocketMQConnectorError
from spark_connector.offsets import QueueKey
from spark_connector.options import Connection

if TYPE_CHECKING:
    import oms

log = logging.getLogger("spark_connector")

# Topics a pattern never matches: the broker's own (retry, dead-letter and system topics).
_SYSTEM_TOPIC = re.compile(r"^(%RETRY%|%DLQ%|rmq_sys_|RMQ_SYS_|TBW102$|SCHEDULE_TOPIC_XXXX$|OFFSET_MOVED_EVENT$)")


@dataclass
class _Entry:
    access_point: oms.MessagingAccessPoint
    consumers: dict[str, oms.PullConsumer] = field(default_factory=dict)
    producers: dict[str, oms.Producer] = field(default_factory=dict)
    admin: oms.ResourceManager | None = None


class ClientCache:
    """One access point per URL, with its pull consumers (per group), producers and resource manager."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    def _entry(self, connection: Connection) -> _Entry:
        import oms

        entry = self._entries.get(connection.url)
        if entry is None:
            ap = oms.get_messaging_access_point(connection.url, operation_timeout=connection.operation_timeout_ms)
            entry = self._entries[connection.url] = _Entry(ap)
        return entry

    def consumer(self, connection: Connection, group: str) -> oms.PullConsumer:
        with self._lock:
            entry = self._entry(connection)
            consumer = entry.consumers.get(group)
            if consumer is None or not consumer.is_running:
                consumer = entry.access_point.create_pull_consumer(
                    consumer_id=group, operation_timeout=connection.operation_timeout_ms
                )
                consumer.startup()
                entry.consumers[group] = consumer
            return consumer

    def producer(self, connection: Connection, group: str | None, timeout_ms: int) -> oms.Producer:
        key = f"{group or ''}/{timeout_ms}"
        with self._lock:
            entry = self._entry(connection)
            producer = entry.producers.get(key)
            if producer is None or not producer.is_running:
                attributes: dict[str, object] = {"OPERATION_TIMEOUT": timeout_ms}
                if group:
                    attributes["PRODUCER_ID"] = group
                producer = entry.access_point.create_producer(attributes)
                producer.startup()
                entry.producers[key] = producer
            return producer

    def admin(self, connection: Connection) -> oms.ResourceManager:
        with self._lock:
            entry = self._entry(connection)
            if entry.admin is None:
                entry.admin = entry.access_point.resource_manager(operation_timeout=connection.operation_timeout_ms)
            return entry.admin

    def close(self) -> None:
        with self._lock:
            entries, self._entries = self._entries, {}
        for entry in entries.values():
            try:
                entry.access_point.shutdown()
            except Exception as exc:  # shutting down at exit: nothing left to tell but the log
                log.warning("closing %s failed: %s", entry.access_point, exc)


# The one cache of this Python process (a worker serves many tasks); closed when the worker exits.
CLIENTS = ClientCache()
atexit.register(CLIENTS.close)


@dataclass(frozen=True)
class QueueState:
    min_offset: int
    max_offset: int  # one past the last message


class Catalog:
    """The driver's view of the brokers: which topics exist, their queues and each queue's offset range."""

    def __init__(self, connection: Connection, group: str) -> None:
        self.connection = connection
        self.group = group

    def topics(self) -> list[str]:
        return sorted(t for t in CLIENTS.admin(self.connection).list_topics() if not _SYSTEM_TOPIC.match(t))

    def status(self, topic: str, option: str = "subscribe") -> dict[QueueKey, QueueState]:
        """Every queue of ``topic`` with its offset range; a missing topic is an error naming ``option``."""
        import oms

        try:
            status = CLIENTS.admin(self.connection).topic_status(topic)
        except oms.OMSResourceNotExistException:
            raise RocketMQConnectorError(
                ConnectorErrorCode.TOPIC_NOT_FOUND,
                f"option '{option}': topic {topic!r} does not exist on {self.connection.url}",
                option,
            ) from None
        if not status.queues:
            raise RocketMQConnectorError(
                ConnectorErrorCode.TOPIC_NOT_FOUND,
                f"option '{option}': topic {topic!r} has no queue on {self.connection.url}",
                option,
            )
        return {QueueKey(q.broker_name, q.queue_id): QueueState(q.min_offset, q.max_offset) for q in status.queues}

    def offset_for_time(self, topic: str, queue: QueueKey, timestamp_ms: int) -> int:
        import oms

        consumer = CLIENTS.consumer(self.connection, self.group)
        return consumer.offset_for_time(oms.MessageQueue(topic, queue.broker_name, queue.queue_id), timestamp_ms)

    def commit(self, topic: str, queue: QueueKey, offset: int) -> None:
        import oms

        consumer = CLIENTS.consumer(self.connection, self.group)
        consumer.commit(oms.MessageQueue(topic, queue.broker_name, queue.queue_id), offset)
