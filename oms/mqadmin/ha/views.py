"""What the HA commands share: the replicas of each broker name with their HA state, read from each broker's
runtime info (brokerRole, brokerEpoch, syncStateSet, masterBrokerId, replication offsets and lag)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from oms.admin import models as m
from oms.errors import OMSResourceNotExistException
from oms.mqadmin.command import Admin, UsageError
from orbitmq.errors import Code

HA_KEYS = (
    "brokerRole",
    "controllerMode",
    "brokerEpoch",
    "masterBrokerId",
    "syncStateSet",
    "commitLogMaxOffset",
    "haSlaveCount",
    "haSlaveLagBytes",
)


@dataclass(frozen=True)
class Replica:
    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    ha: dict[str, str] = field(default_factory=dict, hash=False)


def replicas(args: argparse.Namespace, admin: Admin) -> list[Replica]:
    """The replicas of ``-b brokerName`` (or of every broker name of ``-c cluster``), each with its HA keys."""
    names = [n.strip() for n in (args.brokerName or "").split(",") if n.strip()]
    if not names and not args.clusterName:
        raise UsageError(f"{args.command} needs -b brokerName or -c clusterName")
    brokers: list[m.BrokerInfo] = admin.resources.cluster_list(runtime=True)
    chosen = [
        b
        for b in brokers
        if (not names or b.broker_name in names) and (not args.clusterName or b.cluster == args.clusterName)
    ]
    if not chosen:
        wanted = ", ".join(names) or f"cluster {args.clusterName!r}"
        raise OMSResourceNotExistException(Code.NOT_FOUND, f"no broker registered for {wanted}")
    return [
        Replica(b.cluster, b.broker_name, b.broker_id, b.addr, {k: b.runtime[k] for k in HA_KEYS if k in b.runtime})
        for b in chosen
    ]


def add_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-b", "--brokerName", help="broker name(s), comma-separated")
    parser.add_argument("-c", "--clusterName", help="every broker name of this cluster")
