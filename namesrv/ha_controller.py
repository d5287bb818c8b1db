"""The failover controller inside mqnamesrv (``enableControllerInNamesrv``): one name server at a time leads,
through an etcd lease key; the leader elects a new master for every broker group whose master's lease is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from dataclasses import dataclass
from typing import Any

import aetcd.exceptions
import grpc

from orbitmq.etcd import Etcd
from orbitmq.ha_state import (
    CONTROLLER_KEY,
    PREFIX,
    GroupState,
    ReplicaInfo,
    elect,
    groups_prefix,
    next_state,
    state_key,
)
from orbitmq.logging import get_logger

log = get_logger("namesrv.ha_controller")
ETCD_ERRORS = (aetcd.exceptions.ClientError, grpc.RpcError, OSError, TimeoutError)


@dataclass
class _Group:
    state: GroupState | None = None
    revision: int = 0  # the state key's mod revision (0: no state yet)
    replicas: list[ReplicaInfo] | None = None


class HAController:
    def __init__(
        self, endpoints: list[tuple[str, int]], lease_ttl_s: int, poll_s: float, unclean: bool = False
    ) -> None:
        self.etcd = Etcd(endpoints, timeout_s=max(1.0, lease_ttl_s / 3))
        self.lease_ttl_s = lease_ttl_s
        self.poll_s = poll_s
        self.unclean = unclean
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self.leader = False
        self.elections = 0
        self._lease: Any = None
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="ha-controller")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._lease is not None and self.leader:
            with contextlib.suppress(*ETCD_ERRORS):
                await asyncio.wait_for(self._lease.revoke(), self.poll_s * 3)
        await self.etcd.close()

    async def _run(self) -> None:
        while True:
            try:
                await self._tick()
                self._failing = False
            except ETCD_ERRORS as exc:
                if not self._failing:
                    log.warning("controller cannot reach etcd", endpoint=self.etcd.endpoint, error=repr(exc))
                self._failing = True
                self.leader = False
                self._lease = None
                await self.etcd.reset()
            except Exception:  # a bug must not end the controller silently: log it, try again next tick
                log.exception("controller tick failed")
            await asyncio.sleep(self.poll_s)

    async def _tick(self) -> None:
        client = await self.etcd.client()
        if self.leader:
            reply = await self._lease.refresh()
            if reply is None or reply.TTL <= 0:
                log.warning("controller leadership lost", controller=self.name)
                self.leader, self._lease = False, None
                return
        else:
            if self._lease is None:
                self._lease = await client.lease(self.lease_ttl_s)
            else:
                await self._lease.refresh()
            ok, _ = await client.transaction(
                compare=[client.transactions.version(CONTROLLER_KEY) == 0],
                success=[client.transactions.put(CONTROLLER_KEY, self.name.encode(), self._lease)],
                failure=[],
            )
            if not ok:
                return
            self.leader = True
            log.info("became the failover controller", controller=self.name)
        await self._elect_where_needed(client)

    async def _elect_where_needed(self, client: Any) -> None:
        groups: dict[tuple[str, str], _Group] = {}
        for kv in await client.get_prefix(groups_prefix()):
            parts = kv.key.decode().removeprefix(f"{PREFIX}/groups/").split("/")
            if len(parts) < 3:
                continue
            group = groups.setdefault((parts[0], parts[1]), _Group())
            try:
                if parts[2] == "state":
                    group.state, group.revision = GroupState.from_json(kv.value), kv.mod_revision
                elif parts[2] == "replicas":
                    group.replicas = [*(group.replicas or []), ReplicaInfo.from_json(kv.value)]
            except (ValueError, KeyError, json.JSONDecodeError) as exc:
                log.error("unreadable failover key", key=kv.key.decode(), error=str(exc))
        for (cluster, name), group in groups.items():
            live = group.replicas or []
            state = group.state
            if state is not None and any(r.broker_id == state.master_id for r in live):
                continue  # the master holds its lease
            winner = elect(state, live, self.unclean)
            if winner is None:
                if live and state is not None:
                    log.warning(
                        "no in-sync replica to elect", cluster=cluster, broker=name, sync_state_set=state.sync_state_set
                    )
                continue
            new = next_state(state, winner)
            key = state_key(cluster, name)
            guard = client.transactions.mod(key) == group.revision if state else client.transactions.version(key) == 0
            ok, _ = await client.transaction(
                compare=[guard], success=[client.transactions.put(key, new.to_json())], failure=[]
            )
            if ok:
                self.elections += 1
                log.info(
                    "master elected",
                    cluster=cluster,
                    broker=name,
                    broker_id=winner.broker_id,
                    epoch=new.epoch,
                    max_offset=winner.max_offset,
                    previous_master=state.master_id if state else None,
                )
