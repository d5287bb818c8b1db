"""``ResourceManager``: topics, groups, offsets, message queries and dead-letter resend, as blocking calls.

Get one from ``access_point.resource_manager()``; it starts on first use and is a context manager.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from oms.admin import models as m
from oms.admin import servers
from oms.admin.clients import client_connections
from oms.admin.configs import (
    DEFAULT_PERM,
    DEFAULT_QUEUE_NUMS,
    DEFAULT_RETRY_MAX_TIMES,
    DEFAULT_RETRY_QUEUE_NUMS,
    GroupChanges,
    TopicChanges,
)
from oms.admin.core import MAX_QUERY_NUM, AdminCore
from oms.admin.dead_letters import resend_dead_letter
from oms.admin.offsets import clone_group_offset, skip_accumulated
from oms.client.core import Runtime
from oms.context import ClientContext
from oms.errors import OMSException
from oms.keys import OMSBuiltinKeys
from oms.keyvalue import KeyValue
from oms.lifecycle import ClientLifecycle
from orbitmq.limits import DEFAULT_OPERATION_TIMEOUT_MS

T = TypeVar("T")
log = logging.getLogger("oms.admin")

# One call fans out in steps (name server, then brokers in parallel, then a send): the blocking wait covers a few.
STEPS_PER_CALL = 5
STOP_TIMEOUT_S = 5.0


class ResourceManager(ClientLifecycle[AdminCore]):
    """Administration of the brokers behind an access point (name servers, or brokers given directly).

    Writes go to every master of ``cluster``, to one ``broker`` (name or ``host:port``), or, with neither, to every
    master broker. Failures raise the ``oms`` exception of the broker's status code.
    """

    KIND = "resource manager"
    RENEW_HINT = "get a new one"

    def __init__(self, context: ClientContext, attributes: KeyValue) -> None:
        super().__init__(context)
        timeout_ms = attributes.get_int(OMSBuiltinKeys.OPERATION_TIMEOUT, DEFAULT_OPERATION_TIMEOUT_MS)
        if timeout_ms <= 0:
            raise ValueError(f"{OMSBuiltinKeys.OPERATION_TIMEOUT} must be positive, got {timeout_ms} ms")
        self.timeout_s = timeout_ms / 1000

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def _open(self, runtime: Runtime) -> AdminCore:
        return AdminCore(runtime, self.timeout_s)

    def _close(self, core: AdminCore) -> None:
        """Close its channels; the access point and its other clients keep running."""
        self._stop_step(core, core.close, STOP_TIMEOUT_S, "closing channels")

    def _run(self, make: Any, *args: Any, **kwargs: Any) -> Any:
        """Run ``make(core, ...)`` (a coroutine function of ``AdminCore``) on the loop, starting on first use."""
        core = self.startup()._running_core()
        coro: Coroutine[Any, Any, Any] = make(core, *args, **kwargs)
        budget = self.timeout_s * STEPS_PER_CALL + 1.0
        return self._wait(core, coro, budget, f"no answer within {budget:.1f}s")

    # -- cluster ------------------------------------------------------------------------------------------------

    def uses_name_server(self) -> bool:
        """True when the access point is a name server, False when its addresses are brokers."""
        return bool(self._run(AdminCore.uses_namesrv))

    def cluster_list(self, *, runtime: bool = False) -> list[m.BrokerInfo]:
        """Every broker (masters and slaves) with its cluster and address; ``runtime`` adds BrokerRuntimeInfo."""
        brokers: list[m.BrokerInfo] = self._run(AdminCore.brokers)
        if not runtime:
            return brokers
        return [self._with_runtime(b) for b in brokers]

    def _with_runtime(self, broker: m.BrokerInfo) -> m.BrokerInfo:
        if broker.runtime:
            return broker
        try:
            info = self.broker_runtime_info(broker.addr)
        except OMSException as exc:  # a broker that does not answer is still listed, with why
            info = {"error": str(exc)}
        return m.BrokerInfo(broker.cluster, broker.broker_name, broker.broker_id, broker.addr, info)

    def broker_runtime_info(self, broker_addr: str) -> dict[str, str]:
        """BrokerRuntimeInfo of the broker at ``host:port`` (store offsets, counters, flush type...)."""
        info: dict[str, str] = self._run(AdminCore.runtime_info, broker_addr)
        return info

    # -- topics -------------------------------------------------------------------------------------------------

    def create_topic(
        self,
        topic: str,
        *,
        read_queue_nums: int = DEFAULT_QUEUE_NUMS,
        write_queue_nums: int = DEFAULT_QUEUE_NUMS,
        perm: int = DEFAULT_PERM,
        message_type: str = "NORMAL",
        order: bool = False,
        attributes: Mapping[str, str] | None = None,
        cluster: str | None = None,
        broker: str | None = None,
    ) -> list[m.TopicInfo]:
        """Create (or overwrite) ``topic`` on each target broker with exactly this configuration.

        ``attributes={"queue.type": "BatchCQ"}`` makes a BatchCQ topic (RocketMQ's ``CQType``; default SimpleCQ).
        ``queue.type`` is fixed once a topic exists: overwriting keeps it when not given, and a different value is
        refused (BAD_REQUEST, ``OMSMessageFormatException``)."""
        changes = TopicChanges(read_queue_nums, write_queue_nums, perm, message_type, order, dict(attributes or {}))
        result: list[m.TopicInfo] = self._run(
            AdminCore.upsert_topic, topic, changes, cluster, broker, merge=False, create=True
        )
        return result

    def update_topic(
        self,
        topic: str,
        *,
        read_queue_nums: int | None = None,
        write_queue_nums: int | None = None,
        perm: int | None = None,
        message_type: str | None = None,
        order: bool | None = None,
        attributes: Mapping[str, str | None] | None = None,
        cluster: str | None = None,
        broker: str | None = None,
        create: bool = False,
    ) -> list[m.TopicInfo]:
        """Change the given fields on each target broker, keeping the rest; attributes merge (None removes one).

        A broker without the topic is TOPIC_NOT_FOUND, unless ``create`` (then RocketMQ's defaults fill the rest).
        Keys may carry RocketMQ's ``+key``/``-key`` prefixes. ``queue.type`` can be set when the topic is created
        and repeated unchanged later; changing or removing it is refused before any broker is written.
        """
        changes = TopicChanges(read_queue_nums, write_queue_nums, perm, message_type, order, attributes)
        result: list[m.TopicInfo] = self._run(
            AdminCore.upsert_topic, topic, changes, cluster, broker, merge=True, create=create
        )
        return result

    def delete_topic(self, topic: str, *, cluster: str | None = None, broker: str | None = None) -> list[str]:
        """Delete ``topic`` (config, offsets, stored messages) on each target broker; returns where it was."""
        result: list[str] = self._run(AdminCore.delete_topic, topic, cluster, broker)
        return result

    def list_topics(self, *, cluster: str | None = None) -> list[str]:
        """Topic names: the name server's view (every cluster) or, with ``cluster`` or brokers only, the brokers'."""
        result: list[str] = self._run(AdminCore.list_topics, cluster)
        return result

    def topic_configs(
        self, topic: str | None = None, *, cluster: str | None = None, broker: str | None = None
    ) -> list[m.TopicInfo]:
        """Each target broker's topic configurations (one row per topic and broker)."""

        async def run(core: AdminCore) -> list[m.TopicInfo]:
            return await core.topic_configs(await core.targets(cluster, broker), topic)

        result: list[m.TopicInfo] = self._run(run)
        return result

    def topic_route(self, topic: str) -> m.TopicRoute:
        result: m.TopicRoute = self._run(AdminCore.route, topic)
        return result

    def topic_status(self, topic: str) -> m.TopicStatus:
        """Min/max offset and last store time of every queue of ``topic``, on every broker serving it."""
        result: m.TopicStatus = self._run(AdminCore.topic_status, topic)
        return result

    # -- groups -------------------------------------------------------------------------------------------------

    def create_group(
        self,
        group: str,
        *,
        retry_max_times: int = DEFAULT_RETRY_MAX_TIMES,
        orderly: bool = False,
        broadcast: bool = False,
        consume_enable: bool = True,
        retry_queue_nums: int = DEFAULT_RETRY_QUEUE_NUMS,
        allocate_strategy: str = "",
        allocate_options: Mapping[str, str] | None = None,
        cluster: str | None = None,
        broker: str | None = None,
    ) -> list[m.GroupInfo]:
        """Create (or overwrite) a subscription group on each target broker with exactly this configuration."""
        changes = GroupChanges(
            consume_enable,
            retry_max_times,
            orderly,
            broadcast,
            retry_queue_nums,
            allocate_strategy,
            dict(allocate_options or {}),
        )
        result: list[m.GroupInfo] = self._run(
            AdminCore.upsert_group, group, changes, cluster, broker, merge=False, create=True
        )
        return result

    def update_group(
        self,
        group: str,
        *,
        retry_max_times: int | None = None,
        orderly: bool | None = None,
        broadcast: bool | None = None,
        consume_enable: bool | None = None,
        retry_queue_nums: int | None = None,
        allocate_strategy: str | None = None,
        allocate_options: Mapping[str, str] | None = None,
        cluster: str | None = None,
        broker: str | None = None,
        create: bool = False,
    ) -> list[m.GroupInfo]:
        """Change the given fields, keeping the rest; a missing group is CONSUMER_GROUP_NOT_FOUND unless ``create``."""
        changes = GroupChanges(
            consume_enable, retry_max_times, orderly, broadcast, retry_queue_nums, allocate_strategy, allocate_options
        )
        result: list[m.GroupInfo] = self._run(
            AdminCore.upsert_group, group, changes, cluster, broker, merge=True, create=create
        )
        return result

    def delete_group(self, group: str, *, cluster: str | None = None, broker: str | None = None) -> list[str]:
        """Delete the group's config and committed offsets on each target broker; returns where it was."""
        result: list[str] = self._run(AdminCore.delete_group, group, cluster, broker)
        return result

    def list_groups(self, *, cluster: str | None = None, broker: str | None = None) -> list[m.GroupInfo]:
        async def run(core: AdminCore) -> list[m.GroupInfo]:
            return await core.group_configs(await core.targets(cluster, broker))

        result: list[m.GroupInfo] = self._run(run)
        return result

    def group_configs(self, group: str, *, cluster: str | None = None, broker: str | None = None) -> list[m.GroupInfo]:
        async def run(core: AdminCore) -> list[m.GroupInfo]:
            return await core.group_configs(await core.targets(cluster, broker), group)

        result: list[m.GroupInfo] = self._run(run)
        return result

    # -- offsets ------------------------------------------------------------------------------------------------

    def consumer_progress(self, group: str, topic: str | None = None) -> m.ConsumerProgress:
        """Broker offset, committed offset and lag per queue (every topic the group committed when no ``topic``)."""
        result: m.ConsumerProgress = self._run(AdminCore.consumer_progress, group, topic)
        return result

    def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int) -> list[m.OffsetReset]:
        """Commit, for every queue of ``topic``, the offset of the first message stored at or after the time."""
        result: list[m.OffsetReset] = self._run(AdminCore.reset_offset_by_time, group, topic, timestamp_ms)
        return result

    # -- messages -----------------------------------------------------------------------------------------------

    def query_message_by_id(self, msg_id: str, *, topic: str | None = None) -> list[m.MessageView]:
        """An offset message id (32 hex characters) alone, or a producer's message id with its ``topic``."""
        result: list[m.MessageView] = self._run(AdminCore.query_by_id, msg_id, topic)
        return result

    def query_message_by_key(
        self, topic: str, key: str, *, max_num: int = MAX_QUERY_NUM, begin_ms: int = 0, end_ms: int | None = None
    ) -> list[m.MessageView]:
        """The newest ``max_num`` messages of ``topic`` with ``key`` stored in [begin_ms, end_ms] (None = now), oldest
        first."""
        result: list[m.MessageView] = self._run(AdminCore.query_by_key, topic, key, max_num, begin_ms, end_ms)
        return result

    def query_message_by_offset(
        self, topic: str, queue_id: int, offset: int, *, broker: str | None = None
    ) -> m.MessageView:
        """The message at ``offset`` of one queue; ``broker`` (name or address) is needed when several serve it."""
        result: m.MessageView = self._run(AdminCore.query_by_offset, topic, queue_id, offset, broker)
        return result

    def resend_dead_letter(
        self,
        group: str,
        msg_id: str | None = None,
        *,
        broker: str | None = None,
        offset: int | None = None,
        queue_id: int = 0,
    ) -> m.ResendResult:
        """Send a message of ``%DLQ%<group>`` again to its original topic, by message id or by broker + offset.

        The resent message keeps its message id, body, tag, keys and properties; the DLQ copy is left in place.
        """
        result: m.ResendResult = self._run(resend_dead_letter, group, msg_id, broker, offset, queue_id)
        return result

    # -- clients ------------------------------------------------------------------------------------------------

    def client_connections(
        self, *, group: str | None = None, topic: str | None = None, producers: bool = False
    ) -> list[m.ClientConnection]:
        """Consumers (or ``producers``) the brokers heard from, of ``group`` and/or ``topic``; gRPC clients included."""
        result: list[m.ClientConnection] = self._run(client_connections, group, topic, producers)
        return result

    # -- offsets: chosen positions -------------------------------------------------------------------------------

    def clone_group_offset(self, source: str, target: str, topic: str) -> list[m.OffsetChange]:
        """Commit for ``target`` the offsets ``source`` committed on ``topic``."""
        result: list[m.OffsetChange] = self._run(clone_group_offset, source, target, topic)
        return result

    def skip_accumulated(self, group: str, topic: str) -> list[m.OffsetChange]:
        """Commit the end of every queue of ``topic`` for ``group``: its backlog is skipped."""
        result: list[m.OffsetChange] = self._run(skip_accumulated, group, topic)
        return result

    # -- servers' configuration ----------------------------------------------------------------------------------

    def broker_config(self, *, cluster: str | None = None, broker: str | None = None) -> dict[str, dict[str, str]]:
        """``{broker address: {key: value}}`` of the target brokers (secrets masked)."""
        result: dict[str, dict[str, str]] = self._run(servers.broker_configs, cluster, broker)
        return result

    def update_broker_config(
        self, updates: Mapping[str, str], *, cluster: str | None = None, broker: str | None = None
    ) -> dict[str, dict[str, str]]:
        """Change keys a running broker reads where it uses them; others are refused (BAD_REQUEST) naming the key."""
        result: dict[str, dict[str, str]] = self._run(servers.broker_configs, cluster, broker, dict(updates))
        return result

    def stats_all(self, topic: str | None = None) -> list[m.TopicGroupStats]:
        """Per topic (and consumer group): messages per second over the last minute and over the last 24 h, and the
        groups' backlog, summed over the master brokers (the brokers count since they started)."""
        result: list[m.TopicGroupStats] = self._run(servers.stats_all, topic)
        return result

    def acl_accounts(self) -> list[m.AclAccount]:
        """The ACL accounts of every master (access keys and permissions; secrets are never sent)."""
        result: list[m.AclAccount] = self._run(servers.acl_accounts)
        return result

    def namesrv_config(self) -> dict[str, dict[str, str]]:
        result: dict[str, dict[str, str]] = self._run(servers.namesrv_configs)
        return result

    def update_namesrv_config(self, updates: Mapping[str, str]) -> dict[str, dict[str, str]]:
        result: dict[str, dict[str, str]] = self._run(servers.namesrv_configs, dict(updates))
        return result

    def put_kv_config(self, namespace: str, key: str, value: str) -> list[str]:
        """Set a KV config entry on every name server; returns their addresses."""
        result: list[str] = self._run(servers.put_kv_config, namespace, key, value)
        return result

    def get_kv_config(self, namespace: str, key: str) -> str:
        result: str = self._run(servers.get_kv_config, namespace, key)
        return result

    def delete_kv_config(self, namespace: str, key: str) -> list[str]:
        result: list[str] = self._run(servers.delete_kv_config, namespace, key)
        return result

    def wipe_write_perm(self, broker_name: str) -> dict[str, int]:
        """Routes show ``broker_name`` read-only on every name server (drain it before a stop)."""
        result: dict[str, int] = self._run(servers.set_broker_write_perm, broker_name, False)
        return result

    def add_write_perm(self, broker_name: str) -> dict[str, int]:
        result: dict[str, int] = self._run(servers.set_broker_write_perm, broker_name, True)
        return result

    def __repr__(self) -> str:
        return f"ResourceManager({self._context!r})"
