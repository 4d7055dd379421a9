"""An approval sent the instant the interrupt arrives is accepted: the run's state says it is
waiting for approval before any reader can see the interrupt (in-process runs, Celery runs,
the sample app over HTTP)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentkit import (
    AgentRun,
    BaseAgent,
    ChatModelAgent,
    Role,
    Runner,
    assistant_message,
    event_from_message,
    interrupt,
    interrupt_event,
    tool,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.integrations.runs import LocalRuns
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message
from tests.redis_server import redis_url  # noqa: F401
from tests.sample_celery import GUARD, sample_on_celery, stream_frames

ROUNDS = 50
ANSWER = "All set: booked 2 nights in Lisbon, reference HTL-3689. Enjoy Lisbon!"


@tool
def pay(payee: str) -> str:
    """Pay a payee after a human approved it."""
    return f"paid {payee}" if interrupt(f"Pay {payee}?") else f"declined {payee}"


def payer() -> ChatModelAgent:
    def script(messages: list[Any]) -> Any:
        last = messages[-1]
        if last.role.value == "user":
            return calls_message(call("pay", {"payee": last.content}))
        return f"Done: {last.content}."

    return ChatModelAgent("payer", "pays", ScriptedChatModel(script), tools=[pay])


class TidyApprover(BaseAgent):
    """Asks for approval, then tidies up for a moment before its turn ends."""

    name = "tidy"
    description = "asks, then tidies up"

    def execute(self, run: AgentRun) -> None:
        if run.resume_info is None:
            run.emit(interrupt_event("Go ahead?"))
            time.sleep(TIDY)  # the run has not ended yet: its interrupt is its last event
            return
        approved = run.resume_info.resume_data
        run.emit(event_from_message(assistant_message(f"approved: {approved}"), None,
                                    Role.ASSISTANT))


TIDY = 0.3  # seconds


@pytest.mark.parametrize("agent", [payer(), TidyApprover()], ids=["payer", "tidy"])
def test_local_runs_accept_an_approval_the_moment_the_interrupt_is_read(agent: Any) -> None:
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    with LocalRuns({"payer": runner}) as runs:
        for number in range(ROUNDS if agent.name == "payer" else 3):
            run_id = runs.submit("payer", f"ACME-{number}", owner=None)
            with runs.events(run_id, owner=None, idle_timeout=GUARD) as stream:
                for entry in stream:
                    if entry.kind == "agent" and entry.data.get("action", {}).get("interrupted"):
                        break
                else:
                    pytest.fail("the run ended without an interrupt")
            # At once: the reader has seen the interrupt, so the run can be approved.
            [interrupt_id] = runs.interrupts(run_id, owner=None)
            after = runs.resume(run_id, {interrupt_id: True}, owner=None)
            with runs.events(run_id, after, owner=None, idle_timeout=GUARD) as rest:
                end = list(rest)[-1]
            expected = f"Done: paid ACME-{number}." if agent.name == "payer" else "approved: True"
            assert end.data["answer"] == expected


def test_the_sample_app_on_celery_accepts_an_approval_the_instant_the_interrupt_arrives(
    redis_url: str,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with sample_on_celery(redis_url, tmp_path, monkeypatch) as url, httpx.Client(
        base_url=url, timeout=GUARD
    ) as http:
        http.get("/")  # the session cookie (the owner of the runs)
        refused = []
        for number in range(ROUNDS):
            message = {"message": f"Plan a weekend in Lisbon ({number})"}
            with http.stream("POST", "/api/runs", json=message) as response:
                run_id = response.headers["x-run-id"]
                for kind, data in stream_frames(response):
                    if kind == "agent" and data.get("action", {}).get("interrupted"):
                        # The instant the interrupt arrives, before the stream's end.
                        approval = http.post(
                            f"/api/runs/{run_id}/resume", json={"approve": True}
                        )
                        break
                else:
                    pytest.fail(f"run {run_id} ended without an interrupt")
            if approval.status_code != 200:
                refused.append((approval.status_code, approval.text))
                continue
            end = [data for kind, data in _frames(approval.text) if kind == "end"]
            assert end[-1]["status"] == "completed" and end[-1]["answer"] == ANSWER
        assert refused == [], f"{len(refused)} of {ROUNDS} approvals refused: {refused[:3]}"


def _frames(body: str) -> list[tuple[str, dict[str, Any]]]:
    result = []
    for block in body.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields and "data" in fields:
            result.append((fields["event"], json.loads(fields["data"])))
    return result

