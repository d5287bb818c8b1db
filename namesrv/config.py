"""Name server configuration (RocketMQ ``NamesrvConfig`` keys, camelCase as in ``namesrv.conf``).

Read from a properties file with ``orbitmq.config.build_config``; CLI flags override file values.
"""

from __future__ import annotations

from dataclasses import dataclass

from orbitmq import limits
from orbitmq.cluster_auth import ClusterCredentials
from orbitmq.config import ConfigError
from orbitmq.metrics.config import MetricsConfig
from orbitmq.net import EVERY_INTERFACE
from orbitmq.tls import TlsConfig

# Keys ``mqadmin updateNamesrvConfig`` may change on a running name server (the rest need namesrv.conf and a restart).
RUNTIME_UPDATABLE_KEYS: frozenset[str] = frozenset({"brokerExpiredSeconds", "autoCreateTopicRouteEnable"})


@dataclass
class NamesrvConfig(TlsConfig, MetricsConfig):  # TLS keys: orbitmq/tls.py; metrics keys: orbitmq/metrics/config.py
    listenPort: int = limits.DEFAULT_NAMESRV_PORT  # gRPC port of the name server
    # Bind address: RocketMQ binds every interface; a non-loopback bind with ACL off logs a warning at start.
    host: str = EVERY_INTERFACE
    # A broker silent this long (no registration on any channel) is dropped from the routes.
    brokerExpiredSeconds: float = limits.BROKER_EXPIRED_SECONDS
    # How often the expiry scan runs; 0 = derive from brokerExpiredSeconds.
    scanNotActiveBrokerIntervalSeconds: float = 0.0
    # v2 clients that use the name server as access point: silence after which they are forgotten.
    clientExpiredSeconds: float = limits.CLIENT_EXPIRED_SECONDS
    # Settings replies to v2 clients that talk to the name server (mirrors the broker defaults).
    maxMessageSize: int = limits.MAX_MESSAGE_BODY_SIZE
    # long polling timeout handed to v2 clients in their settings (s)
    longPollingTimeoutSeconds: int = limits.DEFAULT_LONG_POLLING_TIMEOUT_S
    # Answer QueryRoute for unknown topics with the default queues of brokers that auto-create topics.
    autoCreateTopicRouteEnable: bool = True
    # RocketMQ remoting listener for 4.x clients (docs/remoting.md): -1 = off, 0 = a free port. RocketMQ's name
    # server takes 9876 for it; here 9876 is the gRPC port, so remoting clients use another one (e.g. 9877).
    remotingListenPort: int = -1
    # Seconds a stop waits for in-flight calls.
    shutdownGraceSeconds: float = 2.0
    # Write RPCs (broker registration, unregistration, KV config) need the cluster credentials (docs/security.md).
    aclEnable: bool = False
    # {"accessKey": ..., "secretKey": ...}: the credentials the brokers sign with (RocketMQ 5's key).
    innerClientAuthenticationCredentials: str = ""

    # Failover controller (docs/ha.md): runs here when enabled; one name server leads, elected through etcd.
    enableControllerInNamesrv: bool = False
    controllerAddr: str = ""  # etcd client endpoints host:port;host:port
    controllerLeaseTtlMs: int = 2_000  # the controller's leadership lease
    controllerPollIntervalMs: int = 300  # ms between scans of the broker groups' leases
    enableElectUncleanMaster: bool = False  # elect an out-of-sync replica when no in-sync one is alive

    def cluster_credentials(self) -> ClusterCredentials | None:
        """The credentials write RPCs must carry; None when ACL is off. ConfigError if ACL is on without them."""
        if not self.aclEnable:
            return None
        credentials = ClusterCredentials.parse(self.innerClientAuthenticationCredentials)
        if credentials is None:
            raise ConfigError("aclEnable=true needs innerClientAuthenticationCredentials (the brokers' shared key)")
        return credentials

    def scan_interval(self) -> float:
        if self.scanNotActiveBrokerIntervalSeconds > 0:
            return self.scanNotActiveBrokerIntervalSeconds
        return max(0.1, min(5.0, self.brokerExpiredSeconds / 4))
