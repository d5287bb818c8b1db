"""The broker's topic table (``config/topics.json``): queue numbers, permission, message type per topic.

Auto-creation copies the ``TBW102`` template as RocketMQ does when ``autoCreateTopicEnable`` is on.
The topic attribute ``queue.type`` (``SimpleCQ``/``BatchCQ``) is fixed when a topic is created, as in RocketMQ.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path

from broker.json_file import read_json, write_json_atomic
from orbitmq.config import ConfigError
from orbitmq.errors import Code, MQError
from orbitmq.route import QUEUE_TYPE_ATTRIBUTE, READ_WRITE, CQType, PermName, TopicConfig, TopicMessageType
from orbitmq.topics import AUTO_CREATE_TOPIC_KEY_TOPIC


def settle_queue_type(tc: TopicConfig, existing: TopicConfig | None) -> TopicConfig:
    """``tc`` with its ``queue.type`` checked against ``existing`` (the topic's current config, None if new).

    The value is stored in its canonical spelling (``SimpleCQ``/``BatchCQ``); an unknown value is BAD_REQUEST.
    Like RocketMQ's unchangeable attribute, an update cannot change it (BAD_REQUEST); one that leaves it out
    keeps the current value. A topic created without it is SimpleCQ (the attribute stays absent).
    """
    attributes = dict(tc.attributes)
    raw = attributes.get(QUEUE_TYPE_ATTRIBUTE)
    try:
        requested = CQType.parse(raw) if raw is not None else None
    except ValueError as exc:
        raise MQError(Code.BAD_REQUEST, str(exc)) from exc
    if existing is not None:
        current = existing.attributes.get(QUEUE_TYPE_ATTRIBUTE)
        current_type = CQType.parse(current)
        if requested is None:
            if current is None:
                return tc
            attributes[QUEUE_TYPE_ATTRIBUTE] = current_type.value
            return dataclasses.replace(tc, attributes=attributes)
        if requested is not current_type:
            raise MQError(
                Code.BAD_REQUEST,
                f"attribute {QUEUE_TYPE_ATTRIBUTE} of topic {tc.topic_name!r} is {current_type.value} and cannot "
                f"change to {requested.value} (it is fixed when the topic is created; delete and re-create the topic)",
            )
    if requested is None:
        return tc
    attributes[QUEUE_TYPE_ATTRIBUTE] = requested.value
    return dataclasses.replace(tc, attributes=attributes)


class TopicConfigManager:
    """Thread-safe topic table persisted atomically on every change."""

    def __init__(self, path: Path, default_queue_nums: int, auto_create: bool) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._topics: dict[str, TopicConfig] = {}
        self._default_queue_nums = default_queue_nums
        self.auto_create = auto_create
        self._listeners: list[Callable[[], None]] = []

    def load(self) -> None:
        data = read_json(self._path)
        with self._lock:
            self._topics = {}
            for name, item in (data or {}).get("topicConfigTable", {}).items():
                try:  # a hand-edited file: refuse to start, naming the topic, rather than fail its requests later
                    tc = TopicConfig.from_dict(item)
                    CQType.parse(tc.attributes.get(QUEUE_TYPE_ATTRIBUTE))
                except (KeyError, TypeError, ValueError) as exc:
                    raise ConfigError(f"{self._path}: topic {name!r}: {exc}") from exc
                self._topics[tc.topic_name] = tc
            if AUTO_CREATE_TOPIC_KEY_TOPIC not in self._topics:
                perm = READ_WRITE | PermName.PERM_INHERIT if self.auto_create else READ_WRITE
                self._topics[AUTO_CREATE_TOPIC_KEY_TOPIC] = TopicConfig(
                    AUTO_CREATE_TOPIC_KEY_TOPIC, self._default_queue_nums, self._default_queue_nums, int(perm)
                )

    def add_change_listener(self, cb: Callable[[], None]) -> None:
        """``cb`` runs after every change (the controller re-registers with the name servers)."""
        self._listeners.append(cb)

    def persist(self) -> None:
        with self._lock:
            data = {"topicConfigTable": {n: tc.to_dict() for n, tc in sorted(self._topics.items())}}
        write_json_atomic(self._path, data)

    def _changed(self) -> None:
        self.persist()
        for cb in self._listeners:
            cb()

    def get(self, topic: str) -> TopicConfig | None:
        with self._lock:
            return self._topics.get(topic)

    def all(self) -> list[TopicConfig]:
        with self._lock:
            return list(self._topics.values())

    def user_topics(self) -> list[TopicConfig]:
        return [t for t in self.all() if t.topic_name != AUTO_CREATE_TOPIC_KEY_TOPIC]

    def get_or_auto_create(self, topic: str, message_type: TopicMessageType | None = None) -> TopicConfig:
        """The topic's config; unknown topics are created from TBW102 when allowed, else TOPIC_NOT_FOUND.

        The template's queue numbers and permission are copied, not its attributes: auto-created topics are
        SimpleCQ (RocketMQ's default ``queue.type``)."""
        existing = self.get(topic)
        if existing is not None:
            return existing
        template = self.get(AUTO_CREATE_TOPIC_KEY_TOPIC)
        if not self.auto_create or template is None or not (template.perm & PermName.PERM_INHERIT):
            raise MQError(Code.TOPIC_NOT_FOUND, f"topic {topic!r} does not exist (autoCreateTopicEnable=false)")
        with self._lock:
            if topic in self._topics:
                return self._topics[topic]
            tc = TopicConfig(
                topic,
                read_queue_nums=template.read_queue_nums,
                write_queue_nums=template.write_queue_nums,
                perm=int(template.perm & ~PermName.PERM_INHERIT),
                message_type=message_type or TopicMessageType.NORMAL,
            )
            self._topics[topic] = tc
        self._changed()
        return tc

    def create_or_update(self, tc: TopicConfig) -> TopicConfig:
        """Store ``tc`` and return what was stored: ``queue.type`` normalised, kept or refused
        (``settle_queue_type``; MQError BAD_REQUEST). Other attributes are replaced by ``tc``'s."""
        with self._lock:
            tc = settle_queue_type(tc, self._topics.get(tc.topic_name))
            self._topics[tc.topic_name] = tc
        self._changed()
        return tc

    def create_internal(self, topic: str, queue_nums: int = 1, perm: int = READ_WRITE) -> TopicConfig:
        """System topics (``%RETRY%``, ``%DLQ%``, ...): created silently, no template needed."""
        existing = self.get(topic)
        if existing is not None:
            return existing
        return self.create_or_update(TopicConfig(topic, queue_nums, queue_nums, perm))

    def delete(self, topic: str) -> bool:
        with self._lock:
            removed = self._topics.pop(topic, None)
        if removed is not None:
            self._changed()
        return removed is not None
