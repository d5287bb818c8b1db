"""SlaveSynchronize: a slave copies the master's topic and group configs and consumer offsets periodically, so a
consumer that moves to the slave when the master is down continues from its committed offset.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.consumer_offset_manager import ConsumerOffsetManager
from broker.ha.protocol import LENGTH, ConnectionKind, Hello, ProtocolError, metadata_length
from broker.ha.slave import RECONNECT_DELAY_S, split_addr
from broker.json_file import write_json_atomic
from broker.subscription_group_manager import SubscriptionGroupManager
from broker.topic_config_manager import TopicConfigManager
from orbitmq.logging import get_logger

log = get_logger("broker.ha.sync")


@dataclass(frozen=True)
class SyncTarget:
    """One table a slave takes from its master: the payload key, the slave's file, and how it reloads it."""

    key: str
    path: Path
    reload: Callable[[], None]


def master_metadata(
    topics: TopicConfigManager, groups: SubscriptionGroupManager, offsets: ConsumerOffsetManager
) -> dict[str, Any]:
    """What a slave copies, in the form each table is persisted in."""
    return {
        "topics": {"topicConfigTable": {tc.topic_name: tc.to_dict() for tc in topics.all()}},
        "groups": {"subscriptionGroupTable": {g.group_name: g.to_dict() for g in groups.all()}},
        "offsets": {"offsetTable": offsets.table()},
    }


async def fetch_metadata(addr: str, timeout_s: float) -> dict[str, Any]:
    host, port = split_addr(addr)
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout_s)
    try:
        writer.write(Hello(ConnectionKind.METADATA, 0).encode())
        await writer.drain()
        length = metadata_length(await asyncio.wait_for(reader.readexactly(LENGTH.size), timeout_s))
        body = await asyncio.wait_for(reader.readexactly(length), timeout_s)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    payload = json.loads(body)
    if not isinstance(payload, dict):
        raise ProtocolError("metadata is not a JSON object")
    return payload


class SlaveSynchronize:
    def __init__(
        self, master_addr: Callable[[], str], targets: list[SyncTarget], interval_s: float, timeout_s: float
    ) -> None:
        self._master_addr = master_addr
        self.targets = targets
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.synced = 0  # successful rounds
        self._failing = False  # log a failure once per outage, not every retry
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="slave-synchronize")

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def sync_once(self) -> bool:
        addr = self._master_addr()
        if not addr:
            return False
        try:
            payload = await fetch_metadata(addr, self.timeout_s)
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError, ProtocolError) as exc:
            if not self._failing:
                log.info("slave synchronize failed; keeping the last copy", master=addr, error=repr(exc))
            self._failing = True
            return False
        if self._failing:
            log.info("slave synchronize resumed", master=addr)
        self._failing = False
        for target in self.targets:
            table = payload.get(target.key)
            if isinstance(table, dict):
                await asyncio.to_thread(_replace, target, table)
        self.synced += 1
        return True

    async def _run(self) -> None:
        while True:
            delay = self.interval_s if await self.sync_once() else min(self.interval_s, RECONNECT_DELAY_S * 4)
            await asyncio.sleep(delay)


def _replace(target: SyncTarget, table: dict[str, Any]) -> None:
    write_json_atomic(target.path, table)
    target.reload()
