"""``BrokerContext``: the broker's shared services, handed to the gRPC servicers and the pop service.

One object instead of globals; the controller builds it once per process.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rocketmq.grpc_protocol import definition_pb2

from broker.config import BrokerConfig
from broker.consumer_offset_manager import ConsumerOffsetManager
from broker.filter import v2_expression
from broker.long_polling import LongPollingService
from broker.queue_lock_manager import QueueLockManager
from broker.store.results import MessageFilter
from broker.subscription_group_manager import SubscriptionGroupManager
from broker.topic_config_manager import TopicConfigManager

if TYPE_CHECKING:
    from broker.consumer_filter_manager import ConsumerFilterManager
    from broker.ha.replication import Replication
    from broker.metrics.recorder import BrokerMetrics
    from broker.plugins import BrokerPlugins
    from broker.registration import BrokerRegistrar
    from broker.stats_manager import BrokerStatsManager
    from broker.store.message_store import DefaultMessageStore
    from broker.timer_service import TimerService
    from broker.transaction_service import RemoteChecker, TransactionService
    from orbitmq.v2.telemetry import TelemetryHub


@dataclass
class BrokerContext:
    config: BrokerConfig
    store: DefaultMessageStore
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    offsets: ConsumerOffsetManager
    long_polling: LongPollingService
    telemetry: TelemetryHub
    store_host: tuple[str, int]
    loop: asyncio.AbstractEventLoop
    plugins: BrokerPlugins
    filters: ConsumerFilterManager | None = None  # SQL92 registrations and Bloom bits; None = no pre-check
    registrar: BrokerRegistrar | None = None  # set when name servers are configured
    timer: TimerService | None = None  # delay messages; None = refused
    transactions: TransactionService | None = None  # half messages; None = refused
    # check-backs of other protocols than v2 (remoting's CHECK_TRANSACTION_STATE), handed to the TransactionService
    transaction_checkers: list[RemoteChecker] = field(default_factory=list)
    ha: Replication | None = None  # master/slave replication (broker/ha)
    stats: BrokerStatsManager | None = None  # statsAll's per-topic/per-group counts
    metrics: BrokerMetrics | None = None  # metrics counters; None when metricsExporterType=DISABLE
    # orderly consumers' queue leases, shared by the gRPC (LockQueues) and remoting (LOCK_BATCH_MQ) clients
    queue_locks: QueueLockManager = field(default_factory=QueueLockManager)

    def subscription_filter(
        self, group: str, topic: str, expression: definition_pb2.FilterExpression | None
    ) -> MessageFilter | None:
        """The compiled filter of a v2 subscription (None = everything), Bloom-checked for SQL92 groups."""
        spec = v2_expression(expression)
        return None if spec is None else self.compiled_filter(group, topic, *spec)

    def compiled_filter(self, group: str, topic: str, expression_type: str, expression: str) -> MessageFilter | None:
        """The compiled filter of a subscription given by type and expression (None = everything)."""
        compiled = self.plugins.compile_filter(expression_type, expression)
        if self.filters is None or compiled is None:
            return compiled
        return self.filters.filter_for(group, topic, compiled)

    @property
    def max_message_size(self) -> int:
        """``maxMessageSize``: a store key in RocketMQ, read by the send paths before the store sees a message."""
        return self.store.config.maxMessageSize

    @property
    def broker_name(self) -> str:
        return self.config.brokerName

    @property
    def broker_addr(self) -> str:
        return self.config.broker_addr
