"""The broker's plugin manager: built-in plugins, third-party ones from entry points, and typed calls.

Everything filter-, allocation- and ACL-related goes through here, so built-ins and third-party plugins are equal.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence

import pluggy

from broker import hookspecs
from broker.hookspecs import (
    AccessRequest,
    AccountView,
    CompiledFilter,
    FilterRegistration,
    HookMessage,
    QueueRef,
    StoreOutcome,
)
from orbitmq.errors import Code, MQError
from orbitmq.logging import get_logger

log = get_logger("broker.plugins")

FILTER_CACHE_SIZE = 4096  # compiled expressions kept; an expression compiles once per subscription


class BrokerPlugins:
    """A ``pluggy.PluginManager`` with the broker's hookspecs and one typed method per hook call."""

    def __init__(self, pm: pluggy.PluginManager) -> None:
        self.pm = pm
        self.compile_filter = functools.lru_cache(maxsize=FILTER_CACHE_SIZE)(self._compile_filter)
        self.has_before_store = bool(pm.hook.orbitmq_before_store.get_hookimpls())
        self.has_after_store = bool(pm.hook.orbitmq_after_store.get_hookimpls())
        self.has_acl = bool(pm.hook.orbitmq_authenticate.get_hookimpls() or pm.hook.orbitmq_authorize.get_hookimpls())

    @classmethod
    def create(
        cls,
        builtins: Iterable[tuple[str, object]] = (),
        *,
        load_entry_points: bool = True,
        disabled: Iterable[str] = (),
    ) -> BrokerPlugins:
        pm = pluggy.PluginManager(hookspecs.PROJECT)
        pm.add_hookspecs(hookspecs.HookSpecs)
        for name in disabled:
            pm.set_blocked(name)  # blocked names are skipped by register() and load_setuptools_entrypoints()
        for name, plugin in builtins:
            pm.register(plugin, name=name)
        if load_entry_points:
            pm.load_setuptools_entrypoints(hookspecs.ENTRY_POINT_GROUP)
        plugins = cls(pm)
        log.info("plugins loaded", plugins=plugins.names(), disabled=sorted(disabled))
        return plugins

    def names(self) -> list[str]:
        return sorted(name for name, _ in self.pm.list_name_plugin() if name)

    # ------------------------------------------------------------------ filters
    def _compile_filter(self, expression_type: str, expression: str) -> CompiledFilter | None:
        """The compiled filter, None when it matches everything; ILLEGAL_FILTER_EXPRESSION for unknown types."""
        compiled = self.pm.hook.orbitmq_compile_filter(expression_type=expression_type, expression=expression)
        if compiled is None:
            raise MQError(
                Code.ILLEGAL_FILTER_EXPRESSION,
                f"filter expression type {expression_type!r} is not supported by this broker "
                f"(no enabled plugin compiles it)",
            )
        return None if compiled.matches_all else compiled

    def filter_bits(self, message: HookMessage, registrations: Sequence[FilterRegistration], bits: bytearray) -> None:
        self.pm.hook.orbitmq_filter_bits(message=message, registrations=registrations, bits=bits)

    # ------------------------------------------------------------------ allocation
    def allocate(
        self,
        strategy: str,
        options: Mapping[str, str],
        group: str,
        current_client: str,
        queues: Sequence[QueueRef],
        clients: Sequence[str],
    ) -> list[QueueRef]:
        result = self.pm.hook.orbitmq_allocate(
            strategy=strategy,
            options=options,
            group=group,
            current_client=current_client,
            queues=queues,
            clients=clients,
        )
        if result is None:
            raise MQError(Code.BAD_REQUEST, f"allocation strategy {strategy!r} of group {group!r} is not known")
        return list(result)

    # ------------------------------------------------------------------ ACL
    def check_access(self, request: AccessRequest) -> object | None:
        """Authenticate then authorize; raises UNAUTHORIZED / FORBIDDEN as the plugins decide."""
        try:
            principal: object | None = self.pm.hook.orbitmq_authenticate(request=request)
            self.pm.hook.orbitmq_authorize(request=request, principal=principal)
        except MQError as exc:
            log.warning(
                "access refused", rpc=request.rpc, remote=request.remote_ip, code=exc.code.name, reason=exc.message
            )
            raise
        return principal

    def acl_accounts(self) -> list[AccountView]:
        """Every ACL plugin's accounts (none without an ACL plugin), secrets left out."""
        return [account for accounts in self.pm.hook.orbitmq_acl_accounts() for account in accounts]

    # ------------------------------------------------------------------ message hooks
    def before_store(self, message: HookMessage) -> None:
        self.pm.hook.orbitmq_before_store(message=message)

    def after_store(self, message: HookMessage, result: StoreOutcome) -> None:
        try:
            self.pm.hook.orbitmq_after_store(message=message, result=result)
        except Exception as exc:  # an observer must not fail a stored message's reply
            log.error("after_store hook failed", error=repr(exc))
