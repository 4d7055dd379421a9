"""Built-in agents use only what a user's agent can use: no other object's private members.

What a built-in composite needs (run a child inline at its place, named, recorded, resumable,
cancellable, durable; declare its state) is a public method of :class:`~agentkit.AgentRun`
(``run_child``, ``save_state``, ``forward``). This scan keeps it so: in ``agentkit/agents`` and
``agentkit/prebuilt``, an attribute ``x._name`` is read only when ``x`` is ``self``, ``cls`` or
``super()``, or when ``_name`` is a member of a class of the same module (Python's privacy is
per class: a flow node calls another node's ``_turn``, a stream reader its source's ``_recv``).
The members of ``AgentRun`` are never read from outside ``_agent.py``, whatever the module
defines.
"""

from __future__ import annotations

import ast
from pathlib import Path

from agentkit import AgentRun

ROOT = Path(__file__).resolve().parent.parent / "agentkit"
SCANNED = ("agents", "prebuilt")

# Justified exceptions: (module path under agentkit/, attribute). Keep it empty if you can.
ALLOWED: set[tuple[str, str]] = set()


def _own_members(tree: ast.Module) -> set[str]:
    """The private names the module's classes define (methods, slots, ``self._x = ...``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in ast.walk(node):
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.Attribute) and isinstance(item.ctx, ast.Store):
                    if isinstance(item.value, ast.Name) and item.value.id in ("self", "cls"):
                        names.add(item.attr)
                elif isinstance(item, ast.Constant) and isinstance(item.value, str):
                    names.add(item.value)  # __slots__ entries
    return {name for name in names if name.startswith("_")}


def _private_reads(source: str, relative: str) -> list[str]:
    """The private reads of another object in ``source`` (the module ``relative``)."""
    tree = ast.parse(source, filename=relative)
    own = _own_members(tree)
    agent_run = set(AgentRun.__slots__)
    found: list[str] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or (name.startswith("__") and name.endswith("__")):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if (
            isinstance(owner, ast.Call)
            and isinstance(owner.func, ast.Name)
            and owner.func.id == "super"
        ):
            continue
        if name in own and name not in agent_run:
            continue
        if (relative, name) in ALLOWED:
            continue
        found.append(f"{relative}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_builtins_read_no_private_member_of_another_object() -> None:
    found: list[str] = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            found.extend(_private_reads(source, path.relative_to(ROOT).as_posix()))
    assert not found, (
        "built-in agents read private members of other objects; use AgentRun's public "
        "methods (run_child, save_state, forward) or add what is missing there:\n"
        + "\n".join(found)
    )


def test_the_scan_finds_a_private_read() -> None:
    """The scan is not vacuous: another object's privates are found, even where the module's
    own class has a member of that name when it is one of AgentRun's."""
    source = (
        "class Node:\n"
        "    def __init__(self):\n"
        "        self._frame = None\n"
        "        self._next = None\n"
        "    def go(self, run, other):\n"
        "        return run._frame, run._downstream, other._next, super()._x\n"
    )
    assert _private_reads(source, "agents/probe.py") == [
        "agents/probe.py:6: run._frame",
        "agents/probe.py:6: run._downstream",
    ]


# --- one persistence path: built-ins save through AgentRun only ---------------------------------

# What only the run's writer may touch: the durable progress and the journal of resume points
# (agentkit._points may be imported: a resumed component reads its types).
_PERSISTENCE_MODULES = ("agentkit._progress", "agentkit._durable")
_PERSISTENCE_ATTRIBUTES = ("journal", "progress")


def _persistence_uses(source: str, relative: str) -> list[str]:
    """The imports of the writer's modules and the reads of a frame's ``journal`` or
    ``progress`` in ``source`` (the module ``relative``)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename=relative)):
        if isinstance(node, ast.ImportFrom) and node.module in _PERSISTENCE_MODULES:
            found.append(f"{relative}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Import):
            found.extend(
                f"{relative}:{node.lineno}: import {alias.name}"
                for alias in node.names
                if alias.name in _PERSISTENCE_MODULES
            )
        elif isinstance(node, ast.Attribute) and node.attr in _PERSISTENCE_ATTRIBUTES:
            found.append(f"{relative}:{node.lineno}: {ast.unparse(node)}")
    return sorted(found, key=lambda line: int(line.split(":")[1]))


def test_builtins_save_only_through_agent_run() -> None:
    found: list[str] = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            source = path.read_text(encoding="utf-8")
            found.extend(_persistence_uses(source, path.relative_to(ROOT).as_posix()))
    assert not found, (
        "built-in agents reach the run's persistence directly; save with AgentRun.save_state, "
        "keep_history and discard_state (a tool call's run: agentkit._agent.call_run):\n"
        + "\n".join(found)
    )


def test_the_persistence_scan_finds_a_direct_use() -> None:
    source = (
        "from agentkit._progress import PutPoint\n"
        "import agentkit._durable\n"
        "def go(frame, address):\n"
        "    frame.journal.record(address, None)\n"
        "    frame.journal.discard_under(address)\n"
        "    return frame.progress\n"
    )
    assert _persistence_uses(source, "agents/probe.py") == [
        "agents/probe.py:1: from agentkit._progress import ...",
        "agents/probe.py:2: import agentkit._durable",
        "agents/probe.py:4: frame.journal",
        "agents/probe.py:5: frame.journal",
        "agents/probe.py:6: frame.progress",
    ]
