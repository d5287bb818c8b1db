"""Broker -> name server registration (RocketMQ's BrokerOuterAPI): a session per name server, heartbeat ticks.

Registers with EVERY name server at start and every interval; a name server that is down is retried next tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import grpc

from orbitmq import limits, tls
from orbitmq.cluster_auth import ClusterCredentials
from orbitmq.errors import Code
from orbitmq.logging import get_logger
from orbitmq.proto import namesrv_pb2 as pb
from orbitmq.proto import namesrv_pb2_grpc as pb_grpc
from orbitmq.route import ClusterInfo, GroupPolicy, TopicConfig, TopicRouteData
from orbitmq.route_proto import (
    cluster_info_from_proto,
    group_policy_to_proto,
    route_from_proto,
    topic_config_to_proto,
)

log = get_logger("broker.registration")


def parse_namesrv_addrs(addrs: str | Sequence[str]) -> list[str]:
    """``"a:9876;b:9876"`` or a list (entries may themselves hold ``;``) -> clean ``host:port`` list."""
    items = [addrs] if isinstance(addrs, str) else list(addrs)
    result: list[str] = []
    for item in items:
        for part in item.replace(",", ";").split(";"):
            part = part.strip()
            if part and part not in result:
                result.append(part)
    return result


@dataclass
class _Link:
    """The connection to one name server and its BrokerSession stream (reopened after failures)."""

    addr: str
    channel: grpc.aio.Channel
    stub: pb_grpc.NameServerStub
    call: grpc.aio.StreamStreamCall | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    healthy: bool = False
    last_result: pb.RegisterBrokerResult | None = None

    def close_call(self) -> None:
        if self.call is not None:
            self.call.cancel()
            self.call = None


class BrokerRegistrar:
    """Keeps one broker registered with all name servers; also asks them for routes and cluster info.

    ``group_policies`` (optional) reports subscription groups' fifo flag and max delivery attempts, so a name
    server used as the client's access point gives the same Telemetry settings the broker would.
    """

    def __init__(
        self,
        namesrv_addrs: Sequence[str] | str,
        cluster: str,
        broker_name: str,
        broker_id: int,
        broker_addr: str,
        topic_configs: Callable[[], list[TopicConfig]],
        interval_s: float = limits.BROKER_REGISTER_INTERVAL_S,
        *,
        ha_addr: str = "",
        auto_create_topic_enable: bool = False,
        default_topic_queue_nums: int = 4,
        timeout_s: float = limits.REGISTER_TIMEOUT_S,
        group_policies: Callable[[], list[GroupPolicy]] | None = None,
        credentials: ClusterCredentials | None = None,
        channel_credentials: grpc.ChannelCredentials | None = None,
        remoting_addr: str = "",
    ) -> None:
        self.namesrv_addrs = parse_namesrv_addrs(namesrv_addrs)
        self.remoting_addr = remoting_addr  # the remoting listener 4.x clients use, if any
        self.cluster = cluster
        self.broker_name = broker_name
        self.broker_id = broker_id
        self.broker_addr = broker_addr
        self.ha_addr = ha_addr
        self.auto_create_topic_enable = auto_create_topic_enable
        self.default_topic_queue_nums = default_topic_queue_nums
        self._topic_configs = topic_configs
        self._group_policies = group_policies
        self.credentials = credentials
        self.channel_credentials = channel_credentials  # TLS towards the name servers (tlsEnable)
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._links: list[_Link] = []
        self._task: asyncio.Task[None] | None = None
        self._data_version = 0
        self._fingerprint = ""
        self._closed = False
        self._pending: set[asyncio.Task[None]] = set()

    # -- lifecycle ----------------------------------------------------------------------------------------------

    async def start(self) -> int:
        """Connect to every name server and register once; returns how many accepted (0 is not an error)."""
        if self._task is not None:
            return sum(link.healthy for link in self._links)
        for addr in self.namesrv_addrs:
            channel = tls.channel(addr, self.channel_credentials, self._channel_options())
            self._links.append(_Link(addr, channel, pb_grpc.NameServerStub(channel)))
        accepted = await self.register_now()
        self._task = asyncio.create_task(self._tick_loop(), name=f"register-{self.broker_name}")
        return accepted

    async def register_now(self) -> int:
        """Register with every name server now (call after topic changes); returns how many accepted."""
        registration = self._registration()
        results = await asyncio.gather(*(self._register_on(link, registration) for link in self._links))
        return sum(results)

    async def shutdown(self) -> None:
        """Stop the heartbeat, unregister from every name server (best effort) and close the channels."""
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        for task in list(self._pending):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        request = pb.UnregisterBrokerRequest(
            cluster_name=self.cluster,
            broker_name=self.broker_name,
            broker_id=self.broker_id,
            broker_addr=self.broker_addr,
        )
        for link in self._links:
            try:
                result = await link.stub.UnregisterBroker(request, timeout=self.timeout_s, metadata=self._metadata())
            except grpc.aio.AioRpcError as exc:
                log.warning("unregister failed", namesrv=link.addr, error=exc.code().name)
            else:
                if result.code not in (Code["OK"], Code["NOT_FOUND"]):  # NOT_FOUND: the session end removed it
                    log.warning("unregister failed", namesrv=link.addr, code=result.code, reason=result.message)
            link.close_call()
            await link.channel.close()

    # -- queries ------------------------------------------------------------------------------------------------

    @property
    def healthy_namesrvs(self) -> list[str]:
        return [link.addr for link in self._links if link.healthy]

    @property
    def master_addr(self) -> str:
        """The group's master address as the name servers see it (useful to a slave); empty if unknown."""
        for link in self._links:
            if link.last_result is not None and link.last_result.master_addr:
                return link.last_result.master_addr
        return ""

    @property
    def ha_server_addr(self) -> str:
        for link in self._links:
            if link.last_result is not None and link.last_result.ha_server_addr:
                return link.last_result.ha_server_addr
        return ""

    async def get_route(self, topic: str) -> TopicRouteData | None:
        """The topic's route from the first name server that answers; None if unknown or none answers."""
        for link in self._ordered_links():
            try:
                resp = await link.stub.GetRouteInfoByTopic(pb.GetRouteInfoRequest(topic=topic), timeout=self.timeout_s)
            except grpc.aio.AioRpcError as exc:
                log.debug("route query failed", namesrv=link.addr, topic=topic, error=exc.code().name)
                continue
            if resp.code == Code["OK"]:
                return route_from_proto(resp)
            return None
        return None

    async def cluster_info(self) -> ClusterInfo | None:
        for link in self._ordered_links():
            try:
                resp = await link.stub.GetBrokerClusterInfo(pb.GetClusterInfoRequest(), timeout=self.timeout_s)
            except grpc.aio.AioRpcError as exc:
                log.debug("cluster info query failed", namesrv=link.addr, error=exc.code().name)
                continue
            return cluster_info_from_proto(resp)
        return None

    # -- internals ----------------------------------------------------------------------------------------------

    def _channel_options(self) -> list[tuple[str, int]]:
        # gRPC's default reconnect backoff grows to 120 s: a restarted name server would wait that long
        backoff_ms = int(max(0.1, min(self.interval_s, 5.0)) * 1000)
        return [
            ("grpc.initial_reconnect_backoff_ms", min(backoff_ms, 1000)),
            ("grpc.min_reconnect_backoff_ms", min(backoff_ms, 1000)),
            ("grpc.max_reconnect_backoff_ms", backoff_ms),
            ("grpc.use_local_subchannel_pool", 1),
        ]

    def _metadata(self) -> tuple[tuple[str, str], ...]:
        """Signed headers for a write call (fresh date: name servers refuse old signatures)."""
        return tuple(self.credentials.metadata()) if self.credentials else ()

    def _ordered_links(self) -> list[_Link]:
        # healthy ones first so a dead name server costs nothing while another answers
        return sorted(self._links, key=lambda link: not link.healthy)

    def _registration(self) -> pb.BrokerRegistration:
        configs = [topic_config_to_proto(c) for c in self._topic_configs()]
        groups = [group_policy_to_proto(g) for g in (self._group_policies() if self._group_policies else [])]
        digest = hashlib.sha1()
        for config in sorted(configs, key=lambda c: c.topic_name):
            digest.update(config.SerializeToString(deterministic=True))
        for group in sorted(groups, key=lambda g: g.group_name):
            digest.update(group.SerializeToString(deterministic=True))
        fingerprint = digest.hexdigest()
        if fingerprint != self._fingerprint:
            self._fingerprint = fingerprint
            self._data_version += 1
        return pb.BrokerRegistration(
            cluster_name=self.cluster,
            broker_name=self.broker_name,
            broker_id=self.broker_id,
            broker_addr=self.broker_addr,
            ha_addr=self.ha_addr,
            topic_configs=configs,
            data_version=self._data_version,
            auto_create_topic_enable=self.auto_create_topic_enable,
            default_topic_queue_nums=self.default_topic_queue_nums,
            group_policies=groups,
            remoting_addr=self.remoting_addr,
        )

    async def _register_on(self, link: _Link, registration: pb.BrokerRegistration) -> bool:
        async with link.lock:
            try:
                if link.call is None:
                    link.call = link.stub.BrokerSession(metadata=self._metadata())
                    link.call.add_done_callback(lambda call, link=link: self._on_session_done(link, call))
                await asyncio.wait_for(link.call.write(registration), self.timeout_s)
                result = await asyncio.wait_for(link.call.read(), self.timeout_s)
            except (TimeoutError, asyncio.InvalidStateError, grpc.aio.AioRpcError, grpc.aio.UsageError) as exc:
                # InvalidStateError: the name server ended the session (e.g. it stopped) before our write
                self._mark_down(link, repr(exc) if not isinstance(exc, grpc.aio.AioRpcError) else exc.code().name)
                return False
            if result is grpc.aio.EOF or not isinstance(result, pb.RegisterBrokerResult):
                self._mark_down(link, "session closed by name server")
                return False
            if result.code != Code["OK"]:
                self._mark_down(link, f"{result.code} {result.message}")
                return False
            if not link.healthy:
                log.info("registered with name server", namesrv=link.addr, broker=self.broker_name)
            link.healthy = True
            link.last_result = result
            return True

    def _on_session_done(self, link: _Link, call: object) -> None:
        """The name server ended a live session (e.g. it restarted): re-register soon instead of next tick.

        Only for a session that was healthy, so a name server that stays down costs a few retries, not a loop.
        """
        if self._closed or link.call is not call or not link.healthy:
            return
        link.call = None
        link.healthy = False
        log.warning("name server session lost", namesrv=link.addr)
        task = asyncio.get_running_loop().create_task(self._recover(link))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _recover(self, link: _Link) -> None:
        # retry after 1, 2, 4... s while that is sooner than the next regular tick
        delay = limits.SESSION_RETRY_DELAY_S
        while delay < self.interval_s and not self._closed:
            await asyncio.sleep(delay)
            if link.healthy or await self._register_on(link, self._registration()):
                return
            delay *= 2

    def _mark_down(self, link: _Link, reason: str) -> None:
        if link.healthy or link.call is not None:
            log.warning("name server registration failed", namesrv=link.addr, reason=reason)
        link.healthy = False
        link.close_call()

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.register_now()
            except Exception as exc:  # a bug in one tick must not stop the heartbeat forever
                log.exception("registration tick failed", error=repr(exc))
