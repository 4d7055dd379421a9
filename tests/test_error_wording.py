"""Errors in Python words: what went wrong, with the values, and how to fix it; no Go wording.

Eino's error texts ("store is nil", "checkpoint[x] not exist", "tool[name:x id:y]",
"workflowAgent.Resume:", "failed to ...: failed to ...: " chains) are not a contract. A scan of
every string in agentkit's source keeps them out; the tests below read some messages whole.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from agentkit import (
    ChatModelAgent,
    CheckpointConsumedError,
    CheckpointNotFoundError,
    Runner,
    interrupt,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message

ROOT = Path(__file__).resolve().parent.parent / "agentkit"

GO_WORDING = [
    (re.compile(r"\bis nil\b"), "Go's nil"),
    (re.compile(r"(?<!do )(?<!does )(?<!did )\bnot exist\b"), "Go's 'checkpoint[x] not exist'"),
    (re.compile(r"\w\[name:"), "Go's 'tool[name:x id:y]'"),
    (re.compile(r"\b\w+Agent\.(Run|Resume)\b"), "Go method names ('workflowAgent.Resume')"),
    (re.compile(r"toolsNode"), "Eino's ToolsNode"),
    (re.compile(r"^failed to \w+[^:]*: "), "a 'failed to ...: ' chain"),
    (re.compile(r"should not happen"), "'should not happen' (say what happened)"),
]


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string constant of a module, with f-strings joined (their holes as ``{}``)."""
    found: list[tuple[int, str]] = []
    in_fstring: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = []
            for value in node.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    parts.append(value.value)
                    in_fstring.add(id(value))
                else:
                    parts.append("{}")
            found.append((node.lineno, "".join(parts)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in in_fstring:
            found.append((node.lineno, node.value))
    return found


def test_no_go_wording_in_agentkit() -> None:
    problems = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, text in _strings(tree):
            for pattern, why in GO_WORDING:
                if pattern.search(text):
                    problems.append(f"{path.relative_to(ROOT.parent)}:{line}: {why}: {text[:80]!r}")
    assert not problems, "\n".join(problems)


def test_resuming_a_completed_run_says_so_and_differs_from_an_unknown_id() -> None:
    @tool
    def ask() -> str:
        """Asks a human."""
        return str(interrupt("ok?"))

    model = ScriptedChatModel([calls_message(call("ask", {}, id="a1")), "done"])
    runner = Runner(
        ChatModelAgent("a", "d", model, tools=[ask]), checkpoint_store=InMemoryCheckPointStore()
    )
    result = runner.invoke("go", with_checkpoint_id("cp"))
    assert result.interrupt is not None
    point = result.interrupt.contexts[0].id
    assert runner.resume("cp", targets={point: "yes"}).result().text == "done"

    with pytest.raises(CheckpointConsumedError) as consumed:
        runner.resume("cp")
    with pytest.raises(CheckpointNotFoundError) as unknown:
        runner.resume("never-saved")
    assert "'cp' was consumed: a resumed run of it completed at " in str(consumed.value)
    assert "start a new run" in str(consumed.value)
    assert str(unknown.value).startswith(
        "no checkpoint is saved under 'never-saved': no run saved one under this id, or it "
        "was deleted from the store"
    )
    assert "with_checkpoint_id" in str(unknown.value)


def test_an_unknown_id_in_a_store_with_a_ttl_names_the_ttl() -> None:
    class ExpiringStore(InMemoryCheckPointStore):
        ttl = 3600.0

    runner = Runner(ChatModelAgent("a", "d", ScriptedChatModel([])), checkpoint_store=ExpiringStore())
    with pytest.raises(CheckpointNotFoundError, match="it keeps a checkpoint 3600 seconds"):
        runner.resume("gone")


def test_resume_without_a_store_says_how_to_give_one() -> None:
    runner = Runner(ChatModelAgent("a", "d", ScriptedChatModel([])))
    with pytest.raises(ValueError) as caught:
        runner.resume("cp")
    assert str(caught.value) == (
        "cannot resume checkpoint 'cp': this Runner has no checkpoint store to load it from; "
        "create the Runner with checkpoint_store=... (the store the run was saved in)"
    )
