"""The replication part of one broker, chosen by ``brokerRole``: a master's HAService (with the SYNC_MASTER gate on
the store's puts) or a slave's HAClient and SlaveSynchronize (with the store refusing writes).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path

from broker.config import BrokerConfig, BrokerRole
from broker.consumer_offset_manager import ConsumerOffsetManager
from broker.ha.master import HAMasterConfig, HAService
from broker.ha.slave import HAClient, HASlaveConfig
from broker.ha.sync import SlaveSynchronize, SyncTarget, master_metadata
from broker.store.message_store import DefaultMessageStore
from broker.subscription_group_manager import SubscriptionGroupManager
from broker.topic_config_manager import TopicConfigManager
from orbitmq.logging import get_logger
from orbitmq.route import TopicConfig

log = get_logger("broker.ha")


def slave_write_refusal(cfg: BrokerConfig) -> str:
    return (
        f"broker {cfg.brokerName} id {cfg.brokerId} is a SLAVE (brokerRole=SLAVE) and does not accept writes; "
        "send to the master of the broker group"
    )


class Replication:
    def __init__(
        self,
        cfg: BrokerConfig,
        store: DefaultMessageStore,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        config_dir: Path,
        learned_master_addr: Callable[[], str],
    ) -> None:
        self.cfg = cfg
        self.store = store
        self.topics = topics
        self.master: HAService | None = None
        self.client: HAClient | None = None
        self.synchronize: SlaveSynchronize | None = None
        self._learned_master_addr = learned_master_addr
        self._tasks: list[asyncio.Task[None]] = []
        self.following = ""  # controller mode: the master's HA address to replicate from, as etcd says
        heartbeat = cfg.haSendHeartbeatInterval / 1000
        housekeeping = cfg.haHousekeepingInterval / 1000
        # In controller mode a broker may take either role over its life: it has both parts, one active at a time.
        if cfg.is_slave or cfg.enableControllerMode:
            self.client = HAClient(store, HASlaveConfig(heartbeat, housekeeping), self.master_addr)
            self.client.broker_id = cfg.brokerId
            self.synchronize = SlaveSynchronize(
                self.master_addr,
                [
                    SyncTarget("topics", config_dir / "topics.json", topics.load),
                    SyncTarget("groups", config_dir / "subscriptionGroup.json", groups.load),
                    SyncTarget("offsets", config_dir / "consumerOffset.json", offsets.load),
                ],
                cfg.slaveSyncIntervalMs / 1000,
                housekeeping,
            )
        if not cfg.is_slave or cfg.enableControllerMode:
            self.master = HAService(
                store,
                HAMasterConfig(
                    host=cfg.brokerIP1,
                    port=cfg.haListenPort,
                    transfer_batch_size=cfg.haTransferBatchSize,
                    heartbeat_interval_s=heartbeat,
                    housekeeping_interval_s=housekeeping,
                    sync_timeout_s=store.config.syncFlushTimeout / 1000,
                    fallbehind_max=cfg.haSlaveFallbehindMax,
                    min_in_sync_replicas=cfg.minInSyncReplicas,
                    all_ack_in_sync=cfg.allAckInSyncStateSet,
                ),
                lambda: master_metadata(topics, groups, offsets),
            )
        self.is_master = False
        self.extra_info: Callable[[], dict[str, str]] | None = None  # controller mode: epoch, SyncStateSet

    def master_addr(self) -> str:
        """The master's HA address: etcd's word in controller mode, else ``haMasterAddress`` if set, else what the
        name servers said at registration."""
        if self.cfg.enableControllerMode:
            return self.following
        return self.cfg.haMasterAddress.strip() or self._learned_master_addr()

    @property
    def ha_addr(self) -> str:
        """This broker's ``host:haListenPort`` for slaves (empty on a broker that can never be master)."""
        return f"{self.cfg.brokerIP1}:{self.master.port}" if self.master is not None else ""

    async def start(self) -> None:
        if self.master is not None:
            await self.master.start()
        if self.client is not None:
            self.store.add_arriving_listener(self._learn_topic)
        if self.cfg.enableControllerMode:  # the failover agent makes it master or slave once etcd says which
            self.store.write_refusal = "controller mode: no master elected for this broker group yet"
        elif self.cfg.is_slave:
            await self.become_slave("", 0)
        else:
            await self.become_master(0)
        self._tasks.append(asyncio.create_task(self._lag_loop(), name="ha-lag"))
        log.info("replication started", role=self.cfg.brokerRole.value, broker_id=self.cfg.brokerId, ha=self.ha_addr)

    async def become_master(self, epoch: int) -> None:
        """Take writes (with the SYNC_MASTER gate when configured) and serve slaves as master of ``epoch``."""
        assert self.master is not None
        if self.client is not None:
            await self.client.shutdown()
        if self.synchronize is not None:
            await self.synchronize.shutdown()
        self.master.epoch = epoch
        self.following = ""
        self.is_master = True
        self.store.put_gate = self.master.gate if self.cfg.brokerRole is BrokerRole.SYNC_MASTER else None
        self.store.write_refusal = ""

    async def become_slave(self, master_ha_addr: str, epoch: int, truncate_to: int | None = None) -> None:
        """Refuse writes, drop our own slaves, cut the CommitLog at ``truncate_to`` (what the new master never
        had), then replicate from ``master_ha_addr`` (empty: the configured or learned address)."""
        assert self.client is not None and self.synchronize is not None
        self.store.write_refusal = slave_write_refusal(self.cfg)
        self.store.put_gate = None
        self.is_master = False
        if self.master is not None:
            await self.master.drop_slaves()
        await self.client.shutdown()
        if truncate_to is not None:
            await asyncio.to_thread(self.store.truncate_replica, truncate_to)
        self.following = master_ha_addr
        self.client.epoch = epoch
        self.client.start()
        self.synchronize.start()

    async def shutdown(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.synchronize is not None:
            await self.synchronize.shutdown()
        if self.client is not None:
            await self.client.shutdown()
        if self.master is not None:
            self.store.put_gate = None
            await self.master.shutdown()

    def _learn_topic(self, topic: str, queue_id: int, max_offset: int) -> None:
        """A slave serves a topic whose messages it has even before SlaveSynchronize copied its config (the master
        may die first); the next copy from a live master replaces this guess."""
        tc = self.topics.get(topic)
        if tc is None or queue_id >= tc.read_queue_nums:
            queues = max(queue_id + 1, tc.read_queue_nums if tc else self.cfg.defaultTopicQueueNums)
            self.topics.create_or_update(TopicConfig(topic, queues, queues))

    def runtime_info(self) -> dict[str, str]:
        info = {"brokerRole": self.cfg.brokerRole.value if self.is_master else BrokerRole.SLAVE.value}
        if self.is_master and self.master is not None:
            info.update(self.master.runtime_info())
        elif self.client is not None:
            info.update(self.client.runtime_info())
        if self.extra_info is not None:
            info.update(self.extra_info())
        return info

    async def _lag_loop(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.statsIntervalMs / 1000)
            if self.is_master and self.master is not None:
                self.master.log_lag()
            elif self.client is not None:
                log.info("replication", master=self.client.connected_to, lag_bytes=self.client.lag_bytes)
