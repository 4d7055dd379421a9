"""The deep research sample: as a script, and in-process through main() (offline)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from agentkit.backends import SandboxShell, SandboxUnavailableError
from agentkit.testing import no_thread_leak, summarize
from tests.samples_support import run_sample
from tests.test_sandbox_escape import REQUIRE_ENV, _required


def _sandbox_runs(where: Path) -> bool:
    """Whether the sample gets a sandboxed shell here (a failure where CI requires one)."""
    where.mkdir(parents=True, exist_ok=True)
    try:
        SandboxShell(where)
    except SandboxUnavailableError as error:
        if _required():
            pytest.fail(f"the sandbox is required ({REQUIRE_ENV} is set) but cannot run: {error}")
        return False
    return True


def test_deep_research_runs_offline_as_a_script(tmp_path: Path) -> None:
    result = run_sample("deep_research.py", "--workspace", str(tmp_path / "ws"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "agentkit deep research, offline" in out
    assert '-> calls skill({"skill": "research-report"})' in out
    assert "== DeepResearcher > general-purpose ==" in out
    assert "task_output returned: Background task bg_1" in out
    assert "3 of 3 paragraphs cite a source." in out
    assert "--- report.md ---\n# How the transistor came about" in out
    if _sandbox_runs(tmp_path / "probe"):
        assert "shell: SandboxShell(" in out
        assert '-> calls execute({"command": "wc -w < report.md;' in out
    else:
        assert "shell: none" in out and "no shell for the agent" in out
    assert (tmp_path / "ws" / "report.md").read_text().startswith("# How the transistor came about")


def test_deep_research_events(
    sample: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    module = sample("deep_research")
    workspace = tmp_path / "ws"
    sandboxed = _sandbox_runs(tmp_path / "probe")
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
        # The citation check starts in the background: its sub-agent's events are not shown.
        (main, "assistant"), (main, "tool/task"),
        *([(main, "assistant"), (main, "tool/execute")] if sandboxed else []),
        (main, "assistant"), (main, "tool/write_todos"),
        (main, "assistant"), (main, "tool/task_output"),
        (main, "assistant"),
    ]
    texts = [summarize(event)[3] for event in events]
    assert texts[1].startswith("Launching skill: research-report\nBase directory for this skill: "
                               "skills/research-report\n\n1. Plan the work")
    assert texts[6] == "sources/bell-labs.md\nsources/junction.md\nsources/nobel.md"
    assert texts[12] == module.FACTS  # the sub-agent's answer is the task's result
    assert texts[14] == "Updated file report.md"
    assert texts[16].startswith("Started background task bg_1.")
    if sandboxed:  # run in the sandbox: the words of the report, and its 3 cited paragraphs
        assert texts[18] == f"{len(module.REPORT.split())}\n3\n"
    assert texts[-2].startswith("Background task bg_1 (sub-agent 'general-purpose': Read "
                                "report.md")
    assert texts[-2].endswith(" completed.\nOutput:\n3 of 3 paragraphs cite a source.")
    assert (workspace / "report.md").read_text() == module.REPORT
    assert sorted(p.relative_to(workspace).as_posix() for p in workspace.rglob("*") if p.is_file()) == [
        "report.md", "skills/research-report/SKILL.md", "sources/bell-labs.md",
        "sources/junction.md", "sources/nobel.md",
    ]
    assert "--- report.md ---" in capsys.readouterr().out


def test_deep_research_without_bubblewrap_has_files_and_no_shell(
    sample: Callable[[str], ModuleType],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = sample("deep_research")
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap to be found
    events = module.main(["--no-stream", "--workspace", str(tmp_path / "ws")])
    assert all(event.err is None for event in events)
    assert "tool/execute" not in [summarize(event)[2] for event in events]
    out = capsys.readouterr().out
    assert "shell: none" in out and "there is no 'bwrap' on PATH" in out
    assert (tmp_path / "ws" / "report.md").read_text() == module.REPORT
