"""The name server's metrics, RocketMQ 5's way (node_type="nameserver"): ``rocketmq_rpc_latency`` of every request it
answers, over gRPC (the internal service brokers register through, and the v2 QueryRoute/Heartbeat clients send) and
over remoting (4.x clients' GET_ROUTEINFO_BY_TOPIC ...). Exported by the exporter ``metricsExporterType`` names
(``orbitmq.metrics.exporters``, the same as the broker's)."""

from __future__ import annotations

from collections.abc import Callable

from orbitmq.metrics import constants as c
from orbitmq.metrics.model import Family, Labels
from orbitmq.metrics.rpc import RpcLatency

OPEN_TELEMETRY_METER_NAME = "namesrv-meter"


class NamesrvMetrics:
    """``node_id`` is read when scraped: the name server knows its address only once its port is bound."""

    def __init__(self, node_id: Callable[[], str], extra_labels: Labels) -> None:
        self.rpc = RpcLatency()
        self.node_id = node_id
        self.extra_labels = extra_labels

    def _labels(self, **labels: str) -> Labels:
        # no cluster label: a name server serves every cluster that registers with it
        return {
            c.LABEL_NODE_TYPE: c.NODE_TYPE_NAMESERVER,
            c.LABEL_NODE_ID: self.node_id(),
            **self.extra_labels,
            **labels,
        }

    def families(self) -> list[Family]:
        return list(self.rpc.families(self._labels))
