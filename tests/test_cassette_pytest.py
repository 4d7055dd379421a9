"""The pytest plugin: ``model_cassette`` records with ``--cassette-mode=record``, then replays.

Each test runs pytest itself in a subprocess, on a small test suite written to a temporary
folder, the way a user's suite would use the plugin.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CONFTEST = 'pytest_plugins = ["agentkit.testing.pytest_plugin"]\n'

SUITE = '''
import pytest
from agentkit import ChatModelAgent, Runner
from agentkit.models import ScriptedChatModel


def live_model():
    # Recording, it answers; replaying, a call that reached it would fail the test.
    import os
    if os.environ.get("SUITE_LIVE"):
        return ScriptedChatModel(lambda messages: "echo: " + messages[-1].content)
    return ScriptedChatModel([])


def ask(model, question, instruction="Answer."):
    agent = ChatModelAgent("echo", "echoes", model, instruction=instruction)
    return Runner(agent).invoke(question)


def test_default_file(model_cassette):
    assert ask(model_cassette(live_model()), "hello").text == "echo: hello"


@pytest.mark.parametrize("word", ["a b", "c/d"])
def test_parametrized(model_cassette, word):
    assert ask(model_cassette(live_model()), word).text == "echo: " + word


@pytest.mark.cassette("recorded/named.yaml")
def test_marker_path(model_cassette):
    assert model_cassette.path.name == "named.yaml"
    assert ask(model_cassette(live_model()), "yaml").text == "echo: yaml"


def test_two_models(model_cassette):
    first = model_cassette(live_model())
    judge = model_cassette(live_model(), name="judge")
    assert ask(first, "one").text == "echo: one"
    assert ask(judge, "two").text == "echo: two"
    assert judge.path.name == "test_two_models-judge.json"
'''


def run_pytest(folder: Path, *args: str, live: bool = False) -> subprocess.CompletedProcess[str]:
    import os

    env = dict(os.environ)
    env.pop("SUITE_LIVE", None)
    if live:
        env["SUITE_LIVE"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(folder), *args],
        capture_output=True, text=True, timeout=120, cwd=folder, env=env,
    )


def write_suite(folder: Path, suite: str = SUITE) -> None:
    (folder / "conftest.py").write_text(CONFTEST)
    (folder / "test_suite.py").write_text(suite)


def test_record_once_then_replay_offline(tmp_path: Path) -> None:
    write_suite(tmp_path)
    # Replaying before anything was recorded fails, saying how to record.
    first = run_pytest(tmp_path)
    assert first.returncode == 1
    assert "record it first" in first.stdout and "--cassette-mode=record" in first.stdout

    recorded = run_pytest(tmp_path, "--cassette-mode=record", live=True)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.json"))
    files += sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.yaml"))
    assert files == [
        "cassettes/test_suite/test_default_file.json",
        "cassettes/test_suite/test_parametrized_a_b.json",
        "cassettes/test_suite/test_parametrized_c_d.json",
        "cassettes/test_suite/test_two_models-judge.json",
        "cassettes/test_suite/test_two_models.json",
        "recorded/named.yaml",
    ]
    data = json.loads((tmp_path / "cassettes/test_suite/test_default_file.json").read_text())
    assert data["interactions"][0]["reply"]["message"]["content"] == "echo: hello"

    replayed = run_pytest(tmp_path)  # offline: the models given would fail if called
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "5 passed" in replayed.stdout


def test_a_changed_prompt_fails_the_test_with_a_diff(tmp_path: Path) -> None:
    write_suite(tmp_path)
    assert run_pytest(tmp_path, "--cassette-mode=record", live=True).returncode == 0
    write_suite(tmp_path, SUITE.replace('instruction="Answer."', 'instruction="Answer in French."'))
    failed = run_pytest(tmp_path, "-k", "default_file")
    assert failed.returncode == 1
    assert "CassetteMismatchError" in failed.stdout
    assert '-      "content": "Answer.",' in failed.stdout
    assert '+      "content": "Answer in French.",' in failed.stdout
    # record-missing adds the new call and keeps the old one
    fixed = run_pytest(tmp_path, "-k", "default_file", "--cassette-mode=record-missing", live=True)
    assert fixed.returncode == 0, fixed.stdout
    data = json.loads((tmp_path / "cassettes/test_suite/test_default_file.json").read_text())
    assert len(data["interactions"]) == 2


def test_a_marker_with_an_unknown_setting_is_refused(tmp_path: Path) -> None:
    write_suite(
        tmp_path,
        "import pytest\n\n"
        "@pytest.mark.cassette(record_mode='all')\n"
        "def test_x(model_cassette):\n"
        "    pass\n",
    )
    result = run_pytest(tmp_path)
    assert result.returncode == 1
    assert "takes path, mode, match, scrub and redact (got record_mode)" in result.stdout


def test_importing_agentkit_or_its_testing_package_does_not_import_pytest() -> None:
    code = "import sys, agentkit, agentkit.testing, agentkit.evals; print('pytest' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
