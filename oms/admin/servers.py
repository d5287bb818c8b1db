"""The servers' own settings: broker and name-server configuration (get, runtime update), the name servers' KV
config and their write-permission marks for a broker (wipeWritePerm / addWritePerm).

Name-server writes go to every name server of the access point, as RocketMQ's admin does: they share no state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oms.admin import models as m
from oms.admin.configs import bad_request
from oms.admin.core import AdminCore, Broker, validated
from oms.client.endpoints import Endpoint
from oms.errors import OMSResourceNotExistException
from oms.url import parse_hosts
from orbitmq.errors import Code
from orbitmq.proto import admin_pb2
from orbitmq.proto import namesrv_pb2 as ns_pb
from orbitmq.proto import namesrv_pb2_grpc as ns_grpc
from orbitmq.validation import validate_topic


async def broker_configs(
    core: AdminCore, cluster: str | None, broker: str | None, updates: Mapping[str, str] | None = None
) -> dict[str, dict[str, str]]:
    """``{broker address: config}`` of the target brokers, after applying ``updates`` when given."""
    if updates is not None and not updates:
        raise bad_request("no key to update: give -k key -v value")
    brokers = await core.targets(cluster, broker)

    async def one(b: Broker) -> dict[str, str]:
        stub = core.admin_stub(b.addr)
        request = admin_pb2.BrokerConfigRequest(updates=dict(updates or {}))
        call = stub.UpdateBrokerConfig if updates else stub.GetBrokerConfig
        response = await core.admin(call, request, f"{'Update' if updates else 'Get'}BrokerConfig on {b.name}")
        return dict(response.config)

    done = core.all_ok(await core.each(brokers, one), "update broker config" if updates else "get broker config")
    return {b.addr: config for b, config in done}


def _namesrv_stubs(core: AdminCore) -> list[tuple[str, ns_grpc.NameServerStub]]:
    addrs = [f"{h}:{p}" for h, p in core.runtime.access_point.addresses]
    return [(a, ns_grpc.NameServerStub(core.runtime.pool.channel(Endpoint.of(parse_hosts(a, a))))) for a in addrs]


async def _each_namesrv(core: AdminCore, method: str, request: Any) -> dict[str, Any]:
    if not await core.uses_namesrv():
        raise bad_request(f"{method} needs name servers (-n): the access point lists brokers only")
    out: dict[str, Any] = {}
    for addr, stub in _namesrv_stubs(core):
        out[addr] = await core.namesrv_call(getattr(stub, method), request, method)
    return out


async def namesrv_configs(core: AdminCore, updates: Mapping[str, str] | None = None) -> dict[str, dict[str, str]]:
    """``{name server address: config}``, after applying ``updates`` on each when given."""
    if updates is not None and not updates:
        raise bad_request("no key to update: give -k key -v value")
    request = ns_pb.NamesrvConfigRequest(updates=dict(updates or {}))
    method = "UpdateNamesrvConfig" if updates else "GetNamesrvConfig"
    return {addr: dict(r.config) for addr, r in (await _each_namesrv(core, method, request)).items()}


async def put_kv_config(core: AdminCore, namespace: str, key: str, value: str) -> list[str]:
    _require(namespace=namespace, key=key)
    request = ns_pb.KVConfigRequest(namespace=namespace, key=key, value=value)
    return list(await _each_namesrv(core, "PutKVConfig", request))


async def delete_kv_config(core: AdminCore, namespace: str, key: str) -> list[str]:
    """Delete on every name server that has it; NOT_FOUND only when none had it."""
    _require(namespace=namespace, key=key)
    request = ns_pb.KVConfigRequest(namespace=namespace, key=key)
    done: list[str] = []
    missing: OMSResourceNotExistException | None = None
    for addr, stub in _namesrv_stubs(core):
        try:
            await core.namesrv_call(stub.DeleteKVConfig, request, "DeleteKVConfig")
            done.append(addr)
        except OMSResourceNotExistException as exc:
            missing = exc
    if not done and missing is not None:
        raise missing
    return done


async def get_kv_config(core: AdminCore, namespace: str, key: str) -> str:
    _require(namespace=namespace, key=key)
    request = ns_pb.KVConfigRequest(namespace=namespace, key=key)
    for _, stub in _namesrv_stubs(core):
        try:
            response = await core.namesrv_call(stub.GetKVConfig, request, "GetKVConfig")
        except OMSResourceNotExistException:
            continue
        return str(response.value)
    raise OMSResourceNotExistException(Code.NOT_FOUND, f"no KV config {namespace}/{key}")


async def set_broker_write_perm(core: AdminCore, broker_name: str, writable: bool) -> dict[str, int]:
    """``{name server address: topics changed}`` after wiping (or restoring) ``broker_name``'s write permission."""
    _require(broker_name=broker_name)
    request = ns_pb.BrokerWritePermRequest(broker_name=broker_name, writable=writable)
    results = await _each_namesrv(core, "UpdateBrokerWritePerm", request)
    return {addr: int(r.topic_count) for addr, r in results.items()}


def _require(**fields: str) -> None:
    for name, value in fields.items():
        if not value.strip():
            raise bad_request(f"{name} is required (got an empty value)")


async def stats_all(core: AdminCore, topic: str | None) -> list[m.TopicGroupStats]:
    """statsAll: each topic's in-traffic and its groups' out-traffic and backlog, summed over the masters."""
    if topic:
        validated(validate_topic, topic, allow_system=True)
    brokers = await core.topic_brokers(topic) if topic else await core.masters()

    async def one(b: Broker) -> list[admin_pb2.TopicStats]:
        stub = core.admin_stub(b.addr)
        response = await core.admin(
            stub.BrokerStats, admin_pb2.BrokerStatsRequest(topic=topic or ""), f"BrokerStats on {b.name}"
        )
        return list(response.topics)

    done = core.some_ok(await core.each(brokers, one), "stats", [Code.TOPIC_NOT_FOUND])
    topics: dict[str, list[float]] = {}
    groups: dict[tuple[str, str], list[float]] = {}
    for _, rows in done:
        for t in rows:
            tin = topics.setdefault(t.topic, [0.0, 0.0])
            tin[0] += t.in_tps
            tin[1] += t.in_24h
            for g in t.groups:
                acc = groups.setdefault((t.topic, g.group), [0.0, 0.0, 0.0])
                acc[0] += g.out_tps
                acc[1] += g.out_24h
                acc[2] += g.accumulation
    out: list[m.TopicGroupStats] = []
    for name in sorted(topics):
        in_tps, in_24h = topics[name]
        mine = sorted((g, v) for (t, g), v in groups.items() if t == name)
        if not mine:
            out.append(m.TopicGroupStats(name, "", round(in_tps, 2), 0.0, int(in_24h), 0, 0))
        for group, (out_tps, out_24h, accumulation) in mine:
            out.append(
                m.TopicGroupStats(
                    name, group, round(in_tps, 2), round(out_tps, 2), int(in_24h), int(out_24h), int(accumulation)
                )
            )
    return out


async def acl_accounts(core: AdminCore) -> list[m.AclAccount]:
    """Every master's ACL accounts (one row per broker and account); brokers without ACL list none."""

    async def one(b: Broker) -> list[m.AclAccount]:
        stub = core.admin_stub(b.addr)
        response = await core.admin(
            stub.ListAclAccounts, admin_pb2.AclAccountsRequest(), f"ListAclAccounts on {b.name}"
        )
        return [
            m.AclAccount(
                b.name,
                a.access_key,
                a.admin,
                a.white_remote_address,
                a.default_topic_perm,
                a.default_group_perm,
                dict(a.topic_perms),
                dict(a.group_perms),
            )
            for a in response.accounts
        ]

    done = core.all_ok(await core.each(await core.masters(), one), "list ACL accounts")
    return sorted((a for _, rows in done for a in rows), key=lambda a: (a.access_key, a.broker_name))
