"""ACL on remoting as RocketMQ 4 does it (PlainAccessResource.parse): the credentials a 4.x client's AclClientRPCHook
puts in the ext fields, the content its Signature covers, and the resources each request code touches, handed to
the broker's ACL hooks (the same plugin and permissions as the v2 protocol). A refusal is NO_PERMISSION naming what
failed."""

from __future__ import annotations

import json
from typing import Any

from broker.hookspecs import AccessRequest, Action, RemotingCredentials, ResourceAccess, ResourceKind
from broker.plugins import BrokerPlugins
from orbitmq.errors import MQError
from orbitmq.remoting.codec import RemotingCommand
from orbitmq.remoting.codes import RequestCode
from orbitmq.topics import is_retry_topic, retry_topic

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
# Older clients add it after signing a QUERY_MESSAGE (MixAll.UNIQUE_MSG_QUERY_FLAG): left out of their content
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
V4_9_3 = 399  # MQVersion.Version.V4_9_3.ordinal(): the last version that signed without it

# Requests only an admin account may make (RocketMQ's Permission.needAdminPerm)
ADMIN_CODES: frozenset[int] = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.UPDATE_BROKER_CONFIG,
    }
)


def signed_content(cmd: RemotingCommand) -> bytes:
    """AclUtils.combineRequestContent: the ext field values sorted by name (Java's String order, UTF-16 units),
    ``Signature`` left out, then the body."""
    fields = {
        k: v
        for k, v in cmd.ext_fields.items()
        if k != SIGNATURE and not (k == UNIQUE_MSG_QUERY_FLAG and cmd.version <= V4_9_3)
    }
    text = "".join(fields[k] for k in sorted(fields, key=lambda k: k.encode("utf-16-be")))
    return text.encode() + cmd.body


def _topic(name: str | None, action: Action) -> list[ResourceAccess]:
    return [ResourceAccess(ResourceKind.TOPIC, name, action)] if name else []


def _group(name: str | None) -> list[ResourceAccess]:
    # RocketMQ 4 checks a group as SUB on its retry topic; the ACL plugin maps that to the group's permission
    return _topic(retry_topic(name), Action.SUB) if name else []


def resources(cmd: RemotingCommand, broker_name: str) -> tuple[ResourceAccess, ...]:
    """What a request touches, as RocketMQ 4's PlainAccessResource.parse lists it (codes it does not list are
    authenticated only)."""
    h = cmd.ext_fields
    code = cmd.code
    if code in ADMIN_CODES:
        return (ResourceAccess(ResourceKind.CLUSTER, broker_name, Action.ADMIN),)
    if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
        topic = h.get("topic") if code == RequestCode.SEND_MESSAGE else h.get("b")
        # a send to a retry topic is a consumer's: SUB, which the plugin checks on the retry topic's group
        return tuple(_topic(topic, Action.SUB if topic and is_retry_topic(topic) else Action.PUB))
    if code == RequestCode.CONSUMER_SEND_MSG_BACK:
        return tuple(_group(h.get("group")))
    if code in (
        RequestCode.PULL_MESSAGE,
        RequestCode.UPDATE_CONSUMER_OFFSET,
        RequestCode.QUERY_CONSUMER_OFFSET,
        RequestCode.POP_MESSAGE,
        RequestCode.ACK_MESSAGE,
        RequestCode.CHANGE_MESSAGE_INVISIBLETIME,
    ):
        return tuple(_topic(h.get("topic"), Action.SUB) + _group(h.get("consumerGroup")))
    if code == RequestCode.QUERY_MESSAGE:
        return tuple(_topic(h.get("topic"), Action.SUB))
    if code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        return tuple(_group(h.get("consumerGroup")))
    if code == RequestCode.HEART_BEAT:
        out: list[ResourceAccess] = []
        for consumer in _json(cmd.body).get("consumerDataSet") or []:
            out += _group(str(consumer.get("groupName", "")))
            for sub in consumer.get("subscriptionDataSet") or []:
                out += _topic(str(sub.get("topic", "")), Action.SUB)
        return tuple(out)
    if code in (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ):
        return tuple(_group(str(_json(cmd.body).get("consumerGroup", ""))))
    return ()


def credentials(cmd: RemotingCommand) -> RemotingCredentials:
    h = cmd.ext_fields
    return RemotingCredentials(
        access_key=h.get(ACCESS_KEY, ""),
        signature=h.get(SIGNATURE, ""),
        security_token=h.get(SECURITY_TOKEN, ""),
        signed_content=signed_content(cmd),
    )


def host_of(peer: str) -> str:
    return peer.rpartition(":")[0] or peer


def check(plugins: BrokerPlugins, cmd: RemotingCommand, peer: str, broker_name: str) -> None:
    """Raise UNAUTHORIZED / FORBIDDEN (``MQError``) when the caller may not make this request."""
    name = RequestCode(cmd.code).name if cmd.code in RequestCode._value2member_map_ else str(cmd.code)
    plugins.check_access(AccessRequest(name, {}, host_of(peer), resources(cmd, broker_name), remoting=credentials(cmd)))


def may_publish(plugins: BrokerPlugins, creds: RemotingCredentials | None, peer: str, topic: str) -> bool:
    """Whether the client whose signed HEART_BEAT carried ``creds`` may publish to ``topic`` (a transaction
    check-back hands it a message of that topic, as v2's check is guarded). Its heartbeat's own signed content
    authenticates it again; the ACL plugin then authorizes PUB."""
    if not plugins.has_acl:
        return True
    if creds is None:
        return False
    request = AccessRequest(
        "CHECK_TRANSACTION_STATE", {}, host_of(peer), (ResourceAccess(ResourceKind.TOPIC, topic, Action.PUB),), creds
    )
    try:
        plugins.check_access(request)
    except MQError:
        return False
    return True


def _json(body: bytes) -> dict[str, Any]:
    # a body that does not parse touches nothing here: the request's own handler refuses it naming the problem
    try:
        doc = json.loads(body or b"{}")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}
