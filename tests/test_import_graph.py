"""agentkit's modules import each other without cycles: imports flow downward.

The graph is built from the source, not from ``sys.modules``: every ``import`` statement
counts, including those under ``if TYPE_CHECKING:`` and those inside functions, since each is
a dependency a reader has to follow. ``from package import name`` counts as an edge to the
module that defines ``name`` when the package ``__init__`` only re-exports it; the implicit
import of a package's ``__init__`` by its submodules does not count.
"""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Iterator
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent / "agentkit"

# The layers of ARCHITECTURE.md, bottom to top: a module imports only from its own layer and
# the ones below. Names are relative to ``agentkit`` ("." is the package itself); a pattern
# also matches the private spelling of a module (``runctx`` matches ``_runctx``).
LAYERS: list[tuple[str, list[str]]] = [
    (
        "Data and primitives",
        ["errors", "_persist", "_lazy", "_jsonable", "_values", "_clock", "_connections", "_ids", "_yaml", "_aioloop", "_media", "schema", "_html",
         "_stream_base", "streams",
         "iterators", "_spawn", "cancel", "_scope", "_ctrlc", "_transfer_messages", "limits",
         "_refresher", "language", "prompts_zh", "_steering"],
    ),
    ("Core types", ["events", "options", "models.base", "conversation.trim"]),
    (
        "Run context",
        ["_runctx", "_interrupt", "_points", "_progress", "_observe", "_runlocals", "callbacks",
         "_waiting", "throttle"],
    ),
    ("Agent protocol", ["_agent", "results", "display"]),
    ("Tools", ["tools", "tools.*", "backends", "backends.*"]),
    ("Models", ["models", "models.*"]),
    ("Agents", ["agents", "agents.*", "middleware", "guardrails"]),
    (
        "Runner",
        ["runner", "_runner_sink", "_checkpoints", "_durable", "_runlog", "compaction", "checkpoint",
         "checkpoint.*", "conversation", "conversation.*"],
    ),
    (
        "Patterns and edges",
        [".", "turnloop", "prebuilt", "prebuilt.*", "middlewares", "middlewares.*", "mcp",
         "mcp.*", "a2a", "a2a.*", "integrations", "integrations.*", "testing", "testing.*", "evals", "evals.*",
         "conversation.conformance", "memory", "memory.*", "approvals"],
    ),
]


@attrs.frozen
class Module:
    """One module of the package: its dotted name, its syntax tree, whether it is a package."""

    name: str
    tree: ast.Module
    is_package: bool


def load_modules(root: Path = ROOT) -> dict[str, Module]:
    """Every module under ``root``, by dotted name."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        name = ".".join(parts)
        modules[name] = Module(name, ast.parse(path.read_text(encoding="utf-8")), is_package)
    return modules


def imported_names(module: Module) -> Iterator[tuple[str, str | None]]:
    """``(module, name)`` for each ``from module import name``, ``(module, None)`` for ``import``."""
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = module.name.split(".")
                if not module.is_package:
                    base.pop()
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([source] if source else []))
            for alias in node.names:
                yield source, alias.name


def resolve(modules: dict[str, Module], source: str, name: str | None) -> str | None:
    """The agentkit module an import depends on, or ``None`` for a module outside agentkit."""
    seen: set[tuple[str, str | None]] = set()
    while (source, name) not in seen:
        seen.add((source, name))
        if name is not None and f"{source}.{name}" in modules:
            return f"{source}.{name}"  # a submodule
        module = modules.get(source)
        if module is None:
            return None
        if not module.is_package or name is None:
            return source
        # A name a package re-exports: follow it to the module that defines it.
        for origin, exported in imported_names(module):
            if exported == name and origin in modules and origin != source:
                source = origin
                break
        else:
            return source
    return source


def import_graph(modules: dict[str, Module]) -> dict[str, set[str]]:
    """Each module's agentkit dependencies."""
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, module in modules.items():
        for source, imported in imported_names(module):
            target = resolve(modules, source, imported)
            if target is not None and target != name:
                graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or ``None`` if the graph is acyclic."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for child in sorted(graph[node]):
            if state.get(child) == 1:
                return [*path[path.index(child) :], child]
            if child not in state:
                found = visit(child)
                if found is not None:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found is not None:
                return found
    return None


def test_agentkit_has_no_import_cycle() -> None:
    graph = import_graph(load_modules())
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of ``module`` (exact names before patterns)."""
    short = module.removeprefix("agentkit.") if module != "agentkit" else "."
    parts = short.split(".")
    public = ".".join([*parts[:-1], parts[-1].lstrip("_") or parts[-1]])
    for exact in (True, False):
        for index, (_, patterns) in enumerate(LAYERS):
            for pattern in patterns:
                if exact and pattern in (short, public):
                    return index
                if not exact and (fnmatch.fnmatch(short, pattern)):
                    return index
    return None


def test_imports_flow_downward_through_the_layers() -> None:
    graph = import_graph(load_modules())
    unplaced = sorted(module for module in graph if layer_of(module) is None)
    assert not unplaced, (
        f"modules in no layer: {unplaced}; add each to the layers table in ARCHITECTURE.md "
        "and to LAYERS in this test"
    )
    upward = []
    for module, targets in sorted(graph.items()):
        low = layer_of(module)
        assert low is not None
        for target in sorted(targets):
            high = layer_of(target)
            assert high is not None
            if high > low:
                upward.append(
                    f"{module} ({LAYERS[low][0]}) imports {target} ({LAYERS[high][0]})"
                )
    assert not upward, "imports that go up a layer:\n" + "\n".join(upward)


def test_the_graph_sees_type_checking_and_function_local_imports(tmp_path: Path) -> None:
    package = tmp_path / "agentkit"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("from agentkit.top import Top\n")
    (package / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from agentkit.top import Top\n"
    )
    (package / "top.py").write_text("def f():\n    from agentkit import sub\n\nclass Top: ...\n")
    (package / "sub" / "__init__.py").write_text("from .inner import Inner\n")
    (package / "sub" / "inner.py").write_text("from ..low import x\nclass Inner: ...\n")
    graph = import_graph(load_modules(package))
    assert graph["agentkit.low"] == {"agentkit.top"}
    assert graph["agentkit.top"] == {"agentkit.sub"}
    assert graph["agentkit.sub.inner"] == {"agentkit.low"}
    assert find_cycle(graph) == [
        "agentkit.top",
        "agentkit.sub",
        "agentkit.sub.inner",
        "agentkit.low",
        "agentkit.top",
    ]


def test_a_re_exported_name_is_an_edge_to_its_defining_module(tmp_path: Path) -> None:
    package = tmp_path / "agentkit"
    package.mkdir()
    (package / "__init__.py").write_text("from agentkit.a import A\nfrom agentkit.b import B\n")
    (package / "a.py").write_text("class A: ...\n")
    (package / "b.py").write_text("from agentkit import A\nclass B: ...\n")
    graph = import_graph(load_modules(package))
    assert graph["agentkit.b"] == {"agentkit.a"}  # not the package, which imports b
    assert find_cycle(graph) is None
