"""Name server configuration (RocketMQ ``NamesrvConfig`` keys, camelCase as in ``namesrv.conf``).

Read from a properties file with ``orbitmq.config.build_config``; CLI flags override file values.
"""

from __future__ import annotations

from dataclasses import dataclass

from orbitmq import limits


@dataclass
class NamesrvConfig:
    listenPort: int = limits.DEFAULT_NAMESRV_PORT
    # RocketMQ binds every interface; tests pass 127.0.0.1.
    host: str = "0.0.0.0"
    # A broker silent this long (no registration on any channel) is dropped from the routes.
    brokerExpiredSeconds: float = limits.BROKER_EXPIRED_SECONDS
    # How often the expiry scan runs; 0 = derive from brokerExpiredSeconds.
    scanNotActiveBrokerIntervalSeconds: float = 0.0
    # v2 clients that use the name server as access point: silence after which they are forgotten.
    clientExpiredSeconds: float = limits.CLIENT_EXPIRED_SECONDS
    # Settings replies to v2 clients that talk to the name server (mirrors the broker defaults).
    maxMessageSize: int = limits.MAX_MESSAGE_BODY_SIZE
    longPollingTimeoutSeconds: int = limits.DEFAULT_LONG_POLLING_TIMEOUT_S
    # Answer QueryRoute for unknown topics with the default queues of brokers that auto-create topics.
    autoCreateTopicRouteEnable: bool = True
    # Seconds a stop waits for in-flight calls.
    shutdownGraceSeconds: float = 2.0
    # Failover controller (docs/ha.md): runs here when enabled; one name server leads, elected through etcd.
    enableControllerInNamesrv: bool = False
    controllerAddr: str = ""  # etcd client endpoints host:port;host:port
    controllerLeaseTtlMs: int = 3_000  # the controller's leadership lease
    controllerPollIntervalMs: int = 300  # ms between scans of the broker groups' leases
    enableElectUncleanMaster: bool = False  # elect an out-of-sync replica when no in-sync one is alive

    def scan_interval(self) -> float:
        if self.scanNotActiveBrokerIntervalSeconds > 0:
            return self.scanNotActiveBrokerIntervalSeconds
        return max(0.1, min(5.0, self.brokerExpiredSeconds / 4))
