"""Controller mode (``enableControllerMode``): the broker's side of etcd-driven failover. It holds a lease with its
replica info under it, follows its group's state key, becomes master or slave as the controller decides, and fences
itself (refuses writes) as master once it has not renewed its lease for half its time to live.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aetcd.exceptions
import grpc

from broker.ha.replication import Replication
from broker.json_file import read_json, write_json_atomic
from orbitmq.etcd import Etcd
from orbitmq.ha_state import GroupState, ReplicaInfo, replica_key, state_key
from orbitmq.logging import get_logger

log = get_logger("broker.ha.failover")
FENCE_FRACTION = 0.5  # of the lease TTL: a master stops writing well before etcd can give its role away
ETCD_ERRORS = (aetcd.exceptions.ClientError, grpc.RpcError, OSError, TimeoutError, json.JSONDecodeError, KeyError)


@dataclass(frozen=True)
class FailoverConfig:
    endpoints: list[tuple[str, int]]
    cluster: str
    broker_name: str
    broker_id: int
    lease_ttl_s: int
    poll_s: float


class FailoverAgent:
    def __init__(
        self,
        config: FailoverConfig,
        replication: Replication,
        broker_addr: Callable[[], str],
        on_role: Callable[[bool], Awaitable[None]],
        epoch_path: Path,
    ) -> None:
        self.config = config
        self.replication = replication
        self.store = replication.store
        self._broker_addr = broker_addr
        self._on_role = on_role
        self._epoch_path = epoch_path
        self.etcd = Etcd(config.endpoints, timeout_s=max(1.0, config.lease_ttl_s / 3))
        self._lease: Any = None
        self.renewed_at = 0.0  # monotonic time the last successful renewal was sent
        self._sent = 0.0
        self.epoch = int((read_json(epoch_path) or {}).get("epoch", 0))  # the last epoch whose data we hold
        self.role = ""  # "master", "slave" or "" before the first state
        self.state: GroupState | None = None
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        self.store.write_guard = self.fence_reason
        self._task = asyncio.create_task(self._run(), name="failover-agent")

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._lease is not None:  # leave at once: the controller need not wait for the lease to expire
            with contextlib.suppress(*ETCD_ERRORS):
                await asyncio.wait_for(self._lease.revoke(), self.config.poll_s * 3)
        await self.etcd.close()

    def fence_reason(self) -> str:
        """The store's write guard: a master whose lease may be running out refuses writes by itself."""
        if self.role != "master":
            return ""
        age = time.monotonic() - self.renewed_at
        if age > self.config.lease_ttl_s * FENCE_FRACTION:
            return (
                f"master of epoch {self.epoch} has not renewed its controller lease for {age * 1000:.0f} ms "
                "(controller mode): writes are fenced until it does"
            )
        return ""

    # ------------------------------------------------------------------ the loop
    async def _run(self) -> None:
        while True:
            try:
                await self._tick()
                if self._failing:
                    log.info("controller (etcd) reachable again", endpoint=self.etcd.endpoint)
                self._failing = False
            except ETCD_ERRORS as exc:
                if not self._failing:
                    log.warning("controller (etcd) unreachable", endpoint=self.etcd.endpoint, error=repr(exc))
                self._failing = True
                self._lease = None if self._lease_expired() else self._lease
                await self.etcd.reset()
            except Exception:  # a bug must not end failover silently: log it, try again next tick
                log.exception("failover tick failed")
            await asyncio.sleep(self.config.poll_s)

    def _lease_expired(self) -> bool:
        return time.monotonic() - self.renewed_at > self.config.lease_ttl_s

    async def _tick(self) -> None:
        cfg = self.config
        client = await self.etcd.client()
        sent = time.monotonic()
        if self._lease is None:
            self._lease = await client.lease(cfg.lease_ttl_s)
        else:
            reply = await self._lease.refresh()
            if reply is None or reply.TTL <= 0:  # expired meanwhile (we were paused or cut off): a new one
                log.warning("controller lease expired", broker_id=cfg.broker_id)
                self._lease = await client.lease(cfg.lease_ttl_s)
        self._sent = sent
        info = ReplicaInfo(
            cfg.broker_id, self._broker_addr(), self.replication.ha_addr, self.store.get_max_phy_offset(), self.epoch
        )
        await client.put(replica_key(cfg.cluster, cfg.broker_name, cfg.broker_id), info.to_json(), lease=self._lease)
        got = await client.get(state_key(cfg.cluster, cfg.broker_name))
        if got is not None:
            await self._apply(client, GroupState.from_json(got.value), got.mod_revision)
        # Only now: a master whose lease had expired must first learn whether it is still master (it keeps
        # refusing writes until then; the state read after the renewal is etcd's word).
        self.renewed_at = sent

    async def _apply(self, client: Any, state: GroupState, revision: int) -> None:
        me = self.config.broker_id
        previous, self.state = self.state, state
        if state.master_id == me:
            if self.role != "master" or self.epoch != state.epoch:
                await self._promote(client, state, revision)
            else:
                await self._report_sync_state_set(client, state, revision)
            return
        if (
            self.role != "slave"
            or previous is None
            or (previous.epoch, previous.master_ha_addr)
            != (
                state.epoch,
                state.master_ha_addr,
            )
        ):
            await self._follow(state)

    async def _promote(self, client: Any, state: GroupState, revision: int) -> None:
        """Elected: record where our epoch starts (our CommitLog end), then take writes."""
        end = self.store.get_max_phy_offset()
        if state.epochs and state.epochs[-1] != (state.epoch, end):
            fixed = GroupState(
                state.epoch,
                state.master_id,
                state.master_addr,
                state.master_ha_addr,
                state.sync_state_set,
                [*state.epochs[:-1], (state.epoch, end)],
            )
            key = state_key(self.config.cluster, self.config.broker_name)
            ok, _ = await client.transaction(
                compare=[client.transactions.mod(key) == revision],
                success=[client.transactions.put(key, fixed.to_json())],
                failure=[],
            )
            if not ok:
                return  # the state moved meanwhile: look again next tick
            self.state = fixed
        self._save_epoch(state.epoch)
        self.role = "master"
        self.renewed_at = self._sent
        await self.replication.become_master(state.epoch)
        if self.replication.master is not None:
            self.replication.master.solo_ack = (self.state or state).sync_state_set == [self.config.broker_id]
        log.info("became master", broker_id=self.config.broker_id, epoch=state.epoch, start_offset=end)
        await self._on_role(True)

    async def _follow(self, state: GroupState) -> None:
        """Another broker is master: cut what it never had, then replicate from it."""
        cut = state.truncation_point(self.epoch)
        end = self.store.get_max_phy_offset()
        truncate_to = cut if cut is not None and cut < end else None
        self.role = "slave"
        if self.replication.master is not None:
            self.replication.master.solo_ack = False
        await self.replication.become_slave(state.master_ha_addr, state.epoch, truncate_to)
        self._save_epoch(state.epoch)
        log.info(
            "following master",
            broker_id=self.config.broker_id,
            master_id=state.master_id,
            epoch=state.epoch,
            truncated_to=truncate_to,
            dropped_bytes=end - truncate_to if truncate_to is not None else 0,
        )
        await self._on_role(False)

    async def _report_sync_state_set(self, client: Any, state: GroupState, revision: int) -> None:
        master = self.replication.master
        if master is None:
            return
        in_sync = sorted({self.config.broker_id, *master.in_sync_slaves()})
        if in_sync == sorted(state.sync_state_set):
            return
        updated = GroupState(
            state.epoch, state.master_id, state.master_addr, state.master_ha_addr, in_sync, state.epochs
        )
        alone = in_sync == [self.config.broker_id]
        if not alone:
            master.solo_ack = False  # before etcd names a slave electable, every ack needs a slave
        key = state_key(self.config.cluster, self.config.broker_name)
        ok, _ = await client.transaction(
            compare=[client.transactions.mod(key) == revision],
            success=[client.transactions.put(key, updated.to_json())],
            failure=[],
        )
        if ok:
            self.state = updated
            master.solo_ack = alone  # only once etcd says no slave is electable
            log.info("SyncStateSet changed", epoch=state.epoch, sync_state_set=in_sync)

    def _save_epoch(self, epoch: int) -> None:
        if epoch != self.epoch or not self._epoch_path.exists():
            self.epoch = epoch
            write_json_atomic(self._epoch_path, {"epoch": epoch})

    def runtime_info(self) -> dict[str, str]:
        state = self.state
        return {
            "controllerMode": "true",
            "brokerEpoch": str(self.epoch),
            "syncStateSet": ",".join(map(str, state.sync_state_set)) if state else "",
            "masterBrokerId": str(state.master_id) if state else "",
        }
