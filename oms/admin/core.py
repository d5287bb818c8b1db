"""The resource manager's async core: name server and broker admin calls, fan-out over brokers, message queries.

Runs on the access point's loop over its channel pool; ``oms.admin.manager.ResourceManager`` is the blocking facade.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from oms.admin import models as m
from oms.admin.configs import (
    GROUPS,
    TOPICS,
    ChangesT,
    ConfigKind,
    ConfigT,
    GroupChanges,
    InfoT,
    TopicChanges,
    bad_request,
    validated,
)
from oms.admin.models import Broker
from oms.client.core import Runtime
from oms.client.endpoints import Endpoint
from oms.client.headers import HeaderBuilder
from oms.client.identity import new_client_id
from oms.client.rpc import SUCCESS_CODES
from oms.errors import (
    OMSException,
    OMSMessageFormatException,
    OMSResourceNotExistException,
    OMSRuntimeException,
    exception_for,
    from_rpc_error,
)
from oms.url import parse_hosts
from orbitmq.errors import Code, MQError
from orbitmq.msgid import OFFSET_MSG_ID_LENGTH, decode_offset_message_id
from orbitmq.proto import admin_pb2, admin_pb2_grpc
from orbitmq.proto import namesrv_pb2 as ns_pb
from orbitmq.proto import namesrv_pb2_grpc as ns_grpc
from orbitmq.validation import validate_group, validate_topic

log = logging.getLogger("oms.admin")

T = TypeVar("T")
R = TypeVar("R")

MAX_QUERY_NUM = 64  # the broker's cap per query
# a generated stub's method: request, then the call's metadata and timeout
UnaryCall = Callable[..., Awaitable[R]]


def admin_error(code: int, message: str) -> OMSException:
    """The OMS exception for an admin status; MESSAGE_NOT_FOUND is a missing resource like TOPIC_NOT_FOUND."""
    if code == Code.MESSAGE_NOT_FOUND:
        return OMSResourceNotExistException(code, message)
    return exception_for(code, message)


def check(code: int, message: str, what: str) -> None:
    if code in SUCCESS_CODES:
        return
    if code == 0:
        raise OMSRuntimeException(Code.INTERNAL_ERROR, f"{what}: the response carries no status")
    raise admin_error(code, f"{what}: {message or code}")


def _code_of(exc: BaseException) -> int:
    return int(exc.code) if isinstance(exc, OMSException) else -1


def looks_like_addr(text: str) -> bool:
    return ":" in text


def _message_view(pb: Any, broker_name: str) -> m.MessageView:
    return m.MessageView(
        topic=pb.topic,
        broker_name=broker_name,
        queue_id=pb.queue_id,
        queue_offset=pb.queue_offset,
        commitlog_offset=pb.commitlog_offset,
        msg_id=pb.msg_id,
        unique_id=pb.unique_id,
        body=bytes(pb.body),
        properties=dict(pb.properties),
        born_timestamp_ms=pb.born_timestamp_ms,
        store_timestamp_ms=pb.store_timestamp_ms,
        born_host=pb.born_host,
        store_host=pb.store_host,
        reconsume_times=pb.reconsume_times,
        store_size=pb.store_size,
    )


class AdminCore:
    """Loop-bound. Talks to the access point (name servers, or brokers directly) and to brokers' admin service,
    over the channels of the access point's pool (shared with its producers and consumers)."""

    def __init__(self, runtime: Runtime, timeout_s: float) -> None:
        self.runtime = runtime
        self.timeout_s = timeout_s
        self.headers = HeaderBuilder(new_client_id(), runtime.namespace, runtime.credentials)
        self._admin_stubs: dict[Endpoint, admin_pb2_grpc.AdminStub] = {}
        self._namesrv_stub: ns_grpc.NameServerStub | None = None
        self._uses_namesrv: bool | None = None  # learnt on the first call

    # -- transport ----------------------------------------------------------------------------------------------

    def admin_stub(self, addr: str) -> admin_pb2_grpc.AdminStub:
        """The admin service of the broker at ``host:port``."""
        endpoint = Endpoint.of(parse_hosts(addr, addr))
        stub = self._admin_stubs.get(endpoint)
        if stub is None:
            stub = self._admin_stubs[endpoint] = admin_pb2_grpc.AdminStub(self.runtime.pool.channel(endpoint))
        return stub

    def namesrv_stub(self) -> ns_grpc.NameServerStub:
        if self._namesrv_stub is None:
            self._namesrv_stub = ns_grpc.NameServerStub(self.runtime.pool.channel(self.runtime.access_point))
        return self._namesrv_stub

    async def close(self) -> None:
        """Drops its stubs; the channels stay open for the access point's other clients (its shutdown closes them)."""
        self._admin_stubs.clear()
        self._namesrv_stub = None

    async def invoke(self, call: UnaryCall[R], request: Message, what: str) -> R:
        """One unary call of a generated stub with our headers and timeout; a gRPC failure raises its OMS exception."""
        try:
            return await call(request, metadata=self.headers.build(), timeout=self.timeout_s)
        except grpc.RpcError as exc:
            raise from_rpc_error(exc, what) from None

    async def admin(self, call: UnaryCall[R], request: Message, what: str) -> R:
        """One admin call (``call`` is a method of ``admin_stub(addr)``); a status other than OK raises."""
        response: Any = await self.invoke(call, request, what)
        check(response.status.code, response.status.message, what)
        return response

    async def namesrv_call(self, call: UnaryCall[R], request: Message, method: str) -> R:
        what = f"{method} to name server {self.runtime.access_point}"
        response: Any = await self.invoke(call, request, what)
        check(response.code, response.message, what)
        return response

    async def _cluster_info(self) -> Any:
        stub = self.namesrv_stub()
        return await self.namesrv_call(stub.GetBrokerClusterInfo, ns_pb.GetClusterInfoRequest(), "GetBrokerClusterInfo")

    async def uses_namesrv(self) -> bool:
        """True when the access point is a name server; False when it lists brokers (they lack that service)."""
        if self._uses_namesrv is None:
            try:
                await self._cluster_info()
                self._uses_namesrv = True
            except OMSException as exc:
                if exc.code != Code.NOT_IMPLEMENTED:
                    raise
                self._uses_namesrv = False
        return self._uses_namesrv

    # -- brokers ------------------------------------------------------------------------------------------------

    async def runtime_info(self, addr: str) -> dict[str, str]:
        stub = self.admin_stub(addr)
        response = await self.admin(
            stub.BrokerRuntimeInfo, admin_pb2.BrokerRuntimeInfoRequest(), f"BrokerRuntimeInfo on {addr}"
        )
        return dict(response.info)

    async def brokers(self) -> list[m.BrokerInfo]:
        """Every broker: from the name server, or each address of the access point asked who it is."""
        if await self.uses_namesrv():
            info = await self._cluster_info()
            out = []
            for cluster, names in info.cluster_addr_table.items():
                for name in names.broker_names:
                    data = info.broker_addr_table.get(name)
                    for broker_id, addr in data.broker_addrs.items() if data else ():
                        out.append(m.BrokerInfo(cluster, name, int(broker_id), addr))
            return sorted(out, key=lambda b: (b.cluster, b.broker_name, b.broker_id))
        addrs = [f"{h}:{p}" for h, p in self.runtime.access_point.addresses]
        infos = await asyncio.gather(*(self.runtime_info(a) for a in addrs))
        # the address we reach it at, not the one it advertises (brokerIP1 may not be routable from here)
        return [
            m.BrokerInfo(i.get("clusterName", ""), i.get("brokerName", a), int(i.get("brokerId", "0")), a, i)
            for a, i in zip(addrs, infos, strict=True)
        ]

    async def masters(self) -> list[Broker]:
        return [Broker(b.cluster, b.broker_name, b.addr) for b in await self.brokers() if b.is_master]

    async def targets(self, cluster: str | None, broker: str | None) -> list[Broker]:
        """The master brokers a write goes to: one broker (name or address), a cluster's, or all of them."""
        if broker:
            if looks_like_addr(broker):
                for b in await self.brokers():
                    if b.addr == broker:
                        return [Broker(b.cluster, b.broker_name, b.addr)]
                # not registered under that address (or no name server): ask the broker itself
                info = await self.runtime_info(broker)
                return [Broker(info.get("clusterName", ""), info.get("brokerName", broker), broker)]
            masters = await self.masters()
            hits = [b for b in masters if b.name == broker]
            if not hits:
                known = ", ".join(sorted({b.name for b in masters})) or "none"
                raise OMSResourceNotExistException(Code.NOT_FOUND, f"no broker named {broker!r}; known: {known}")
            return hits
        masters = await self.masters()
        if cluster:
            hits = [b for b in masters if b.cluster == cluster]
            if not hits:
                known = ", ".join(sorted({b.cluster for b in masters})) or "none"
                raise OMSResourceNotExistException(Code.NOT_FOUND, f"no broker in cluster {cluster!r}; known: {known}")
            return hits
        if not masters:
            raise OMSResourceNotExistException(Code.NOT_FOUND, "no master broker is registered")
        return masters

    # -- fan-out ------------------------------------------------------------------------------------------------

    async def each(
        self, brokers: Sequence[Broker], fn: Callable[[Broker], Awaitable[T]]
    ) -> list[tuple[Broker, T | OMSException]]:
        results = await asyncio.gather(*(fn(b) for b in brokers), return_exceptions=True)
        out: list[tuple[Broker, T | OMSException]] = []
        for b, result in zip(brokers, results, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, OMSException):
                raise result  # a bug or a cancellation, not an answer from that broker
            out.append((b, result))
        return out

    @staticmethod
    def all_ok(results: list[tuple[Broker, T | OMSException]], action: str) -> list[tuple[Broker, T]]:
        """Every broker's result; one failure raises, naming the brokers where the action was already done."""
        ok = [(b, r) for b, r in results if not isinstance(r, OMSException)]
        failed = [(b, r) for b, r in results if isinstance(r, OMSException)]
        if failed:
            b, exc = failed[0]
            done = f"; done on {', '.join(x.name for x, _ in ok)}" if ok else ""
            others = f" (and {len(failed) - 1} more broker(s))" if len(failed) > 1 else ""
            raise admin_error(int(exc.code), f"{action} failed on broker {b.name}{others}: {exc.message}{done}")
        return ok

    @staticmethod
    def some_ok(
        results: list[tuple[Broker, T | OMSException]], action: str, absent: Iterable[int]
    ) -> list[tuple[Broker, T]]:
        """Answers of the brokers that have the resource; ``absent`` codes are skipped unless every broker said so."""
        skip = set(absent)
        ok = [(b, r) for b, r in results if not isinstance(r, OMSException)]
        errors = [(b, r) for b, r in results if isinstance(r, OMSException)]
        real = [(b, e) for b, e in errors if _code_of(e) not in skip]
        if real:
            b, exc = real[0]
            raise admin_error(int(exc.code), f"{action} failed on broker {b.name}: {exc.message}")
        if not ok and errors:
            b, exc = errors[0]
            raise admin_error(int(exc.code), exc.message)
        return ok

    # -- topics and groups: one list/upsert/delete path ------------------------------------------------------

    async def configs(
        self, kind: ConfigKind[InfoT, ChangesT, ConfigT], brokers: Sequence[Broker], name: str | None
    ) -> list[InfoT]:
        """Each broker's configs of this kind (only ``name``'s when given), sorted by name and broker."""

        async def one(b: Broker) -> list[InfoT]:
            return [c for c in await kind.read(self, b) if name is None or kind.name_of(c) == name]

        rows = [c for _, cs in self.all_ok(await self.each(brokers, one), f"list {kind.noun}s") for c in cs]
        return sorted(rows, key=lambda c: (kind.name_of(c), c.broker_name))

    async def upsert(
        self,
        kind: ConfigKind[InfoT, ChangesT, ConfigT],
        name: str,
        changes: ChangesT,
        cluster: str | None,
        broker: str | None,
        *,
        merge: bool,
        create: bool,
    ) -> list[InfoT]:
        """Write ``changes`` to the target brokers: over each one's current config with ``merge`` (a broker without
        it is refused unless ``create``), else over the defaults."""
        kind.validate(name)
        kind.merge(name, None, changes)  # bad values fail before any broker is touched
        targets = await self.targets(cluster, broker)
        current: dict[str, InfoT] = {}
        if merge:
            current = {c.broker_name: c for c in await self.configs(kind, targets, name)}
        # every broker's config is checked (an immutable queue.type...) before the first one is written
        configs = {b.name: kind.merge(name, current.get(b.name), changes) for b in targets}

        async def one(b: Broker) -> InfoT:
            if merge and b.name not in current and not create:
                raise OMSResourceNotExistException(
                    kind.not_found, f"{kind.noun} {name!r} does not exist on broker {b.name}"
                )
            return await kind.write(self, b, configs[b.name])

        done = self.all_ok(await self.each(targets, one), f"update {kind.noun} {name!r}")
        return sorted((c for _, c in done), key=lambda c: c.broker_name)

    async def delete(
        self, kind: ConfigKind[InfoT, ChangesT, ConfigT], name: str, cluster: str | None, broker: str | None
    ) -> list[str]:
        """Delete ``name`` on the target brokers; returns the brokers that had it."""
        kind.validate(name, allow_system=True)
        targets = await self.targets(cluster, broker)

        async def one(b: Broker) -> str:
            await kind.remove(self, b, name)
            return b.name

        done = self.some_ok(await self.each(targets, one), f"delete {kind.noun} {name!r}", [kind.not_found])
        return sorted(b for _, b in done)

    async def topic_configs(self, brokers: Sequence[Broker], topic: str | None = None) -> list[m.TopicInfo]:
        return await self.configs(TOPICS, brokers, topic)

    async def upsert_topic(
        self, topic: str, changes: TopicChanges, cluster: str | None, broker: str | None, *, merge: bool, create: bool
    ) -> list[m.TopicInfo]:
        return await self.upsert(TOPICS, topic, changes, cluster, broker, merge=merge, create=create)

    async def delete_topic(self, topic: str, cluster: str | None, broker: str | None) -> list[str]:
        return await self.delete(TOPICS, topic, cluster, broker)

    async def group_configs(self, brokers: Sequence[Broker], group: str | None = None) -> list[m.GroupInfo]:
        return await self.configs(GROUPS, brokers, group)

    async def upsert_group(
        self, group: str, changes: GroupChanges, cluster: str | None, broker: str | None, *, merge: bool, create: bool
    ) -> list[m.GroupInfo]:
        return await self.upsert(GROUPS, group, changes, cluster, broker, merge=merge, create=create)

    async def delete_group(self, group: str, cluster: str | None, broker: str | None) -> list[str]:
        return await self.delete(GROUPS, group, cluster, broker)

    # -- topics -------------------------------------------------------------------------------------------------

    async def list_topics(self, cluster: str | None) -> list[str]:
        if cluster is None and await self.uses_namesrv():
            stub = self.namesrv_stub()
            response = await self.namesrv_call(stub.GetAllTopicList, ns_pb.GetAllTopicListRequest(), "GetAllTopicList")
            return sorted(set(response.topics))
        return sorted({t.topic for t in await self.topic_configs(await self.targets(cluster, None))})

    async def route(self, topic: str) -> m.TopicRoute:
        validated(validate_topic, topic, allow_system=True)
        if await self.uses_namesrv():
            request = ns_pb.GetRouteInfoRequest(topic=topic)
            r = await self.namesrv_call(self.namesrv_stub().GetRouteInfoByTopic, request, "GetRouteInfoByTopic")
            queue_datas = tuple(
                m.QueueData(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm, q.message_type or "NORMAL")
                for q in r.queue_datas
            )
            broker_datas = tuple(
                m.BrokerData(b.cluster, b.broker_name, {int(k): v for k, v in b.broker_addrs.items()})
                for b in r.broker_datas
            )
        else:
            brokers = await self.brokers()
            configs = await self.topic_configs([Broker(b.cluster, b.broker_name, b.addr) for b in brokers], topic)
            if not configs:
                raise OMSResourceNotExistException(Code.TOPIC_NOT_FOUND, f"no broker has topic {topic!r}")
            on = {t.broker_name for t in configs}
            queue_datas = tuple(
                m.QueueData(t.broker_name, t.read_queue_nums, t.write_queue_nums, t.perm, t.message_type)
                for t in configs
            )
            broker_datas = tuple(
                m.BrokerData(b.cluster, b.broker_name, {b.broker_id: b.addr}) for b in brokers if b.broker_name in on
            )
        return m.TopicRoute(
            topic,
            tuple(sorted(queue_datas, key=lambda q: q.broker_name)),
            tuple(sorted(broker_datas, key=lambda b: b.broker_name)),
        )

    async def topic_brokers(self, topic: str, *, fallback: bool = False) -> list[Broker]:
        """The masters serving ``topic``; with ``fallback``, every master when no route exists (internal topics
        such as ``%DLQ%group`` reach the name server only at the broker's next registration)."""
        try:
            route = await self.route(topic)
        except OMSResourceNotExistException:
            if not fallback:
                raise
            return await self.masters()
        on = {q.broker_name for q in route.queue_datas}
        out = [
            Broker(b.cluster, b.broker_name, b.master_addr)
            for b in route.broker_datas
            if b.broker_name in on and b.master_addr
        ]
        if not out:
            raise OMSResourceNotExistException(Code.TOPIC_NOT_FOUND, f"topic {topic!r} has no master broker")
        return out

    async def topic_status(self, topic: str) -> m.TopicStatus:
        brokers = await self.topic_brokers(topic)

        async def one(b: Broker) -> list[m.QueueStatus]:
            request = admin_pb2.TopicStatusRequest(topic=topic)
            stub = self.admin_stub(b.addr)
            response = await self.admin(stub.TopicStatus, request, f"TopicStatus on {b.name}")
            return [
                m.QueueStatus(b.name, q.queue_id, q.min_offset, q.max_offset, q.last_update_timestamp_ms)
                for q in response.queues
            ]

        done = self.some_ok(await self.each(brokers, one), f"status of {topic!r}", [Code.TOPIC_NOT_FOUND])
        rows = sorted((q for _, qs in done for q in qs), key=lambda q: (q.broker_name, q.queue_id))
        return m.TopicStatus(topic, tuple(rows))

    # -- offsets ------------------------------------------------------------------------------------------------

    async def consumer_progress(self, group: str, topic: str | None) -> m.ConsumerProgress:
        validated(validate_group, group)
        brokers = await self.topic_brokers(topic) if topic else await self.masters()

        async def one(b: Broker) -> list[m.QueueProgress]:
            request = admin_pb2.ConsumerProgressRequest(group=group, topic=topic or "")
            stub = self.admin_stub(b.addr)
            response = await self.admin(stub.ConsumerProgress, request, f"ConsumerProgress on {b.name}")
            return [
                m.QueueProgress(q.topic, b.name, q.queue_id, q.broker_offset, q.consumer_offset, q.lag)
                for q in response.queues
            ]

        done = self.some_ok(await self.each(brokers, one), f"progress of {group!r}", [Code.TOPIC_NOT_FOUND])
        rows = sorted((q for _, qs in done for q in qs), key=lambda q: (q.topic, q.broker_name, q.queue_id))
        return m.ConsumerProgress(group, tuple(rows))

    async def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int) -> list[m.OffsetReset]:
        validated(validate_group, group)
        validated(validate_topic, topic, allow_system=True)
        if timestamp_ms < 0:
            raise bad_request(f"timestamp must be >= 0 ms, got {timestamp_ms}")
        brokers = await self.topic_brokers(topic)

        async def one(b: Broker) -> list[m.OffsetReset]:
            request = admin_pb2.ResetOffsetByTimeRequest(group=group, topic=topic, timestamp_ms=timestamp_ms)
            stub = self.admin_stub(b.addr)
            response = await self.admin(stub.ResetOffsetByTime, request, f"ResetOffsetByTime on {b.name}")
            return [m.OffsetReset(topic, b.name, qid, offset) for qid, offset in response.offsets.items()]

        done = self.all_ok(await self.each(brokers, one), f"reset offsets of {group!r} on {topic!r}")
        return sorted((r for _, rs in done for r in rs), key=lambda r: (r.broker_name, r.queue_id))

    # -- messages -----------------------------------------------------------------------------------------------

    async def broker_named(self, brokers: Sequence[Broker], name: str) -> Broker:
        """The broker of that name (looked up in ``brokers``, then among the masters) or at that address."""
        if looks_like_addr(name):
            return (await self.targets(None, name))[0]
        for b in brokers:
            if b.name == name:
                return b
        for b in await self.masters():
            if b.name == name:
                return b
        raise OMSResourceNotExistException(Code.NOT_FOUND, f"no broker named {name!r}")

    async def query_by_id(self, msg_id: str, topic: str | None, broker: str | None = None) -> list[m.MessageView]:
        msg_id = msg_id.strip()
        if not msg_id:
            raise OMSMessageFormatException(Code.ILLEGAL_MESSAGE_ID, "message id is blank")
        if topic:
            validated(validate_topic, topic, allow_system=True)
        offset_id = len(msg_id) == OFFSET_MSG_ID_LENGTH
        brokers: list[Broker] = []
        if broker:
            brokers = [await self.broker_named([], broker)]
        elif offset_id:
            try:
                decoded = decode_offset_message_id(msg_id)
                store = f"{decoded.host}:{decoded.port}"
                brokers = [Broker(b.cluster, b.broker_name, b.addr) for b in await self.brokers() if b.addr == store]
            except MQError:
                brokers = []  # 32 characters but not hex: it can still be a unique id of that length
        if not brokers:
            brokers = await self.topic_brokers(topic, fallback=True) if topic else await self.masters()

        async def one(b: Broker) -> list[m.MessageView]:
            request = admin_pb2.QueryMessageByIdRequest(msg_id=msg_id, topic=topic or "")
            stub = self.admin_stub(b.addr)
            response = await self.admin(stub.QueryMessageById, request, f"QueryMessageById on {b.name}")
            return [_message_view(v, b.name) for v in response.messages]

        results = await self.each(brokers, one)
        done = self.some_ok(results, f"query {msg_id!r}", [Code.MESSAGE_NOT_FOUND, Code.TOPIC_NOT_FOUND])
        views = [v for _, vs in done for v in vs]
        if not views:
            where = f" in topic {topic!r}" if topic else ""
            raise OMSResourceNotExistException(Code.MESSAGE_NOT_FOUND, f"no message with id {msg_id!r}{where}")
        return sorted(views, key=lambda v: (v.store_timestamp_ms, v.broker_name))

    async def query_by_key(
        self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int | None
    ) -> list[m.MessageView]:
        validated(validate_topic, topic, allow_system=True)
        if not key.strip():
            raise OMSMessageFormatException(Code.ILLEGAL_MESSAGE_KEY, "message key is blank")
        if not 0 < max_num <= MAX_QUERY_NUM:
            raise bad_request(f"max_num must be in 1..{MAX_QUERY_NUM}, got {max_num}")
        brokers = await self.topic_brokers(topic, fallback=True)

        async def one(b: Broker) -> list[m.MessageView]:
            request = admin_pb2.QueryMessageByKeyRequest(
                topic=topic, key=key, max_num=max_num, begin_timestamp_ms=begin_ms, end_timestamp_ms=end_ms or 0
            )
            stub = self.admin_stub(b.addr)
            response = await self.admin(stub.QueryMessageByKey, request, f"QueryMessageByKey on {b.name}")
            return [_message_view(v, b.name) for v in response.messages]

        done = self.some_ok(await self.each(brokers, one), f"query key {key!r}", [Code.TOPIC_NOT_FOUND])
        views = sorted((v for _, vs in done for v in vs), key=lambda v: (v.store_timestamp_ms, v.broker_name))
        return views[-max_num:]  # brokers walk their index newest first: keep the newest overall

    async def query_by_offset(self, topic: str, queue_id: int, offset: int, broker: str | None) -> m.MessageView:
        validated(validate_topic, topic, allow_system=True)
        if queue_id < 0 or offset < 0:
            raise bad_request(f"queue id and offset must be >= 0, got {queue_id} and {offset}")
        brokers = await self.topic_brokers(topic, fallback=True)
        if broker:
            target = await self.broker_named(brokers, broker)
        elif len(brokers) == 1:
            target = brokers[0]
        else:
            names = ", ".join(sorted(b.name for b in brokers))
            raise bad_request(f"topic {topic!r} is on brokers {names}: say which broker")
        request = admin_pb2.QueryMessageByOffsetRequest(topic=topic, queue_id=queue_id, offset=offset)
        what = f"QueryMessageByOffset on {target.name}"
        stub = self.admin_stub(target.addr)
        response = await self.admin(stub.QueryMessageByOffset, request, what)
        return _message_view(response.messages[0], target.name)
