"""The client plugin manager: one per access point (third-party plugins) and one per client (interceptors).

Interceptors may be plain objects: methods named like a hook count as implementations without a marker.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Sequence
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
        # told of every (un)registration: ``Hooks`` caches which hooks are implemented (asked once per message)
        self._listeners: list[weakref.WeakMethod[Callable[[], None]]] = []
        super().__init__(hookspecs.PROJECT)
        self.add_hookspecs(hookspecs)
        if load_entry_points:
            self.load_setuptools_entrypoints(ENTRY_POINT_GROUP)

    def register(self, plugin: object, name: str | None = None) -> str | None:
        registered = super().register(plugin, name)
        self._changed()
        return registered

    def unregister(self, plugin: object | None = None, name: str | None = None) -> Any | None:
        removed = super().unregister(plugin, name)
        self._changed()
        return removed

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (a bound method, held weakly: clients come and go) after each (un)registration."""
        self._listeners.append(weakref.WeakMethod(listener))

    def _changed(self) -> None:
        alive = []
        for ref in self._listeners:
            listener = ref()
            if listener is not None:
                listener()
                alive.append(ref)
        self._listeners = alive

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
        # asked per message on the send and consume paths: answers cached until a manager's plugins change
        self._cacheable = all(isinstance(m, ClientPluginManager) for m in managers)
        self._known: dict[str, bool] = {}
        for m in managers:
            if isinstance(m, ClientPluginManager):
                m.on_change(self._forget)

    def _forget(self) -> None:
        self._known = {}

    def _has(self, name: str) -> bool:
        known = self._known.get(name) if self._cacheable else None
        if known is None:
            known = any(getattr(m.hook, name).get_hookimpls() for m in self._managers)
            if self._cacheable:
                self._known[name] = known
        return known

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
