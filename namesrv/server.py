"""The name server process core: a grpc.aio server with the internal and the v2 services, plus expiry.

Embeddable: ``NameServer(config)`` can run inside another process's event loop (``mqbroker --standalone``).
"""

from __future__ import annotations

import asyncio
import contextlib

import grpc
from rocketmq.grpc_protocol import service_pb2_grpc

from namesrv.config import NamesrvConfig
from namesrv.internal_service import NameServerService
from namesrv.kv_config import KVConfigManager
from namesrv.metrics import OPEN_TELEMETRY_METER_NAME, NamesrvMetrics
from namesrv.remoting import NamesrvRemotingHandler
from namesrv.route_info import RouteInfoManager
from namesrv.v2_service import NamesrvMessagingService
from orbitmq import limits, tls
from orbitmq.grpc_guard import guarded_server
from orbitmq.logging import get_logger
from orbitmq.metrics.exporters import Exporter, close_exporter, start_exporter
from orbitmq.metrics.model import parse_metrics_label
from orbitmq.net import bind_target, is_loopback
from orbitmq.proto import namesrv_pb2_grpc as pb_grpc
from orbitmq.remoting.server import RemotingServer
from orbitmq.v2.settings import SettingsPolicy
from orbitmq.v2.telemetry import TelemetryHub

log = get_logger("namesrv")

GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 130 * 1024 * 1024),
    ("grpc.max_send_message_length", 130 * 1024 * 1024),
    ("grpc.so_reuseport", 0),
]


class NameServer:
    """One name server. ``await start()`` returns the bound port (useful with ``listenPort=0``)."""

    def __init__(self, config: NamesrvConfig | None = None) -> None:
        self.config = config or NamesrvConfig()
        self.credentials = self.config.cluster_credentials()  # ConfigError before anything starts
        self.routes = RouteInfoManager(broker_expired_s=self.config.brokerExpiredSeconds)
        self.kv = KVConfigManager()
        self.hub = TelemetryHub(
            SettingsPolicy(
                max_body_size=self.config.maxMessageSize,
                long_polling_timeout_s=self.config.longPollingTimeoutSeconds,
                fifo=self._group_fifo,
                max_delivery_attempts=self._group_max_attempts,
                metric_endpoints=self.config.client_metric_endpoints(),  # clients using us as access point
            ),
            client_expired_s=self.config.clientExpiredSeconds,
        )
        self.port = 0
        self._server: grpc.aio.Server | None = None
        self._scan_task: asyncio.Task[None] | None = None
        self.remoting: RemotingServer | None = None  # the 4.x clients' listener (remotingListenPort)
        # rocketmq_rpc_latency, fed by both listeners; None when metricsExporterType=DISABLE
        self.metrics: NamesrvMetrics | None = None
        if self.config.metrics_enabled:
            self.metrics = NamesrvMetrics(lambda: self.address, parse_metrics_label(self.config.metricsLabel))
        self.exporter: Exporter | None = None

    # the client latches fifo and its retry policy from the first settings reply, often ours (protocol P6)
    def _group_fifo(self, group: str) -> bool:
        policy = self.routes.group_policy(group)
        return policy is not None and policy.fifo

    def _group_max_attempts(self, group: str) -> int:
        policy = self.routes.group_policy(group)
        return policy.max_delivery_attempts if policy else limits.DEFAULT_MAX_DELIVERY_ATTEMPTS

    @property
    def address(self) -> str:
        host = "127.0.0.1" if self.config.host in ("0.0.0.0", "::", "") else self.config.host
        return f"{host}:{self.port}"

    async def start(self) -> int:
        metrics = self.metrics
        server = guarded_server(
            grpc.aio.server(options=GRPC_OPTIONS), observer=metrics.rpc.on_grpc if metrics is not None else None
        )
        messaging = NamesrvMessagingService(
            self.routes,
            self.hub,
            self.config.autoCreateTopicRouteEnable,
            broker_credentials=self.config.channel_credentials(),
        )

        def config_changed() -> None:
            self.routes.broker_expired_s = self.config.brokerExpiredSeconds
            messaging.auto_create_route = self.config.autoCreateTopicRouteEnable

        pb_grpc.add_NameServerServicer_to_server(
            NameServerService(self.routes, self.kv, self.credentials, self.config, config_changed), server
        )
        service_pb2_grpc.add_MessagingServiceServicer_to_server(
            messaging,
            server,
        )
        bind = bind_target(self.config.host, self.config.listenPort)
        port = tls.add_port(server, bind, self.config.server_credentials())
        await server.start()
        self._server, self.port = server, port
        await self.hub.start()
        self._scan_task = asyncio.create_task(self._scan_loop(), name="namesrv-expiry")
        if self.config.remotingListenPort >= 0:
            handler = NamesrvRemotingHandler(
                self.routes, self.config.autoCreateTopicRouteEnable, writes_allowed=self.credentials is None
            )
            observer = metrics.rpc.on_remoting if metrics is not None else None
            self.remoting = RemotingServer(handler, "namesrv", observer)
            await self.remoting.start(self.config.host, self.config.remotingListenPort)
        if metrics is not None:
            self.exporter = start_exporter(metrics, self.config, self.config.host, OPEN_TELEMETRY_METER_NAME)
        log.info("name server started", host=self.config.host, port=port, tls=self.config.tls_server_enabled)
        if self.credentials is None and not is_loopback(self.config.host):
            log.warning(
                "listening beyond this machine with ACL off: anyone who reaches the port may register brokers and "
                "rewrite routes (set aclEnable=true, or host=127.0.0.1)",
                host=self.config.host,
                port=port,
            )
        return port

    async def stop(self) -> None:
        if self._scan_task is not None:
            self._scan_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan_task
            self._scan_task = None
        await self.hub.stop()
        if self.remoting is not None:
            await self.remoting.stop()
            self.remoting = None
        if self._server is not None:
            await self._server.stop(self.config.shutdownGraceSeconds)
            self._server = None
            log.info("name server stopped", port=self.port)
        close_exporter(self.exporter)
        self.exporter = None

    async def wait_for_termination(self) -> None:
        if self._server is not None:
            await self._server.wait_for_termination()

    def scan_not_active_brokers(self) -> None:
        for live in self.routes.expire():
            log.info(
                "broker expired",
                broker=live.broker_name,
                broker_id=live.broker_id,
                addr=live.broker_addr,
                silent_s=self.config.brokerExpiredSeconds,
            )

    async def _scan_loop(self) -> None:
        while True:
            await asyncio.sleep(self.config.scan_interval())
            self.scan_not_active_brokers()
