"""The broker's built-in plugins, registered through the same hooks as third-party ones.

Names (for ``pluginsDisabled``): ``tag-filter``, ``sql92-filter``, ``allocators``, ``acl`` (only when ``aclEnable``).
"""

from __future__ import annotations

from pathlib import Path

from broker.config import BrokerConfig
from broker.filter import TagFilter
from broker.hookspecs import CompiledFilter, FilterType, hookimpl


class TagFilterPlugin:
    """TAG expressions: ``*`` or ``TagA || TagB`` (tag hash on the ConsumeQueue, exact tag on the message)."""

    @hookimpl
    def orbitmq_compile_filter(self, expression_type: str, expression: str) -> CompiledFilter | None:
        if expression_type.upper() != FilterType.TAG.value:
            return None
        return TagFilter.parse(expression)


def builtin_plugins(config: BrokerConfig, store_root: Path) -> list[tuple[str, object]]:
    from plugins.allocators.plugin import AllocatorPlugin
    from plugins.filters_sql92.plugin import Sql92FilterPlugin

    plugins: list[tuple[str, object]] = [("tag-filter", TagFilterPlugin()), ("allocators", AllocatorPlugin())]
    if config.enablePropertyFilter:
        plugins.append(("sql92-filter", Sql92FilterPlugin()))
    if config.aclEnable:
        from plugins.acl.plugin import AclPlugin

        acl_file = Path(config.aclFile) if config.aclFile else store_root / "config" / "plain_acl.yml"
        plugins.append(("acl", AclPlugin(acl_file)))
    return plugins
