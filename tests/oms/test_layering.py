"""The ``oms`` package imports in one direction: no cycle between its modules (``TYPE_CHECKING`` and in-function
imports count too), clients reach the access point only through ``oms.context``, and ``oms.client`` stays below."""

from __future__ import annotations

import ast
from pathlib import Path

OMS_ROOT = Path(__file__).resolve().parents[2] / "oms"
CLIENT_PACKAGES = ("oms.producer", "oms.consumer", "oms.admin")


def module_names(root: Path) -> dict[str, Path]:
    """``oms.x.y`` -> its file, for every module of the package at ``root``."""
    names = {}
    for path in root.rglob("*.py"):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def import_graph(root: Path) -> dict[str, set[str]]:
    """Which ``oms`` modules each module imports, wherever the import statement stands (AST, not runtime)."""
    modules = module_names(root)
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                graph[name].update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    if submodule in modules:
                        graph[name].add(submodule)
                    elif node.module in modules:
                        graph[name].add(node.module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), or a module importing itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_oms_modules() -> None:
    assert cycles(import_graph(OMS_ROOT)) == []


def test_the_cycle_finder_sees_a_cycle() -> None:
    graph = {"oms.a": {"oms.b"}, "oms.b": {"oms.c"}, "oms.c": {"oms.a"}, "oms.d": {"oms.a"}}
    assert cycles(graph) == [["oms.a", "oms.b", "oms.c"]]


def test_clients_never_import_the_access_point() -> None:
    graph = import_graph(OMS_ROOT)
    offenders = sorted(m for m, deps in graph.items() if m.startswith(CLIENT_PACKAGES) and "oms.access_point" in deps)
    assert offenders == [], "clients use oms.context.ClientContext, not oms.access_point"


def test_oms_client_depends_only_on_leaf_modules() -> None:
    """``oms.client`` (loop, channels, routes, Telemetry) is the bottom layer: besides itself it may use only
    modules that import no other ``oms`` module (errors, version, queue)."""
    graph = import_graph(OMS_ROOT)
    leaves = {m for m, deps in graph.items() if not deps}
    upward = {
        (m, d)
        for m, deps in graph.items()
        if m.startswith("oms.client")
        for d in deps
        if not d.startswith("oms.client") and d not in leaves
    }
    assert upward == set()
