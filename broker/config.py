"""Broker configuration with RocketMQ's key names (``brokerClusterName``, ``listenPort``, ...).

Store keys (``storePathRootDir``, ``flushDiskType``, ...) belong to ``MessageStoreConfig``; ``load_broker_config``
fills both from one ``broker.conf`` plus command-line overrides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from broker.pop.config import PopConfig
from broker.store.config import MessageStoreConfig
from orbitmq.cluster_auth import ClusterCredentials
from orbitmq.config import ConfigError, build_config, load_properties
from orbitmq.delay import DEFAULT_MESSAGE_DELAY_LEVEL
from orbitmq.limits import DEFAULT_BROKER_GRPC_PORT, DEFAULT_TOPIC_QUEUE_NUMS
from orbitmq.malloc_tuning import MAX_KEEP_FREED_MB
from orbitmq.metrics.config import MetricsConfig
from orbitmq.net import EVERY_INTERFACE
from orbitmq.tls import TlsConfig


class BrokerRole(StrEnum):
    """RocketMQ's ``brokerRole``: a SYNC_MASTER answers a send once a slave has it; a SLAVE refuses writes."""

    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


class GrpcServerKind(StrEnum):
    """What serves the broker's gRPC port: the same handlers either way (docs/broker.md)."""

    H2 = "h2"  # orbitmq/h2grpc on asyncio and hyper-h2: one socket write per loop turn, not one per message
    GRPCIO = "grpcio"  # grpc.aio.server


@dataclass
class BrokerConfig(TlsConfig, MetricsConfig):  # TLS keys: orbitmq/tls.py; metrics keys: orbitmq/metrics/config.py
    brokerClusterName: str = "DefaultCluster"  # cluster this broker registers in
    brokerName: str = "broker-a"  # broker name: a master and its slaves share it
    brokerId: int = 0  # 0 for the master, above 0 for slaves
    namesrvAddr: str = ""  # "host:port;host:port"
    listenPort: int = DEFAULT_BROKER_GRPC_PORT  # gRPC port (v2 protocol and the internal services)
    # RocketMQ remoting listener (docs/remoting.md): 4.x clients, and OrbitMQ's own client's frame transport.
    # -1 = off, 0 = a free port (registered with the name servers, which hand it to 4.x clients; not opened when TLS
    # is on), RocketMQ's broker uses 10911
    remotingListenPort: int = 0
    # what serves listenPort: h2 (asyncio + hyper-h2, ~2x less CPU per streamed message) or grpcio (grpc.aio.server)
    grpcServer: GrpcServerKind = GrpcServerKind.H2
    # push NOTIFY_CONSUMER_IDS_CHANGED to a group's remoting consumers when its membership changes (RocketMQ's key)
    notifyConsumerIdsChangedEnable: bool = True
    # Address the gRPC listener binds (RocketMQ's bindAddress); empty = every interface, or 127.0.0.1 standalone.
    bindAddress: str = ""
    brokerIP1: str = "127.0.0.1"  # address advertised in routes and message ids
    autoCreateTopicEnable: bool = True  # create a topic on its first send or route query (from TBW102)
    autoCreateSubscriptionGroup: bool = True  # create a consumer group on first use
    defaultTopicQueueNums: int = DEFAULT_TOPIC_QUEUE_NUMS  # queues of an auto-created topic
    registerBrokerIntervalMs: int = 30_000  # heartbeat to the name servers
    flushConsumerOffsetInterval: int = 5_000  # ms between consumer offset persists
    statsIntervalMs: int = 60_000  # ms between stats log lines
    statsSampleIntervalMs: int = 10_000  # ms between statsAll samples (queue ends, committed offsets); min 50
    maxDelayTimeMills: int = 24 * 3600 * 1000  # the furthest delivery time a delay message may ask for (ms)
    clientExpireMs: int = 120_000  # a client with no heartbeat for this long leaves its group's assignment
    longPollingMaxMs: int = 20_000  # longest a pull long-polls at a queue end (ms)
    enableTopicMessageTypeCheck: bool = True  # refuse messages whose type the topic's message.type does not accept
    transactionTimeOut: int = 6_000  # ms a half message waits before its producer is asked (RocketMQ key)
    transactionCheckInterval: int = 30_000  # ms between orphan-check scans (RocketMQ key)
    transactionCheckMax: int = 15  # checks before an unresolved half message is rolled back
    rebalanceLockMaxLiveTime: int = 60_000  # ms a queue lease of an orderly consumer lasts without renewal
    messageDelayLevel: str = DEFAULT_MESSAGE_DELAY_LEVEL  # delay levels 1..N; retries use level 3 + reconsumeTimes
    # Plugins (docs/plugins.md)
    pluginsDisabled: str = ""  # comma-separated plugin names not to load (built-in or third-party)
    loadPluginEntryPoints: bool = True  # load third-party plugins from the ``orbitmq.plugins`` entry points
    enablePropertyFilter: bool = True  # SQL92 subscriptions (RocketMQ's key; on by default here)
    enableCalcFilterBitMap: bool = True  # Bloom pre-check bits for SQL92 groups in the ConsumeQueue extension
    maxErrorRateOfBloomFilter: int = 20  # percent
    expectConsumerNumUseFilter: int = 32  # SQL92 groups per topic the Bloom filter is sized for
    defaultAllocateStrategy: str = "AVG"  # QueryAssignment strategy for groups that name none
    aclEnable: bool = False  # check every request against the ACL plugin (plain_acl.yml)
    aclFile: str = ""  # plain_acl.yml; default <storePathRootDir>/config/plain_acl.yml
    # {"accessKey": ..., "secretKey": ...} signing registrations with name servers that have ACL on (RocketMQ 5 key)
    innerClientAuthenticationCredentials: str = ""
    # Python runtime (docs/broker.md, "Latency and the Python runtime")
    gcFreezeAfterStartup: bool = True  # gc.freeze() once started: gen-2 collections skip the startup heap
    gcThresholds: str = ""  # "gen0,gen1,gen2" for gc.set_threshold; empty keeps Python's defaults (700,10,10)
    # MiB of freed heap glibc keeps for the next requests instead of trimming it after each (orbitmq/malloc_tuning.py);
    # 0 keeps glibc's own thresholds
    mallocKeepFreedMb: int = 64
    # Replication (docs/ha.md); a SYNC_MASTER's send waits up to the store's syncFlushTimeout for a slave
    brokerRole: BrokerRole = BrokerRole.ASYNC_MASTER
    # master: where slaves connect; 0 = a free port, which slaves learn from the name servers (RocketMQ: listenPort+1)
    haListenPort: int = 0
    haMasterAddress: str = ""  # slave: the master's host:haListenPort; empty = learned from the name servers
    haSendHeartbeatInterval: int = 5_000  # ms between offset reports / empty frames when idle
    haHousekeepingInterval: int = 20_000  # ms without a frame before a replication connection is dropped
    haTransferBatchSize: int = 256 * 1024  # most bytes the master sends a slave in one frame
    haSlaveFallbehindMax: int = 256 * 1024 * 1024  # a SYNC_MASTER answers SLAVE_NOT_AVAILABLE past this lag
    minInSyncReplicas: int = 1  # SYNC_MASTER: replicas (the master included) in sync for a put to be accepted
    allAckInSyncStateSet: bool = False  # SYNC_MASTER: a put waits for every in-sync slave, not just one
    slaveSyncIntervalMs: int = 10_000  # ms between a slave's copies of the master's topics, groups and offsets
    # Automatic failover through etcd (docs/ha.md): brokerId is the broker's identity (>= 1), brokerRole its
    # behaviour while master (ASYNC_MASTER or SYNC_MASTER); the controller decides who is master.
    enableControllerMode: bool = False
    controllerAddr: str = ""  # etcd client endpoints host:port;host:port
    controllerLeaseTtlMs: int = 2_000  # a broker silent this long is dead to the controller (etcd minimum: 2000)
    controllerPollIntervalMs: int = 300  # ms between lease renewals, offset reports and reads of the group state

    def gc_thresholds(self) -> tuple[int, int, int] | None:
        """``gcThresholds`` parsed, None when unset; three non-negative integers (gen0 > 0) or ConfigError."""
        text = self.gcThresholds.strip()
        if not text:
            return None
        parts = [p.strip() for p in text.split(",")]
        if len(parts) != 3 or not all(p.isdigit() for p in parts) or int(parts[0]) == 0:
            raise ConfigError(f"gcThresholds {self.gcThresholds!r} is not 'gen0,gen1,gen2' (integers, gen0 > 0)")
        return int(parts[0]), int(parts[1]), int(parts[2])

    def validate_ha(self) -> None:
        """brokerId 0 is the master, any other id a slave, as in RocketMQ."""
        if self.minInSyncReplicas < 1:
            raise ConfigError(f"minInSyncReplicas must be >= 1 (the master counts), got {self.minInSyncReplicas}")
        if self.brokerId < 0:
            raise ConfigError(f"brokerId must be >= 0, got {self.brokerId}")
        if self.enableControllerMode:
            if self.brokerId < 1 or self.brokerRole is BrokerRole.SLAVE:
                raise ConfigError(
                    "enableControllerMode: brokerId must be >= 1 (0 is whoever is master) and brokerRole ASYNC_MASTER "
                    f"or SYNC_MASTER (its behaviour as master), got {self.brokerId} {self.brokerRole.value}"
                )
            if not self.controllerAddr.strip():
                raise ConfigError("enableControllerMode needs controllerAddr (etcd endpoints host:port;host:port)")
            if self.controllerLeaseTtlMs < 2_000:
                raise ConfigError(
                    f"controllerLeaseTtlMs must be >= 2000 (etcd's lease minimum), got {self.controllerLeaseTtlMs}"
                )
            return
        if (self.brokerRole is BrokerRole.SLAVE) != (self.brokerId != 0):
            raise ConfigError(
                f"brokerRole {self.brokerRole.value} does not match brokerId {self.brokerId} (0 = master, > 0 = SLAVE)"
            )

    @property
    def is_slave(self) -> bool:
        return self.brokerRole is BrokerRole.SLAVE

    def disabled_plugins(self) -> list[str]:
        return [p.strip() for p in self.pluginsDisabled.split(",") if p.strip()]

    @property
    def bind_host(self) -> str:
        return self.bindAddress.strip() or EVERY_INTERFACE

    @property
    def broker_addr(self) -> str:
        return f"{self.brokerIP1}:{self.listenPort}"

    def namesrv_list(self) -> list[str]:
        return [a.strip() for a in self.namesrvAddr.replace(",", ";").split(";") if a.strip()]


# Keys ``mqadmin updateBrokerConfig`` may change on a running broker: the ones read where they are used (the rest
# are copied into services at start and need broker.conf and a restart).
RUNTIME_UPDATABLE_KEYS: frozenset[str] = frozenset(
    {"maxDelayTimeMills", "longPollingMaxMs", "enableTopicMessageTypeCheck"}
)


@dataclass
class BrokerSettings:
    """Everything one broker process needs: its own keys, its store's and its receive/ack (pop) service's."""

    broker: BrokerConfig = field(default_factory=BrokerConfig)
    store: MessageStoreConfig = field(default_factory=MessageStoreConfig)
    pop: PopConfig = field(default_factory=PopConfig)
    # keys of the file or the flags that no OrbitMQ config knows: ignored (RocketMQ files carry other components'
    # keys too), warned about by name at start
    unknown_keys: tuple[str, ...] = ()


def load_broker_settings(
    conf_path: str | Path | None = None, overrides: Mapping[str, str] | None = None
) -> BrokerSettings:
    """Read ``broker.conf`` (if any), then apply ``overrides`` (CLI flags, env) on top."""
    values: dict[str, str] = {}
    if conf_path:
        values.update(load_properties(conf_path))
    values.update(overrides or {})
    broker = build_config(BrokerConfig, values)
    store = build_config(MessageStoreConfig, values)
    pop = build_config(PopConfig, values)
    broker.validate_ha()
    broker.validate_metrics()
    broker.gc_thresholds()  # a malformed value fails at load, not after the broker started
    if not 0 <= broker.mallocKeepFreedMb <= MAX_KEEP_FREED_MB:
        raise ConfigError(f"mallocKeepFreedMb must be 0-{MAX_KEEP_FREED_MB} (MiB), got {broker.mallocKeepFreedMb}")
    # 0 between looks keeps the index thread looking as long as puts bring keys; below 0 (or no idle pause) it
    # would spin on the GIL for good
    if store.indexDispatchDelayMs < 0 or store.indexDispatchIdleMs < 1:
        raise ConfigError(
            "indexDispatchDelayMs must be >= 0 and indexDispatchIdleMs >= 1 (ms), got "
            f"{store.indexDispatchDelayMs} and {store.indexDispatchIdleMs}"
        )
    ClusterCredentials.parse(broker.innerClientAuthenticationCredentials)  # likewise
    broker.validate_tls()
    known = {f.name for cls in (BrokerConfig, MessageStoreConfig, PopConfig) for f in dataclasses.fields(cls)}
    unknown = tuple(sorted(set(values) - known))
    return BrokerSettings(broker=broker, store=store, pop=pop, unknown_keys=unknown)
