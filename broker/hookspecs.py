"""The broker's pluggy hook specifications: filters, filter bits, queue allocation, ACL and message hooks.

Built-in behaviour (tag and SQL92 filters, the six allocators, plain ACL) is implemented through these same
hooks (``broker/builtin_plugins.py``); third-party plugins load from the ``orbitmq.plugins`` entry-point group.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

import pluggy

from broker.store.results import MessageFilter

if TYPE_CHECKING:
    from broker.store.message import MessageExtBrokerInner
    from broker.store.results import PutMessageResult

PROJECT = "orbitmq"
ENTRY_POINT_GROUP = "orbitmq.plugins"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


class FilterType(StrEnum):
    """Subscription expression types, as RocketMQ's ``ExpressionType`` names them."""

    TAG = "TAG"
    SQL92 = "SQL92"


class CompiledFilter(MessageFilter, Protocol):
    """A subscription compiled once; the store calls it per ConsumeQueue entry (tag hash, Bloom bits in
    ``cq_ext``) and per decoded message. It never raises for missing or mistyped properties."""

    @property
    def expression_type(self) -> str: ...

    @property
    def expression(self) -> str: ...

    @property
    def matches_all(self) -> bool: ...


@dataclass(frozen=True)
class FilterRegistration:
    """A consumer group's SQL92 subscription on a topic, as the ConsumerFilterManager keeps it."""

    group: str
    topic: str
    expression_type: str
    expression: str
    filter: Any  # the CompiledFilter; Any so plugins may attach their own evaluate()
    bloom_positions: tuple[int, ...]  # the group's bits in the ConsumeQueue extension bitmap
    since_commitlog_offset: int  # bits exist for messages stored at or after this offset


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
class AccessRequest:
    """What an ACL plugin needs to decide: the RPC, the caller and the resources it touches."""

    rpc: str
    headers: Mapping[str, str]  # lower-case gRPC metadata
    remote_ip: str
    resources: tuple[ResourceAccess, ...] = field(default_factory=tuple)


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
        message: MessageExtBrokerInner,
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
        queues: Sequence[Any],
        clients: Sequence[str],
    ) -> list[Any] | None:
        """The queues ``current_client`` of ``group`` consumes under allocation ``strategy``.

        ``queues`` are ``plugins.allocators.QueueRef`` values; return None when the strategy is not yours."""

    @hookspec(firstresult=True)
    def orbitmq_authenticate(self, request: AccessRequest) -> Any:
        """Who is calling: return a principal (any object) or raise ``MQError(Code.UNAUTHORIZED, ...)``.

        Return None to leave the decision to other plugins; with no ACL plugin every caller is anonymous."""

    @hookspec
    def orbitmq_authorize(self, request: AccessRequest, principal: Any) -> None:
        """Raise ``MQError(Code.FORBIDDEN, ...)`` naming the resource when ``principal`` may not touch it."""

    @hookspec
    def orbitmq_before_store(self, message: MessageExtBrokerInner) -> None:
        """Called before a produced message is stored; may add properties, or raise ``MQError`` to refuse it."""

    @hookspec
    def orbitmq_after_store(self, message: MessageExtBrokerInner, result: PutMessageResult) -> None:
        """Called once the store answered a produced message (metrics, tracing). Must not raise."""
