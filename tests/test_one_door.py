"""Every resume point enters a run by one door: ``agentkit._progress.save_point``.

``AgentRun.save_state``, ``interrupt()``, ``interrupt_event()`` and ``CompositeInterrupt`` all
declare through it, so a durable run's writer sees every point a stop would save. A call of
``Journal.record``/``Journal.declare`` or ``Progress.declare`` anywhere else in the package
would open a second door (a point the writer never sees); this scan fails on it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "agentkit"
DOOR = PACKAGE / "_progress.py"
OWNERS = {"journal": {"record", "declare"}, "progress": {"declare"}}


def side_doors(source: str) -> list[str]:
    """``<owner>.<method>(`` calls in ``source`` that write points past the door."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if node.func.attr in OWNERS.get(name, ()):
            found.append(f"line {node.lineno}: {name}.{node.func.attr}(...)")
    return found


def test_resume_points_are_written_only_through_save_point() -> None:
    offenders = {
        str(path.relative_to(PACKAGE.parent)): calls
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != DOOR and (calls := side_doors(path.read_text(encoding="utf-8")))
    }
    assert not offenders, (
        "resume points written past agentkit._progress.save_point (declare them with "
        f"AgentRun.save_state, or call save_point): {offenders}"
    )


def test_the_scan_finds_a_side_door() -> None:
    assert side_doors("frame.journal.record(address, state, info, root=True)\n")
    assert side_doors("journal.declare(address, state)\n")
    assert side_doors("self.frame.progress.declare(address, state)\n")
    assert not side_doors("frame.journal.discard_under(address)\n")
    assert not side_doors("self._log().record(run_id)\n")
