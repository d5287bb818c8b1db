"""Subscription groups (``config/subscriptionGroup.json``): retry max times, orderly (FIFO) flag, enablement.

Groups are auto-created on first use when ``autoCreateSubscriptionGroup`` is on, as in RocketMQ.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.json_file import read_json, write_json_atomic
from orbitmq.errors import Code, MQError
from orbitmq.limits import DEFAULT_CONSUMER_RETRY_MAX_TIMES
from orbitmq.validation import validate_group


@dataclass
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = DEFAULT_CONSUMER_RETRY_MAX_TIMES
    consume_message_orderly: bool = False
    allocate_strategy: str = ""  # QueryAssignment strategy (plugins/allocators); "" = the broker's default
    allocate_options: dict[str, str] = field(default_factory=dict)  # e.g. {"consumeridcs": "room1,room2"}

    def to_dict(self) -> dict[str, Any]:
        return {
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "consumeMessageOrderly": self.consume_message_orderly,
            "allocateStrategy": self.allocate_strategy,
            "allocateOptions": dict(self.allocate_options),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SubscriptionGroupConfig:
        return cls(
            group_name=str(d["groupName"]),
            consume_enable=bool(d.get("consumeEnable", True)),
            consume_broadcast_enable=bool(d.get("consumeBroadcastEnable", True)),
            retry_queue_nums=int(d.get("retryQueueNums", 1)),
            retry_max_times=int(d.get("retryMaxTimes", DEFAULT_CONSUMER_RETRY_MAX_TIMES)),
            consume_message_orderly=bool(d.get("consumeMessageOrderly", False)),
            allocate_strategy=str(d.get("allocateStrategy", "")),
            allocate_options={str(k): str(v) for k, v in (d.get("allocateOptions") or {}).items()},
        )


class SubscriptionGroupManager:
    def __init__(self, path: Path, auto_create: bool = True) -> None:
        self._path = path
        self._lock = threading.Lock()
        self._groups: dict[str, SubscriptionGroupConfig] = {}
        self.auto_create = auto_create

    def load(self) -> None:
        data = read_json(self._path) or {}
        with self._lock:
            self._groups = {
                g["groupName"]: SubscriptionGroupConfig.from_dict(g)
                for g in data.get("subscriptionGroupTable", {}).values()
            }

    def persist(self) -> None:
        with self._lock:
            data = {"subscriptionGroupTable": {n: g.to_dict() for n, g in sorted(self._groups.items())}}
        write_json_atomic(self._path, data)

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        with self._lock:
            return self._groups.get(group)

    def all(self) -> list[SubscriptionGroupConfig]:
        with self._lock:
            return list(self._groups.values())

    def get_or_auto_create(self, group: str) -> SubscriptionGroupConfig:
        existing = self.get(group)
        if existing is not None:
            return existing
        if not self.auto_create:
            raise MQError(Code.CONSUMER_GROUP_NOT_FOUND, f"consumer group {group!r} does not exist")
        validate_group(group, allow_system=True)  # whatever path asked: nothing malformed is ever stored
        return self.create_or_update(SubscriptionGroupConfig(group))

    def create_or_update(self, cfg: SubscriptionGroupConfig) -> SubscriptionGroupConfig:
        with self._lock:
            self._groups[cfg.group_name] = cfg
        self.persist()
        return cfg

    def delete(self, group: str) -> bool:
        with self._lock:
            removed = self._groups.pop(group, None)
        if removed is not None:
            self.persist()
        return removed is not None
