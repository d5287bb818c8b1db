"""The ACL checkpoint of every broker RPC: which resources a call touches, handed to the ACL plugins.

Without an ACL plugin (``aclEnable=false``) the check costs one attribute lookup and allows everything.
"""

from __future__ import annotations

from typing import Any

from broker.hookspecs import AccessRequest, Action, ResourceAccess, ResourceKind
from broker.plugins import BrokerPlugins
from orbitmq.v2.metadata import client_meta


def topic(name: str, action: Action) -> ResourceAccess:
    return ResourceAccess(ResourceKind.TOPIC, name, action)


def group(name: str) -> ResourceAccess:
    return ResourceAccess(ResourceKind.GROUP, name, Action.SUB)


def check(plugins: BrokerPlugins, context: Any, rpc: str, *resources: ResourceAccess) -> None:
    """Raise UNAUTHORIZED / FORBIDDEN (``MQError``) when the caller may not make this call."""
    if not plugins.has_acl:
        return
    meta = client_meta(context)
    plugins.check_access(AccessRequest(rpc, meta.headers, meta.peer_host, tuple(resources)))


def check_admin(plugins: BrokerPlugins, context: Any, rpc: str, broker_name: str) -> None:
    check(plugins, context, rpc, ResourceAccess(ResourceKind.CLUSTER, broker_name, Action.ADMIN))
