"""Committed consumer offsets per (group, topic, queue) persisted to ``config/consumerOffset.json``.

Commits are in memory; the controller persists them periodically and at shutdown (atomic tmp+fsync+rename).

The reset-offset table (RocketMQ 5's ``resetOffsetTable``) holds offsets an admin reset while the group may be
running: the next pull of that queue by an offset-based clustering consumer is served from it once
(``query_then_erase_reset_offset``), so a consumer that holds messages in memory jumps instead of committing its
old position over the reset. It is not persisted: after a restart the committed offset already is the reset one.
"""

from __future__ import annotations

import threading
from pathlib import Path

from broker.json_file import read_json, write_json_atomic

TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsetManager:
    def __init__(self, path: Path) -> None:
        self._path = path
        self._lock = threading.Lock()
        # RocketMQ's key: "topic@group" -> {queue_id: offset}
        self._table: dict[str, dict[int, int]] = {}
        self._dirty = False
        self._reset: dict[str, dict[int, int]] = {}

    def load(self) -> None:
        data = read_json(self._path) or {}
        with self._lock:
            self._table = {
                key: {int(q): int(o) for q, o in queues.items()} for key, queues in data.get("offsetTable", {}).items()
            }

    def persist(self) -> None:
        with self._lock:
            data = {"offsetTable": {k: {str(q): o for q, o in v.items()} for k, v in self._table.items()}}
            self._dirty = False
        write_json_atomic(self._path, data)

    def table(self) -> dict[str, dict[str, int]]:
        """A copy in the persisted form (``topic@group`` -> queue id -> offset), for a slave's SlaveSynchronize."""
        with self._lock:
            return {k: {str(q): o for q, o in v.items()} for k, v in self._table.items()}

    def persist_if_dirty(self) -> None:
        if self._dirty:
            self.persist()

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        with self._lock:
            self._table.setdefault(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {})[queue_id] = offset
            self._dirty = True

    def set_reset_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Commit ``offset`` and remember it for the group's next pull of the queue (admin reset while running)."""
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"
        with self._lock:
            self._table.setdefault(key, {})[queue_id] = offset
            self._reset.setdefault(key, {})[queue_id] = offset
            self._dirty = True

    def query_then_erase_reset_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The pending reset offset of the queue, once (RocketMQ's queryThenEraseResetOffset)."""
        key = f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"
        with self._lock:
            pending = self._reset.get(key)
            if not pending:
                return None
            offset = pending.pop(queue_id, None)
            if not pending:
                del self._reset[key]
            return offset

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed on this queue."""
        with self._lock:
            return self._table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id, -1)

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        with self._lock:
            return dict(self._table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}))

    def totals(self) -> dict[tuple[str, str], int]:
        """``(group, topic) -> sum of committed offsets`` over every queue: how far each group consumed a topic."""
        with self._lock:
            out: dict[tuple[str, str], int] = {}
            for key, queues in self._table.items():
                topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
                out[(group, topic)] = sum(queues.values())
            return out

    def groups_of_topic(self, topic: str) -> list[str]:
        prefix = f"{topic}{TOPIC_GROUP_SEPARATOR}"
        with self._lock:
            return [k[len(prefix) :] for k in self._table if k.startswith(prefix)]

    def topics_of_group(self, group: str) -> list[str]:
        suffix = f"{TOPIC_GROUP_SEPARATOR}{group}"
        with self._lock:
            return [k[: -len(suffix)] for k in self._table if k.endswith(suffix)]

    def remove_group(self, group: str) -> None:
        suffix = f"{TOPIC_GROUP_SEPARATOR}{group}"
        with self._lock:
            for key in [k for k in self._table if k.endswith(suffix)]:
                del self._table[key]
            for key in [k for k in self._reset if k.endswith(suffix)]:
                del self._reset[key]
            self._dirty = True

    def remove_topic(self, topic: str) -> None:
        prefix = f"{topic}{TOPIC_GROUP_SEPARATOR}"
        with self._lock:
            for key in [k for k in self._table if k.startswith(prefix)]:
                del self._table[key]
            for key in [k for k in self._reset if k.startswith(prefix)]:
                del self._reset[key]
            self._dirty = True
