"""KV config of the name server (RocketMQ's KVConfigManager): namespace -> key -> value, in memory.

Used e.g. for ORDER_TOPIC_CONFIG; the name server keeps no disk state, so it is lost on restart.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class KVConfigManager:
    table: dict[str, dict[str, str]] = field(default_factory=dict)

    def put(self, namespace: str, key: str, value: str) -> None:
        self.table.setdefault(namespace, {})[key] = value

    def get(self, namespace: str, key: str) -> str | None:
        return self.table.get(namespace, {}).get(key)

    def delete(self, namespace: str, key: str) -> bool:
        values = self.table.get(namespace)
        if values is None or key not in values:
            return False
        del values[key]
        if not values:
            del self.table[namespace]
        return True

    def namespace(self, namespace: str) -> dict[str, str]:
        return dict(self.table.get(namespace, {}))
