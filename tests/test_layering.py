"""The dependency direction of the layout: plugins see only the hook layer, the broker registers plugins in one
place, the hook layer and the shared package stand on their own, the pop state machine knows no wire format.
Checked on the source (every import, also inside functions and ``TYPE_CHECKING`` blocks), so a back-edge fails
here before it turns into an import cycle."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
Rule = Callable[[str, str], "str | None"]  # (importing module, imported name) -> why it is refused
HOOK_LAYER = "broker.hookspecs"
REGISTRATION_POINT = "broker.builtin_plugins"  # the one broker module that names the built-in plugin classes
# The facades stand on the oms client: they run inside applications, never beside a broker.
FACADES = ("plugins/logappender", "transports", "spark_connector", "dashboard")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _broker_plugin_modules() -> list[Path]:
    """``plugins/`` but the facades that live there (the log appender is an application-side handler)."""
    facades = [ROOT / f for f in FACADES]
    return [p for p in _modules("plugins") if not any(p.is_relative_to(f) for f in facades)]


def imports_of(path: Path) -> Iterator[tuple[int, str]]:
    """(line, imported module) for every import of ``path``; ``from a import b`` yields ``a.b`` (b may be a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _violations(paths: list[Path], rule: Rule) -> list[str]:
    out = []
    for path in paths:
        for line, name in imports_of(path):
            reason = rule(_module_name(path), name)
            if reason:
                out.append(f"{path.relative_to(ROOT)}:{line}: imports {name} ({reason})")
    return out


def plugin_rule(module: str, name: str) -> str | None:
    """Built-in plugins depend on the hook layer and the shared package only, as third-party ones must."""
    if _under(name, "broker") and not _under(name, HOOK_LAYER) and name != "broker":
        return f"plugins may import only {HOOK_LAYER} from the broker"
    if name == "broker":
        return "plugins may import only broker.hookspecs"
    for other in ("oms", "namesrv"):
        if _under(name, other):
            return f"plugins never import {other}"
    return None


def facade_rule(module: str, name: str) -> str | None:
    """Facades use the public client (``oms``) and the shared package, never the servers' code."""
    for server in ("broker", "namesrv"):
        if _under(name, server):
            return f"facades never import {server}: they build on oms"
    return None


def broker_rule(module: str, name: str) -> str | None:
    """The broker names plugin code only where it registers the built-ins: their ``plugin`` modules."""
    if not _under(name, "plugins"):
        return None
    if module != REGISTRATION_POINT:
        return f"only {REGISTRATION_POINT} may import plugins"
    parts = name.split(".")
    if len(parts) < 3 or parts[2] != "plugin":
        return "the registration point imports a plugin's `plugin` module (its hook class), nothing internal"
    return None


def hook_layer_rule(module: str, name: str) -> str | None:
    """The hook layer is what plugins import: it must not drag the broker's internals (or a plugin) in."""
    if _under(name, "broker") or _under(name, "plugins") or _under(name, "oms") or _under(name, "namesrv"):
        return f"{HOOK_LAYER} depends only on the standard library, pluggy and orbitmq"
    return None


def pop_rule(module: str, name: str) -> str | None:
    """The receive/ack state machine knows no wire format: its gRPC edge (``broker.grpc``) depends on it."""
    for edge in ("broker.grpc", "grpc", "google.protobuf", "rocketmq.grpc_protocol", "orbitmq.proto"):
        if _under(name, edge):
            return "broker.pop is the state machine; requests and responses belong to broker.grpc"
    return None


def shared_rule(module: str, name: str) -> str | None:
    """orbitmq is the bottom layer: everything may import it, it imports none of them."""
    for top in ("broker", "namesrv", "oms", "plugins", "transports", "spark_connector", "dashboard"):
        if _under(name, top):
            return "orbitmq imports none of the packages built on it"
    return None


def test_built_in_plugins_import_only_the_hook_layer_and_orbitmq() -> None:
    found = _violations(_broker_plugin_modules(), plugin_rule)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("facade", FACADES)
def test_facades_build_on_the_client_only(facade: str) -> None:
    found = _violations(_modules(facade), facade_rule)
    assert not found, "\n".join(found)


def test_the_broker_imports_plugins_only_to_register_them() -> None:
    found = _violations(_modules("broker"), broker_rule)
    assert not found, "\n".join(found)


def test_the_hook_layer_stands_alone() -> None:
    found = _violations([ROOT / "broker" / "hookspecs.py"], hook_layer_rule)
    assert not found, "\n".join(found)


def test_the_pop_state_machine_knows_no_wire_format() -> None:
    found = _violations(_modules("broker/pop"), pop_rule)
    assert not found, "\n".join(found)


def test_the_shared_package_imports_no_upper_layer() -> None:
    found = _violations(_modules("orbitmq"), shared_rule)
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    ("module", "source", "rule", "caught"),
    [
        ("plugins.x.plugin", "from broker.store.message import MessageExt\n", plugin_rule, True),
        ("transports.celery.transport", "from broker.store import message\n", facade_rule, True),
        ("spark_connector.source", "import namesrv.route_info\n", facade_rule, True),
        ("transports.celery.transport", "import oms\n", facade_rule, False),
        ("plugins.x.plugin", "from broker import store\n", plugin_rule, True),
        ("plugins.x.plugin", "import broker.context\n", plugin_rule, True),
        ("plugins.x.plugin", "def f():\n    from broker.store import results\n", plugin_rule, True),
        ("plugins.x.plugin", "from broker.hookspecs import hookimpl\n", plugin_rule, False),
        ("plugins.x.plugin", "from orbitmq.filter.bloom import BloomFilter\n", plugin_rule, False),
        ("broker.routing", "from plugins.allocators import QueueRef\n", broker_rule, True),
        ("broker.builtin_plugins", "from plugins.filters_sql92 import BloomFilter\n", broker_rule, True),
        ("broker.builtin_plugins", "from plugins.acl.plugin import AclPlugin\n", broker_rule, False),
        ("broker.hookspecs", "from broker.store.results import MessageFilter\n", hook_layer_rule, True),
        ("broker.x", "from .store import message\n", broker_rule, False),
        ("broker.pop.service", "from broker.grpc.convert import to_v2_message\n", pop_rule, True),
        ("broker.pop.service", "from rocketmq.grpc_protocol import service_pb2\n", pop_rule, True),
        ("broker.pop.service", "from broker.pop.state import PopState\n", pop_rule, False),
    ],
)
def test_the_rules_catch_a_back_edge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, module: str, source: str, rule: Rule, caught: bool
) -> None:
    """Each rule, fed a one-line module, flags the back-edges this layout once had and passes the allowed ones."""
    path = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
    path.parent.mkdir(parents=True)
    path.write_text(source, encoding="utf-8")
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    assert bool(_violations([path], rule)) is caught
