"""The deep research sample: as a script, and in-process through main() (offline)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from agentkit.testing import no_thread_leak, summarize
from tests.samples_support import run_sample


def test_deep_research_runs_offline_as_a_script(tmp_path: Path) -> None:
    result = run_sample("deep_research.py", "--workspace", str(tmp_path / "ws"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "agentkit deep research, offline" in out
    assert '-> calls skill({"skill": "research-report"})' in out
    assert "== DeepResearcher > general-purpose ==" in out
    assert "--- report.md ---\n# How the transistor came about" in out
    assert (tmp_path / "ws" / "report.md").read_text().startswith("# How the transistor came about")


def test_deep_research_events(
    sample: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    module = sample("deep_research")
    workspace = tmp_path / "ws"
    with no_thread_leak():
        events = module.main(["--no-stream", "--workspace", str(workspace)])
    assert all(event.err is None for event in events)
    main, reader = ["DeepResearcher"], ["DeepResearcher", "general-purpose"]
    seen = [(path, kind) for _, path, kind, _, _ in map(summarize, events)]
    assert seen == [
        (main, "assistant"), (main, "tool/skill"),
        (main, "assistant"), (main, "tool/write_todos"),
        (main, "assistant"),
        (reader, "assistant"), (reader, "tool/glob"),
        (reader, "assistant"), (reader, "tool/read_file"), (reader, "tool/read_file"),
        (reader, "tool/read_file"),
        (reader, "assistant"),
        (main, "tool/task"),
        (main, "assistant"), (main, "tool/write_file"),
        (main, "assistant"), (main, "tool/write_todos"),
        (main, "assistant"),
    ]
    texts = [summarize(event)[3] for event in events]
    assert texts[1].startswith("Launching skill: research-report\nBase directory for this skill: "
                               "skills/research-report\n\n1. Plan the work")
    assert texts[6] == "sources/bell-labs.md\nsources/junction.md\nsources/nobel.md"
    assert texts[12] == module.FACTS  # the sub-agent's answer is the task's result
    assert texts[14] == "Updated file report.md"
    assert (workspace / "report.md").read_text() == module.REPORT
    assert sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*") if p.is_file()) == [
        "report.md", "skills/research-report/SKILL.md", "sources/bell-labs.md",
        "sources/junction.md", "sources/nobel.md",
    ]
    assert "--- report.md ---" in capsys.readouterr().out
