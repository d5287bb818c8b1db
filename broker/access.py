"""The ACL checkpoint of every broker RPC: which resources a call touches, handed to the ACL plugins.

Without an ACL plugin (``aclEnable=false``) the check costs one attribute lookup and allows everything.
"""

from __future__ import annotations

from typing import Any

from rocketmq.grpc_protocol import definition_pb2

from broker.hookspecs import AccessRequest, Action, ResourceAccess, ResourceKind
from broker.plugins import BrokerPlugins
from orbitmq.errors import MQError
from orbitmq.v2.metadata import ClientMeta, client_meta


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


def settings_resources(settings: definition_pb2.Settings) -> tuple[ResourceAccess, ...]:
    """What a Telemetry settings declaration claims: PUB on its publishing topics, SUB on its group and topics."""
    resources: list[ResourceAccess] = []
    if settings.HasField("publishing"):
        resources += [topic(t.name, Action.PUB) for t in settings.publishing.topics]
    if settings.HasField("subscription"):
        resources.append(group(settings.subscription.group.name))
        resources += [topic(s.topic.name, Action.SUB) for s in settings.subscription.subscriptions]
    return tuple(resources)


def check_settings(plugins: BrokerPlugins, meta: ClientMeta, settings: definition_pb2.Settings) -> None:
    """Raise FORBIDDEN / UNAUTHORIZED when the stream's caller may not declare ``settings``."""
    if not plugins.has_acl:
        return
    plugins.check_access(
        AccessRequest("Telemetry.Settings", meta.headers, meta.peer_host, settings_resources(settings))
    )


def may_publish(plugins: BrokerPlugins, meta: ClientMeta | None, topic_name: str) -> bool:
    """Whether the client behind ``meta`` may publish to ``topic_name`` now (transaction checks carry its messages)."""
    if not plugins.has_acl:
        return True
    if meta is None:
        return False
    request = AccessRequest(
        "RecoverOrphanedTransaction", meta.headers, meta.peer_host, (topic(topic_name, Action.PUB),)
    )
    try:
        plugins.check_access(request)
    except MQError:
        return False
    return True
