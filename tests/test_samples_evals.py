"""samples/eval_suite.py: the eval suite offline from its cassettes, live, and recorded."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from agentkit.testing import FakeOpenAIServer
from tests.eval_sample_support import CASSETTES, brain, record
from tests.samples_support import run_sample


def test_the_suite_runs_offline_from_the_committed_cassettes(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    done = run_sample("eval_suite.py", "--json", str(report_path))  # no OPENAI_* variables
    assert done.returncode == 0, done.stdout + done.stderr
    assert "eval suite (replay)" in done.stdout
    assert "Eval 'travel-assistant': 6 of 6 passed (100.0%), 0 failed" in done.stdout
    report = json.loads(report_path.read_text())
    assert (report["total"], report["passed"], report["failed"]) == (6, 6, 0)
    tokyo = next(case for case in report["cases"] if case["name"] == "tokyo-trip")
    assert tokyo["output"] == "The weather in Tokyo right now: cloudy, 18°C. That is 32,500 JPY."
    assert tokyo["model_calls"] == 2


def test_recording_through_the_sample_gives_the_committed_cassettes(tmp_path: Path) -> None:
    done = record(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "eval suite (record)" in done.stdout
    for name in ("agent.yaml", "judge.yaml"):
        assert (tmp_path / name).read_text() == (CASSETTES / name).read_text(), (
            f"{name} differs from the committed cassette: run python -m tests.eval_sample_support"
        )
        assert "sk-test" not in (tmp_path / name).read_text()


def test_the_same_suite_runs_live_and_compares_with_a_baseline(tmp_path: Path) -> None:
    baseline = tmp_path / "baseline.json"
    assert run_sample("eval_suite.py", "--json", str(baseline)).returncode == 0
    with FakeOpenAIServer(handler=brain) as server:
        done = run_sample(
            "eval_suite.py", "--baseline", str(baseline),
            env={"OPENAI_API_KEY": "sk-test", "OPENAI_BASE_URL": server.base_url},
        )
        calls = len(server.requests)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "eval suite (live)" in done.stdout and "6 of 6 passed" in done.stdout
    assert calls == 11 + 6  # the agent's model calls and one judge call per case
    assert "0 regressed, 0 improved, 0 added, 0 removed, 6 unchanged" in done.stdout


def test_a_changed_prompt_fails_the_offline_suite_with_a_diff(
    sample: Callable[[str], ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    suite = sample("eval_suite")
    monkeypatch.setattr(suite, "INSTRUCTION", "You are a pirate travel assistant.")
    report = suite.run_suite("replay", concurrency=2)
    assert report.failed == 6
    failure = report.cases[0].failures[0]
    assert failure.startswith("the run failed: CassetteMismatchError: cassette ")
    assert '+      "content": "You are a pirate travel assistant.",' in failure
    assert suite.main(["--min-rate", "0.5"]) == 1


def test_recording_needs_the_live_model(sample: Callable[[str], ModuleType]) -> None:
    suite = sample("eval_suite")
    with pytest.raises(SystemExit):
        suite.main(["--record"])
