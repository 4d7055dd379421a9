"""ARCHITECTURE.md stays true: every code name it mentions in backticks exists.

A name is a file or folder (``_react.py`` anywhere in agentkit, ``conversation/redis.py``,
``testing/``), an
identifier defined in agentkit (a class, function, method, parameter, attribute or constant; the
``LAYERS`` table of the import-graph test), or ``Class.member``, where the member is defined on
the class or a base class of it. Python's own words (builtins, keywords, dunder names, a few
standard-library names) count as existing. Backticked text that is not a name (``agent:<name>``,
``agentkit-run``, ``if TYPE_CHECKING:``) is prose and is not checked.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import keyword
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "agentkit"
DOC = REPO / "ARCHITECTURE.md"
EXTRA_SOURCES = [REPO / "tests" / "test_import_graph.py"]
PYTHON_WORDS = {"ContextVar", "__del__"}
NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


class Definitions:
    """The names defined in agentkit's source, and the members of each class."""

    def __init__(self, paths: list[Path]) -> None:
        self.names: set[str] = set()
        self.members: dict[str, set[str]] = {}
        self.bases: dict[str, list[str]] = {}
        for path in paths:
            self._read(ast.parse(path.read_text(encoding="utf-8")))

    def _read(self, tree: ast.Module) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                self.names.add(node.name)
                members = self.members.setdefault(node.name, set())
                self.bases.setdefault(node.name, []).extend(
                    base.id if isinstance(base, ast.Name) else getattr(base, "attr", "")
                    for base in node.bases
                )
                for item in node.body:
                    members.update(_names_of(item))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.names.add(node.name)
                arguments = node.args
                for argument in [*arguments.args, *arguments.kwonlyargs]:
                    self.names.add(argument.arg)  # a parameter (``on_event``) is a name too
            else:
                self.names.update(_names_of(node))

    def has_member(self, cls: str, member: str, seen: frozenset[str] = frozenset()) -> bool:
        if member in self.members.get(cls, set()):
            return True
        return any(
            self.has_member(base, member, seen | {cls})
            for base in self.bases.get(cls, [])
            if base not in seen
        )


def _names_of(node: ast.AST) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        targets = [node.target]
    found: set[str] = set()
    for target in targets:
        for part in ast.walk(target):
            if isinstance(part, ast.Name):
                found.add(part.id)
            elif isinstance(part, ast.Attribute):
                found.add(part.attr)
    return found


def _backticked(text: str) -> list[str]:
    return re.findall(r"`([^`\n]+)`", text)


def _resolves(dotted: str) -> bool:
    """Whether ``dotted`` is an importable module, or an attribute of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(target, part):
                return False
            target = getattr(target, part)
        return True
    return False


def problem(token: str, defined: Definitions) -> str | None:
    """Why ``token`` names nothing, or ``None`` when it exists (or is prose)."""
    name = token.strip().lstrip("@")
    if "(" in name:
        name = name[: name.index("(")]
    if "/" in name or name.endswith(".py"):
        if (PACKAGE / name).exists() or (REPO / name).exists():
            return None
        if "/" not in name and any(PACKAGE.rglob(name)):
            return None  # a module named in its package's row
        return f"no file or folder {name!r} in agentkit/ or the repository"
    if not NAME.fullmatch(name):
        return None  # prose, not a name
    if name in PYTHON_WORDS or keyword.iskeyword(name) or hasattr(builtins, name):
        return None
    if "." not in name:
        return None if name in defined.names else f"{name!r} is defined nowhere in agentkit"
    head, _, member = name.partition(".")
    if head in defined.members and "." not in member:
        if defined.has_member(head, member):
            return None
        return f"class {head!r} has no member {member!r}"
    return None if _resolves(name) else f"{name!r} does not resolve"


def test_every_name_architecture_md_mentions_exists() -> None:
    defined = Definitions([*sorted(PACKAGE.rglob("*.py")), *EXTRA_SOURCES])
    problems = []
    for token in _backticked(DOC.read_text(encoding="utf-8")):
        found = problem(token, defined)
        if found is not None:
            problems.append(f"`{token}`: {found}")
    assert not problems, "ARCHITECTURE.md names what does not exist:\n" + "\n".join(problems)


def test_the_check_catches_a_stale_name() -> None:
    defined = Definitions(sorted(PACKAGE.rglob("*.py")))
    # names the previous ARCHITECTURE.md used, which the code no longer has
    assert problem("flow._FlowSink", defined) is not None
    assert problem("_ToolItem", defined) is not None
    assert problem("BuiltinAgent", defined) is not None
    assert problem("RunScope.fired_from_outside", defined) is not None
    assert problem("agents/_tool_calls.py", defined) is not None
    # and accepts what exists
    assert problem("RunScope.check", defined) is None
    assert problem("BaseAgent.run", defined) is None  # defined on the class
    assert problem("DeterministicTransferAgent.execute", defined) is None  # on a base class
    assert problem("run_agent(agent, frame, downstream, input)", defined) is None
    assert problem("agent:<name>", defined) is None  # prose
