"""Logging on ``logging.getLogger("agentkit")``: transfers, interrupts, cancels and failures are
logged; the library prints nothing by itself."""

from __future__ import annotations

import logging

import pytest

from agentkit import (
    CancelHandle,
    ChatModelAgent,
    Runner,
    interrupt,
    set_sub_agents,
    tool,
    with_cancel,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message
from tests.transfer_support import transfer


def messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agentkit"]


def test_a_transfer_and_a_failure_are_logged_and_nothing_is_printed(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    router = ChatModelAgent("Router", "routes", ScriptedChatModel([transfer("Math", "t1")]))
    math = ChatModelAgent("Math", "does math", ScriptedChatModel([ValueError("bad model")]))
    with caplog.at_level(logging.DEBUG, logger="agentkit"):
        list(Runner(set_sub_agents(router, [math])).query("hi"))
    logged = messages(caplog)
    assert "agentkit: run of agent 'Router' starts" in logged
    assert "agentkit: agent 'Router' transfers to agent 'Math'" in logged
    assert "agentkit: run failed in agent 'Math': ValueError: bad model" in logged
    assert capsys.readouterr() == ("", "")


def test_an_interrupt_and_its_checkpoint_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    @tool
    def ask() -> str:
        """Ask the user."""
        return str(interrupt("sure?"))

    model = ScriptedChatModel([calls_message(call("ask", {}, id="c1"))])
    runner = Runner(ChatModelAgent("A", "d", model, tools=[ask]), checkpoint_store=InMemoryCheckPointStore())
    with caplog.at_level(logging.INFO, logger="agentkit"):
        list(runner.query("hi", with_checkpoint_id("cp")))
    assert messages(caplog) == [
        "agentkit: run interrupted by agent 'A' at agent:A;tool:ask:c1",
        "agentkit: run interrupted; checkpoint 'cp' saved",
    ]


def test_a_cancel_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    handle = CancelHandle()
    handle.cancel()  # before the run starts: it takes effect at once
    with caplog.at_level(logging.INFO, logger="agentkit"):
        events = list(Runner(ChatModelAgent("A", "d", ScriptedChatModel(["x"]))).query(
            "hi", with_cancel(handle)
        ))
    assert events[-1].err is not None
    assert any(m.startswith("agentkit: run cancelled (") for m in messages(caplog))
