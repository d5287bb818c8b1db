"""BrokerController: builds the store, the metadata managers and the gRPC server, and runs their lifecycle.

Shutdown order matters: stop taking requests, release long polls, persist offsets/configs, then the store
(flush + checkpoint + remove the abort file) so a clean stop needs no recovery.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from typing import Any

import grpc
from rocketmq.grpc_protocol import service_pb2_grpc

from broker import access
from broker.builtin_plugins import builtin_plugins
from broker.config import BrokerSettings, GrpcServerKind
from broker.consumer_filter_manager import ConsumerFilterManager
from broker.consumer_offset_manager import ConsumerOffsetManager
from broker.context import BrokerContext
from broker.grpc.pop_batch import PopServicer
from broker.grpc.produce import ProduceServicer
from broker.grpc.pull_batch import ConsumeServicer
from broker.grpc.servicer import MessagingServicer
from broker.grpc.transports import TransportsServicer
from broker.ha.failover import FailoverAgent, FailoverConfig
from broker.ha.replication import Replication
from broker.long_polling import LongPollingService
from broker.metrics.collector import MetricsCollector
from broker.metrics.constants import OPEN_TELEMETRY_METER_NAME
from broker.metrics.recorder import BrokerMetrics
from broker.plugins import BrokerPlugins
from broker.pop.service import PopService
from broker.registration import BrokerRegistrar
from broker.remoting.processor import BrokerRemotingHandler
from broker.stats_manager import BrokerStatsManager
from broker.store.message_store import DefaultMessageStore
from broker.subscription_group_manager import SubscriptionGroupManager
from broker.timer_service import TimerService
from broker.topic_config_manager import TopicConfigManager
from broker.transaction_service import TransactionService
from orbitmq import tls
from orbitmq.cluster_auth import ClusterCredentials
from orbitmq.grpc_guard import guarded_server
from orbitmq.h2grpc import H2Server
from orbitmq.ha_state import parse_endpoints
from orbitmq.logging import get_logger
from orbitmq.metrics.exporters import Exporter, close_exporter, start_exporter
from orbitmq.metrics.model import parse_metrics_label
from orbitmq.net import bind_target, is_loopback
from orbitmq.proto import consume_pb2_grpc, pop_pb2_grpc, produce_pb2_grpc, transport_pb2_grpc
from orbitmq.remoting.grpc_frames import GrpcFrameDispatcher
from orbitmq.remoting.server import RemotingServer
from orbitmq.v2.settings import SettingsPolicy
from orbitmq.v2.telemetry import TelemetryHub

log = get_logger("broker.controller")
SHUTDOWN_GRACE_S = 2.0
GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 130 * 1024 * 1024),
    ("grpc.max_send_message_length", 130 * 1024 * 1024),
    # Without this a second broker on the same port binds silently and steals half the connections.
    ("grpc.so_reuseport", 0),
]


class BrokerController:
    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = settings
        self.config = settings.broker
        self.server: grpc.aio.Server | H2Server | None = None
        self.ctx: BrokerContext | None = None
        self.pop: PopService | None = None
        self.metrics: Exporter | None = None
        self.remoting: RemotingServer | None = None  # the 4.x clients' listener (remotingListenPort)
        self.frames_addr = ""  # where oms's framed unary calls go: the remoting listener when it is plaintext
        self.recorder: BrokerMetrics | None = None  # metrics counters; None when metricsExporterType=DISABLE
        self.port = 0
        self._tasks: list[asyncio.Task[None]] = []
        self._stopped = asyncio.Event()
        self.failover: FailoverAgent | None = None

    async def start(self) -> int:
        """Load and start everything; returns the bound gRPC port."""
        cfg, store_cfg = self.config, self.settings.store
        loop = asyncio.get_running_loop()
        root = store_cfg.root
        store_host = (cfg.brokerIP1, cfg.listenPort)
        store = DefaultMessageStore(store_cfg, store_host)
        await asyncio.to_thread(store.load)
        topics = TopicConfigManager(
            root / "config" / "topics.json", cfg.defaultTopicQueueNums, cfg.autoCreateTopicEnable
        )
        topics.load()
        groups = SubscriptionGroupManager(root / "config" / "subscriptionGroup.json", cfg.autoCreateSubscriptionGroup)
        groups.load()
        offsets = ConsumerOffsetManager(root / "config" / "consumerOffset.json")
        offsets.load()

        def fifo(group: str) -> bool:
            g = groups.get(group)
            return bool(g and g.consume_message_orderly)

        def attempts(group: str) -> int:
            g = groups.get(group)
            return (g.retry_max_times if g else 16) + 1

        policy = SettingsPolicy(
            max_body_size=store_cfg.maxMessageSize,
            fifo=fifo,
            max_delivery_attempts=attempts,
            metric_endpoints=cfg.client_metric_endpoints(),
        )
        plugins = BrokerPlugins.create(
            builtin_plugins(cfg, root), load_entry_points=cfg.loadPluginEntryPoints, disabled=cfg.disabled_plugins()
        )
        telemetry = TelemetryHub(
            policy,
            client_expired_s=cfg.clientExpireMs / 1000,
            settings_guard=lambda meta, declared: access.check_settings(plugins, meta, declared),
        )
        long_polling = LongPollingService(loop, store)
        store.add_arriving_listener(long_polling.on_arrival)
        filters = None
        if cfg.enableCalcFilterBitMap:
            filters = ConsumerFilterManager(
                root / "config" / "consumerFilter.json",
                store,
                plugins.compile_filter,
                plugins.filter_bits,
                error_rate_percent=cfg.maxErrorRateOfBloomFilter,
                expected_groups=cfg.expectConsumerNumUseFilter,
            )
            filters.load()  # registers itself as a dispatcher once a SQL92 group exists
        store.start()
        ctx = BrokerContext(
            config=cfg,
            store=store,
            topics=topics,
            groups=groups,
            offsets=offsets,
            long_polling=long_polling,
            telemetry=telemetry,
            store_host=store_host,
            loop=loop,
            plugins=plugins,
            filters=filters,
        )
        self.ctx = ctx
        ctx.ha = Replication(
            cfg,
            store,
            topics,
            groups,
            offsets,
            root / "config",
            lambda: ctx.registrar.ha_server_addr if ctx.registrar else "",
        )
        await ctx.ha.start()
        if cfg.metrics_enabled:
            self.recorder = ctx.metrics = BrokerMetrics()
            store.on_put, store.on_get = self.recorder.on_put, self.recorder.on_get
        if not cfg.is_slave and not cfg.enableControllerMode:
            await self._start_master_services(ctx)  # a slave's delays and transaction checks run on its master
        await telemetry.start()
        self.pop = PopService(ctx, self.settings.pop)
        await self.pop.start()

        recorder = self.recorder
        h2 = cfg.grpcServer is GrpcServerKind.H2
        server = guarded_server(
            H2Server(GRPC_OPTIONS) if h2 else grpc.aio.server(options=GRPC_OPTIONS),
            observer=recorder.rpc.on_grpc if recorder is not None else None,
        )
        service_pb2_grpc.add_MessagingServiceServicer_to_server(MessagingServicer(ctx, self.pop), server)
        self._add_admin(server, ctx)
        consume_pb2_grpc.add_ConsumeServicer_to_server(ConsumeServicer(ctx), server)
        produce_pb2_grpc.add_ProduceServicer_to_server(ProduceServicer(ctx), server)
        pop_pb2_grpc.add_PopServicer_to_server(PopServicer(ctx, self.pop), server)
        transport_pb2_grpc.add_TransportsServicer_to_server(TransportsServicer(lambda: self.frames_addr), server)
        credentials = cfg.server_ssl_context() if h2 else cfg.server_credentials()
        self.port = tls.add_port(server, bind_target(cfg.bind_host, cfg.listenPort), credentials)
        if cfg.listenPort == 0:
            # Port 0 in tests: advertise the real port.
            cfg.listenPort = self.port
            store.store_host = ctx.store_host = (cfg.brokerIP1, self.port)
        await server.start()
        self.server = server
        if recorder is not None:
            pop = self.pop
            collector = MetricsCollector(ctx, recorder, parse_metrics_label(cfg.metricsLabel), pop.inflight_counts)
            self.metrics = start_exporter(collector, cfg, cfg.bind_host, OPEN_TELEMETRY_METER_NAME)
        if not cfg.aclEnable and not is_loopback(cfg.bind_host):
            log.warning(
                "listening beyond this machine with ACL off: anyone who reaches the port may produce, consume and "
                "administer (set aclEnable=true, or bindAddress=127.0.0.1)",
                bind=cfg.bind_host,
                port=self.port,
            )

        remoting_addr = ""
        tls_on = cfg.server_credentials() is not None
        # frames carry no TLS: with TLS on, the plaintext listener opens only on a port the operator chose
        if cfg.remotingListenPort > 0 or (cfg.remotingListenPort == 0 and not tls_on):
            frames = GrpcFrameDispatcher(server.generic_handlers)
            observer = recorder.rpc.on_remoting if recorder is not None else None
            handler = BrokerRemotingHandler(ctx, self.pop)
            self.remoting = RemotingServer(handler, "broker", observer, frames)
            handler.attach(self.remoting)
            self._tasks.append(asyncio.create_task(handler.housekeeping(), name="remoting-clients"))
            remoting_port = await self.remoting.start(cfg.bind_host, cfg.remotingListenPort)
            remoting_addr = f"{cfg.brokerIP1}:{remoting_port}"
            if not tls_on:
                self.frames_addr = remoting_addr
        if cfg.namesrv_list():
            registrar = BrokerRegistrar(
                cfg.namesrv_list(),
                cfg.brokerClusterName,
                cfg.brokerName,
                cfg.brokerId,
                cfg.broker_addr,
                topics.user_topics,
                cfg.registerBrokerIntervalMs / 1000,
                auto_create_topic_enable=cfg.autoCreateTopicEnable,
                default_topic_queue_nums=cfg.defaultTopicQueueNums,
                credentials=ClusterCredentials.parse(cfg.innerClientAuthenticationCredentials),
                channel_credentials=cfg.channel_credentials(),
                ha_addr=ctx.ha.ha_addr,
                remoting_addr=remoting_addr,
            )
            ctx.registrar = registrar
            if cfg.enableControllerMode:
                registrar.broker_id = cfg.brokerId  # id 0 once elected master
            accepted = await registrar.start()
            topics.add_change_listener(lambda: self._spawn(registrar.register_now()))
            log.info("registered with name servers", namesrv=cfg.namesrvAddr, accepted=accepted)
        if cfg.enableControllerMode:
            self.failover = FailoverAgent(
                FailoverConfig(
                    parse_endpoints(cfg.controllerAddr),
                    cfg.brokerClusterName,
                    cfg.brokerName,
                    cfg.brokerId,
                    max(2, cfg.controllerLeaseTtlMs // 1000),
                    cfg.controllerPollIntervalMs / 1000,
                ),
                ctx.ha,
                lambda: cfg.broker_addr,
                self._on_role,
                root / "config" / "haEpoch.json",
            )
            ctx.ha.extra_info = self.failover.runtime_info
            self.failover.start()
        self._tasks.append(asyncio.create_task(self._persist_loop(), name="offset-persist"))
        self._tasks.append(asyncio.create_task(self._stats_loop(), name="stats"))
        ctx.stats = BrokerStatsManager(topics, store, ctx.offsets, self._stats_sample_s())
        self._tasks.append(asyncio.create_task(self._stats_sample_loop(ctx.stats), name="stats-sample"))
        log.info(
            "broker started",
            cluster=cfg.brokerClusterName,
            broker=cfg.brokerName,
            broker_id=cfg.brokerId,
            addr=cfg.broker_addr,
            tls=cfg.tls_server_enabled,
            store=str(root),
            flush=store_cfg.flushDiskType.value,
            recovered_records=store.stats.recovered_records,
        )
        return self.port

    async def _start_master_services(self, ctx: BrokerContext) -> None:
        root = self.settings.store.root
        cfg = self.config
        if ctx.timer is None:
            ctx.timer = TimerService(ctx.store, root / "config" / "timerProgress.json")
            await ctx.timer.start()
        if ctx.transactions is None:
            plugins = ctx.plugins
            ctx.transactions = TransactionService(
                ctx.store,
                ctx.telemetry,
                cfg.transactionTimeOut,
                cfg.transactionCheckInterval,
                cfg.transactionCheckMax,
                may_check=lambda client, topic: access.may_publish(plugins, client.meta, topic),
                remote_checkers=ctx.transaction_checkers,
            )
            if self.recorder is not None:
                ctx.transactions.on_end = self.recorder.on_transaction_end
            await ctx.transactions.start()

    async def _on_role(self, master: bool) -> None:
        """Controller mode: the agent made this broker master or slave; the name servers hear it at once."""
        ctx = self.ctx
        if ctx is None:
            return
        if master:
            await self._start_master_services(ctx)
        if ctx.registrar is not None:
            ctx.registrar.broker_id = 0 if master else self.config.brokerId
            await ctx.registrar.register_now()

    def _add_admin(self, server: grpc.aio.Server, ctx: BrokerContext) -> None:
        try:
            admin = importlib.import_module("broker.grpc.admin")
        except ModuleNotFoundError:
            return
        admin.add_admin_service(server, ctx)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.append(task)
        task.add_done_callback(lambda t: self._tasks.remove(t) if t in self._tasks else None)

    async def _persist_loop(self) -> None:
        assert self.ctx is not None
        interval = self.config.flushConsumerOffsetInterval / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                await asyncio.to_thread(self.ctx.offsets.persist_if_dirty)
            except OSError as exc:
                log.error("persisting consumer offsets failed", error=repr(exc))

    def _stats_sample_s(self) -> float:
        return max(0.05, self.config.statsSampleIntervalMs / 1000)

    async def _stats_sample_loop(self, stats: BrokerStatsManager) -> None:
        interval = self._stats_sample_s()
        while True:
            stats.sample()
            await asyncio.sleep(interval)

    async def _stats_loop(self) -> None:
        assert self.ctx is not None
        store = self.ctx.store
        interval = self.config.statsIntervalMs / 1000
        last_put, last_get, last_t = store.stats.put_messages, store.stats.got_messages, time.monotonic()
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            put, got = store.stats.put_messages, store.stats.got_messages
            elapsed = max(1e-6, now - last_t)
            log.info(
                "stats",
                tps_in=round((put - last_put) / elapsed, 1),
                tps_out=round((got - last_get) / elapsed, 1),
                commitlog_max_offset=store.get_max_phy_offset(),
                dispatch_behind_bytes=store.dispatch_behind_bytes(),
                backlog=self.backlog(),
                clients=len(self.ctx.telemetry.clients()),
                long_polling=self.ctx.long_polling.waiting,
                timer_pending=self.ctx.timer.pending if self.ctx.timer else 0,
            )
            last_put, last_get, last_t = put, got, now

    def backlog(self) -> int:
        """Messages not yet consumed, summed over every committed (group, queue)."""
        assert self.ctx is not None
        total = 0
        for tc in self.ctx.topics.user_topics():
            for group in self.ctx.offsets.groups_of_topic(tc.topic_name):
                for qid, offset in self.ctx.offsets.offsets_of(group, tc.topic_name).items():
                    total += max(0, self.ctx.store.get_max_offset_in_queue(tc.topic_name, qid) - offset)
        return total

    async def shutdown(self) -> None:
        ctx = self.ctx
        if ctx is None:
            return
        self.ctx = None
        log.info("broker stopping", broker=self.config.brokerName)
        if ctx.registrar is not None:
            await ctx.registrar.shutdown()
        ctx.long_polling.wake_all()
        if self.server is not None:
            await self.server.stop(SHUTDOWN_GRACE_S)
        if self.remoting is not None:
            await self.remoting.stop()
            self.remoting = None
        close_exporter(self.metrics)
        self.metrics = None
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.pop is not None:
            await self.pop.shutdown()
        await ctx.telemetry.stop()
        if self.failover is not None:
            await self.failover.shutdown()
        if ctx.ha is not None:
            await ctx.ha.shutdown()
        if ctx.timer is not None:
            await ctx.timer.shutdown()
        if ctx.transactions is not None:
            await ctx.transactions.shutdown()
        ctx.offsets.persist()
        ctx.groups.persist()
        ctx.topics.persist()
        if ctx.filters is not None:
            await asyncio.to_thread(ctx.filters.close)
        await asyncio.to_thread(ctx.store.shutdown)
        log.info("broker stopped", broker=self.config.brokerName)
        self._stopped.set()
