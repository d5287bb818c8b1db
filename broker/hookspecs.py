"""The broker's pluggy hook specifications and the types they speak: filters, filter bits, queue allocation, ACL
and message hooks.

Built-in behaviour (tag and SQL92 filters, the six allocators, plain ACL) is implemented through these same
hooks (``broker/builtin_plugins.py``); third-party plugins load from the ``orbitmq.plugins`` entry-point group.
This module is all a plugin needs of the broker: it imports nothing else of it, so the store's classes stay free to
change (they satisfy the protocols below structurally).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Protocol

import pluggy

PROJECT = "orbitmq"
ENTRY_POINT_GROUP = "orbitmq.plugins"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class FilterType(StrEnum):
    """Subscription expression types, as RocketMQ's ``ExpressionType`` names them."""

    TAG = "TAG"
    SQL92 = "SQL92"


# ---------------------------------------------------------------------- what hooks see of messages
class HookMessage(Protocol):
    """A message as filters and message hooks may read it (RocketMQ's ``MessageExt`` getters they use).

    ``orbitmq_before_store`` may add to ``properties``; everything else is read-only for a hook."""

    @property
    def topic(self) -> str: ...

    @property
    def queue_id(self) -> int: ...

    @property
    def body(self) -> bytes: ...

    @property
    def properties(self) -> MutableMapping[str, str]:
        """User and system properties (``TAGS``, ``KEYS``, ...) by name."""
        ...

    @property
    def born_timestamp(self) -> int:
        """When the producer created it, ms since the epoch."""
        ...

    @property
    def tags(self) -> str | None: ...

    @property
    def keys(self) -> list[str]: ...


class StoredMessage(HookMessage, Protocol):
    """A message read back from the CommitLog, as a filter's second stage sees it."""

    @property
    def store_timestamp(self) -> int:
        """When the broker stored it, ms since the epoch."""
        ...

    @property
    def queue_offset(self) -> int: ...

    @property
    def commitlog_offset(self) -> int: ...

    @property
    def reconsume_times(self) -> int: ...


class FilterBitmap(Protocol):
    """A ConsumeQueue-extension unit: the filter bits dispatch stored for the message at ``commitlog_offset``."""

    @property
    def commitlog_offset(self) -> int: ...

    @property
    def bitmap(self) -> bytes: ...


class AppendOutcome(Protocol):
    """Where a stored message landed (RocketMQ's ``AppendMessageResult``)."""

    @property
    def wrote_offset(self) -> int:
        """Its CommitLog offset."""
        ...

    @property
    def logics_offset(self) -> int:
        """Its ConsumeQueue offset (queue offset)."""
        ...

    @property
    def store_timestamp(self) -> int: ...

    @property
    def msg_id(self) -> str:
        """The offset message id."""
        ...


class StoreOutcome(Protocol):
    """The store's answer to a put (RocketMQ's ``PutMessageResult``), as ``orbitmq_after_store`` reads it."""

    @property
    def status(self) -> Enum:
        """``PUT_OK``, ``FLUSH_DISK_TIMEOUT``, ... (RocketMQ's ``PutMessageStatus`` names)."""
        ...

    @property
    def ok(self) -> bool: ...

    @property
    def append_result(self) -> AppendOutcome | None:
        """None when nothing was appended."""
        ...

    @property
    def error(self) -> str: ...


# ---------------------------------------------------------------------- filters
class CompiledFilter(Protocol):
    """A subscription compiled once; the store calls it per ConsumeQueue entry (tag hash, and the Bloom bits in
    ``cq_ext`` when the filter sets ``uses_cq_ext = True``) and per decoded message. It never raises for missing or
    mistyped properties."""

    @property
    def expression_type(self) -> str: ...

    @property
    def expression(self) -> str: ...

    @property
    def matches_all(self) -> bool: ...

    def is_matched_by_consume_queue(self, tags_code: int | None, cq_ext: FilterBitmap | None) -> bool:
        """The cheap check on the 20-byte ConsumeQueue entry; False skips the message without reading it."""
        ...

    def is_matched_by_commitlog(self, msg: StoredMessage) -> bool: ...


@dataclass(frozen=True)
class FilterRegistration:
    """A consumer group's SQL92 subscription on a topic, as the ConsumerFilterManager keeps it."""

    group: str
    topic: str
    expression_type: str
    expression: str
    filter: CompiledFilter  # the plugin's own class: a plugin recognises its filters with isinstance
    bloom_positions: tuple[int, ...]  # the group's bits in the ConsumeQueue extension bitmap
    since_commitlog_offset: int  # bits exist for messages stored at or after this offset


# ---------------------------------------------------------------------- allocation
@dataclass(frozen=True, order=True)
class QueueRef:
    """A message queue as allocation sees it: which broker, which queue (-1 = any queue of the broker).

    Ordered by (broker_name, queue_id), like RocketMQ's MessageQueue within one topic."""

    broker_name: str
    queue_id: int

    def __str__(self) -> str:
        # The same spelling as CONFIG's ``queues`` option, so logs and config read alike.
        return f"{self.broker_name}:{self.queue_id}"


# ---------------------------------------------------------------------- access control
class ResourceKind(StrEnum):
    TOPIC = "TOPIC"
    GROUP = "GROUP"
    CLUSTER = "CLUSTER"


class Action(StrEnum):
    PUB = "PUB"
    SUB = "SUB"
    ANY = "ANY"  # PUB or SUB (route queries)
    ADMIN = "ADMIN"


@dataclass(frozen=True)
class ResourceAccess:
    kind: ResourceKind
    name: str
    action: Action


@dataclass(frozen=True)
class AccountView:
    """An ACL account as administrators may see it: never its secret. Permissions are spelled as in plain_acl.yml."""

    access_key: str
    admin: bool
    white_remote_address: str
    default_topic_perm: str
    default_group_perm: str
    topic_perms: Mapping[str, str] = field(default_factory=dict)
    group_perms: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RemotingCredentials:
    """A RocketMQ 4 remoting request's credentials (its ``AccessKey``, ``Signature`` and ``SecurityToken`` ext
    fields) and ``signed_content``: what the Signature (HmacSHA1, base64) covers, the ext field values sorted by name
    without ``Signature``, then the body."""

    access_key: str
    signature: str
    security_token: str
    signed_content: bytes


@dataclass(frozen=True)
class AccessRequest:
    """What an ACL plugin needs to decide: the RPC, the caller and the resources it touches."""

    rpc: str
    headers: Mapping[str, str]  # lower-case gRPC metadata (empty for a remoting request)
    remote_ip: str
    resources: tuple[ResourceAccess, ...] = field(default_factory=tuple)
    remoting: RemotingCredentials | None = None  # set for a remoting (4.x client) request, instead of headers


class HookSpecs:
    """Every hook the broker calls. Implement them as plain functions or methods marked ``@hookimpl``."""

    @hookspec(firstresult=True)
    def orbitmq_compile_filter(self, expression_type: str, expression: str) -> CompiledFilter | None:
        """Compile a subscription expression of ``expression_type`` ("TAG", "SQL92", or a plugin's own type).

        Return None when this plugin does not handle the type; the first non-None result wins. Raise
        ``MQError(Code.ILLEGAL_FILTER_EXPRESSION, ...)`` naming the position of the error for a malformed one.
        """

    @hookspec
    def orbitmq_filter_bits(
        self,
        message: HookMessage,
        registrations: Sequence[FilterRegistration],
        bits: bytearray,
    ) -> None:
        """At dispatch, set the Bloom bits (``registration.bloom_positions``) of every registered group whose
        filter matches ``message``. ``registrations`` are those of the message's topic; each plugin handles
        the expression types it compiled. The bitmap is stored in the ConsumeQueue extension."""

    @hookspec(firstresult=True)
    def orbitmq_allocate(
        self,
        strategy: str,
        options: Mapping[str, str],
        group: str,
        current_client: str,
        queues: Sequence[QueueRef],
        clients: Sequence[str],
    ) -> list[QueueRef] | None:
        """The queues ``current_client`` of ``group`` consumes under allocation ``strategy``.

        Return None when the strategy is not yours."""

    @hookspec(firstresult=True)
    def orbitmq_authenticate(self, request: AccessRequest) -> object | None:
        """Who is calling: return a principal (any object) or raise ``MQError(Code.UNAUTHORIZED, ...)``.

        Return None to leave the decision to other plugins; with no ACL plugin every caller is anonymous."""

    @hookspec
    def orbitmq_authorize(self, request: AccessRequest, principal: object | None) -> None:
        """Raise ``MQError(Code.FORBIDDEN, ...)`` naming the resource when ``principal`` may not touch it."""

    @hookspec
    def orbitmq_acl_accounts(self) -> list[AccountView] | None:
        """The accounts an ACL plugin knows, secrets left out (the admin API and the dashboard list them)."""

    @hookspec
    def orbitmq_before_store(self, message: HookMessage) -> None:
        """Called before a produced message is stored; may add properties, or raise ``MQError`` to refuse it."""

    @hookspec
    def orbitmq_after_store(self, message: HookMessage, result: StoreOutcome) -> None:
        """Called once the store answered a produced message (metrics, tracing). Must not raise."""
