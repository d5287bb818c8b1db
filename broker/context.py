"""``BrokerContext``: the broker's shared services, handed to the gRPC servicers and the pop service.

One object instead of globals; the controller builds it once per process.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.config import BrokerConfig
from broker.consumer_offset_manager import ConsumerOffsetManager
from broker.long_polling import LongPollingService
from broker.subscription_group_manager import SubscriptionGroupManager
from broker.topic_config_manager import TopicConfigManager

if TYPE_CHECKING:
    from broker.registration import BrokerRegistrar
    from broker.store.message_store import DefaultMessageStore
    from broker.timer_service import TimerService
    from broker.transaction_service import TransactionService
    from common.v2.telemetry import TelemetryHub


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
    registrar: BrokerRegistrar | None = None  # set when name servers are configured
    timer: TimerService | None = None  # delay messages; None = refused
    transactions: TransactionService | None = None  # half messages; None = refused

    @property
    def broker_name(self) -> str:
        return self.config.brokerName

    @property
    def broker_addr(self) -> str:
        return self.config.broker_addr
