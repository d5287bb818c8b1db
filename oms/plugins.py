"""The client plugin manager: one per access point (third-party plugins) and one per client (interceptors).

Interceptors may be plain objects: methods named like a hook count as implementations without a marker.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import pluggy

from oms import hookspecs

if TYPE_CHECKING:
    from oms.message import BytesMessage
    from oms.producer.result import SendResult

ENTRY_POINT_GROUP = "orbitmq.client_plugins"
log = logging.getLogger("oms.plugins")
_HOOK_NAMES = frozenset(n for n in vars(hookspecs) if n.startswith("oms_"))


class ClientPluginManager(pluggy.PluginManager):
    def __init__(self, load_entry_points: bool = True) -> None:
        super().__init__(hookspecs.PROJECT)
        self.add_hookspecs(hookspecs)
        if load_entry_points:
            self.load_setuptools_entrypoints(ENTRY_POINT_GROUP)

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> pluggy.HookimplOpts | None:
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None and name in _HOOK_NAMES and callable(getattr(plugin, name, None)):
            # an unmarked method with a hook's name: a plain interceptor object (defaults are filled in by pluggy)
            return cast(pluggy.HookimplOpts, {})
        return opts


class Hooks:
    """Calls each hook on several managers in order (the access point's plugins, then the client's own)."""

    def __init__(self, *managers: pluggy.PluginManager) -> None:
        self._managers = managers

    def _has(self, name: str) -> bool:
        return any(getattr(m.hook, name).get_hookimpls() for m in self._managers)

    def observes_sends(self) -> bool:
        """Whether a plugin implements ``oms_before_send`` or ``oms_after_send`` (they need message objects)."""
        return self._has("oms_before_send") or self._has("oms_after_send")

    def before_send(self, message: BytesMessage) -> None:
        if self._has("oms_before_send"):
            for m in self._managers:
                m.hook.oms_before_send(message=message)

    def after_send(self, message: BytesMessage, result: SendResult | None, error: BaseException | None) -> None:
        if not self._has("oms_after_send"):
            return
        for m in self._managers:
            try:
                m.hook.oms_after_send(message=message, result=result, error=error)
            except Exception:  # observers must not change the send's outcome
                log.exception("oms_after_send hook failed")

    def before_consume(self, messages: Sequence[BytesMessage]) -> None:
        if self._has("oms_before_consume"):
            for m in self._managers:
                m.hook.oms_before_consume(messages=messages)

    def after_consume(self, messages: Sequence[BytesMessage], success: bool) -> None:
        if not self._has("oms_after_consume"):
            return
        for m in self._managers:
            try:
                m.hook.oms_after_consume(messages=messages, success=success)
            except Exception:  # observers must not change the consume outcome
                log.exception("oms_after_consume hook failed")
