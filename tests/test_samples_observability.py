"""The observability sample: offline as a script, and in-process through main()."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import pytest

from agentkit import TokenUsage
from agentkit.testing import no_thread_leak
from tests.samples_support import run_sample


def test_observability_runs_offline_as_a_script_and_logs_the_run() -> None:
    result = run_sample("observability.py")
    assert result.returncode == 0, result.stderr
    assert "answer: Running a heat pump costs about 900 EUR a year" in result.stdout
    assert "tokens: 991 (910 prompt, 81 completion)" in result.stdout
    assert "  researcher: 327" in result.stdout
    logged = result.stderr
    assert "agent boss (Supervisor) starts at boss" in logged
    assert "agent researcher (ChatModel) starts at boss/researcher" in logged
    assert "researcher calls search({'query': 'heat pump'})" in logged
    assert "search took" in logged
    assert "agent 'boss' transfers to agent 'researcher'" in logged


def test_observability_counts_tokens_per_agent(
    sample: Callable[[str], ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    module = sample("observability")
    with no_thread_leak():
        events, usage = module.main([])
    capsys.readouterr()
    assert all(event.err is None for event in events)
    assert usage.by_agent == {
        "boss": TokenUsage(460, 34, 494),
        "researcher": TokenUsage(300, 27, 327),
        "writer": TokenUsage(150, 20, 170),
    }


def test_observability_prints_spans_with_otel() -> None:
    pytest.importorskip("opentelemetry.sdk")
    result = run_sample("observability.py", "--otel")
    assert result.returncode == 0, result.stderr
    spans = [line for line in result.stdout.splitlines() if line.startswith("span: ")]
    assert spans.count("span: invoke_agent boss") == 3
    assert "span: execute_tool search" in spans
