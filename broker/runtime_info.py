"""The broker's runtime table (RocketMQ's ``BrokerRuntimeInfo``): what ``mqadmin brokerStatus`` shows, answered
alike by the admin gRPC service and the remoting GET_BROKER_RUNTIME_INFO."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.context import BrokerContext


def runtime_info(ctx: BrokerContext) -> dict[str, str]:
    store = ctx.store
    return {
        "brokerName": ctx.broker_name,
        "brokerId": str(ctx.config.brokerId),
        "clusterName": ctx.config.brokerClusterName,
        "brokerAddr": ctx.broker_addr,
        "flushDiskType": store.config.flushDiskType.value,
        "commitLogMinOffset": str(store.get_min_phy_offset()),
        "commitLogMaxOffset": str(store.get_max_phy_offset()),
        "dispatchBehindBytes": str(store.dispatch_behind_bytes()),
        "putMessageTotal": str(store.stats.put_messages),
        "getMessageTotal": str(store.stats.got_messages),
        "corruptRecordTotal": str(store.corrupt_records),
        "topicCount": str(len(ctx.topics.user_topics())),
        "groupCount": str(len(ctx.groups.all())),
        "clientCount": str(len(ctx.telemetry.clients())),
        "longPollingWaiting": str(ctx.long_polling.waiting),
        "timerPending": str(ctx.timer.pending if ctx.timer else 0),
        "halfMessages": str(ctx.transactions.pending if ctx.transactions else 0),
        "namesrvAddr": ctx.config.namesrvAddr,
        **(ctx.ha.runtime_info() if ctx.ha is not None else {}),
    }
