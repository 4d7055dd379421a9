"""Human in the loop, nested: an approval deep inside a plan-execute agent inside a supervisor.

A project manager (a supervisor) delegates to a research agent and to a plan-execute-replan
agent that runs the project step by step. One of the executor's tools, ``allocate_budget``,
needs a human's approval: the interrupt comes from four levels down (supervisor >
plan-execute > its loop > executor > the tool call), the whole run stops with one checkpoint,
and resuming it with the decision goes back down to that call and on to the end
(eino-examples ``human-in-the-loop/8_supervisor-plan-execute``, which combines
``5_supervisor`` and ``6_plan-execute-replan``).

    python samples/hitl_supervisor_plan_execute.py                 # asks on stdin
    python samples/hitl_supervisor_plan_execute.py --approve yes
    python samples/hitl_supervisor_plan_execute.py --approve no

Offline by default (scripted models); live with ``OPENAI_API_KEY`` (see samples/quickstart.py).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import uuid
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import banner, make_model

from agentkit import (
    Agent,
    AgentEvent,
    ApprovalRequest,
    Approve,
    ChatModelAgent,
    Message,
    Reject,
    Role,
    Runner,
    print_events,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.prebuilt import planexecute, supervisor
from agentkit.testing import call, calls_message

DEFAULT_REQUEST = "Launch our mobile banking app in Q3: research the market, then run the project."

STEPS = (
    "Analyze the requirements of the mobile banking app launch.",
    "Allocate a budget of 50000 USD for the launch.",
    "Assign the launch team.",
)


# --- tools ---------------------------------------------------------------------------------


@tool
def search_info(query: str) -> str:
    """Search market research notes.

    Args:
        query: what to look for.
    """
    return (
        "Mobile banking: 68% of adults bank on their phone; top asks are instant transfers "
        "and card controls."
    )


@tool
def analyze_requirements(project: str) -> str:
    """List the requirements of a project.

    Args:
        project: the project to analyze.
    """
    return "requirements: instant transfers, card freeze, biometric login, app store review by July"


@tool(needs_approval=True)
def allocate_budget(amount_usd: int, purpose: str) -> str:
    """Allocate budget to a project. A human approves every allocation.

    Args:
        amount_usd: the amount in US dollars.
        purpose: what the money is for.
    """
    return f"allocated {amount_usd} USD for {purpose} (budget code B-{amount_usd // 1000:03d})"


@tool
def assign_team(project: str) -> str:
    """Assign a team to a project.

    Args:
        project: the project to staff.
    """
    return "team: 2 iOS, 2 Android, 1 backend, 1 QA, lead Dana"


# --- the offline script: what the models answer --------------------------------------------


def said_by(messages: list[Message], agent: str) -> str | None:
    marker = f"For context: [{agent}] said: "
    for message in reversed(messages):
        if message.role is Role.USER and message.content.startswith(marker):
            return message.content[len(marker) :]
    return None


def scripted_manager(messages: list[Message]) -> Message | str:
    """Plays the project manager: research first, then the project, then a summary."""
    if said_by(messages, "research_agent") is None:
        return calls_message(call("transfer_to_agent", {"agent_name": "research_agent"}))
    outcome = said_by(messages, "replanner")
    if outcome is None:
        return calls_message(call("transfer_to_agent", {"agent_name": "plan_execute_replan"}))
    return f"Project status: {outcome.rstrip('.')}."


def scripted_researcher(messages: list[Message]) -> Message | str:
    if messages[-1].role is Role.TOOL:
        return f"Market: {messages[-1].content}"
    return calls_message(call("search_info", {"query": "mobile banking app market"}))


def scripted_planner(messages: list[Message]) -> Message:
    return calls_message(call("plan", {"steps": list(STEPS)}))


def scripted_executor(messages: list[Message]) -> Message | str:
    """Does the step its input ends with: one tool call, then a one-line report."""
    user = next(m for m in messages if m.role is Role.USER)
    step = user.content.rstrip().rsplit("\n", 1)[-1].lower()
    if messages[-1].role is Role.TOOL:
        return messages[-1].content
    if "requirements" in step:
        return calls_message(
            call("analyze_requirements", {"project": "mobile banking app"}, id="req")
        )
    if "budget" in step:
        return calls_message(
            call(
                "allocate_budget",
                {"amount_usd": 50000, "purpose": "mobile app launch"},
                id="budget",
            )
        )
    return calls_message(call("assign_team", {"project": "mobile banking app"}, id="team"))


def scripted_replanner(messages: list[Message]) -> Message:
    """Drops the finished step; responds with the results once every step is done."""
    user = next(m for m in messages if m.role is Role.USER)
    results = re.findall(r"^Result: (.*)$", user.content, flags=re.MULTILINE)
    if len(results) < len(STEPS):
        return calls_message(call("plan", {"steps": list(STEPS[len(results) :])}))
    return calls_message(call("respond", {"response": "; ".join(results) + "."}))


def build_agent() -> Agent:
    """The project manager over the research agent and the plan-execute agent."""
    research = ChatModelAgent(
        "research_agent",
        "researches markets and facts",
        make_model(scripted_researcher),
        instruction="Research with search_info and answer with the key facts in one sentence.",
        tools=[search_info],
    )
    project = planexecute.new(
        planexecute.new_planner(make_model(scripted_planner)),
        planexecute.new_executor(
            make_model(scripted_executor),
            tools=[analyze_requirements, allocate_budget, assign_team],
        ),
        planexecute.new_replanner(make_model(scripted_replanner)),
    )
    manager = ChatModelAgent(
        "project_manager",
        "runs projects with a research agent and a project execution agent",
        make_model(scripted_manager),
        instruction=(
            "You manage projects. First transfer to research_agent for the facts, then to "
            "plan_execute_replan to run the project. Then report the outcome in two sentences."
        ),
    )
    return supervisor.new(manager, [research, project])


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Run the project; approve or reject the budget; resume; returns every event."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("request", nargs="?", default=DEFAULT_REQUEST)
    parser.add_argument("--approve", choices=["yes", "no"], help="answer without asking")
    args = parser.parse_args(argv)
    banner("supervisor with plan-execute, approval deep inside")
    runner = Runner(build_agent(), checkpoint_store=InMemoryCheckPointStore())
    checkpoint_id = f"project-{uuid.uuid4().hex[:8]}"
    print(f"> {args.request}")
    events = print_events(
        runner.query(args.request, with_checkpoint_id(checkpoint_id)), show_run_path=True
    )
    everything = list(events)
    while events and events[-1].action is not None and events[-1].action.interrupted is not None:
        (point,) = events[-1].action.interrupted.contexts
        request = point.info
        assert isinstance(request, ApprovalRequest)
        print("\nAPPROVAL REQUIRED")
        print(f"  where: {' > '.join(point.address)}")
        print(f"  what:  {request.tool_name}({request.arguments})")
        answer = args.approve or input("approve? (yes/no): ").strip().lower()
        decision = (
            Approve() if answer in ("y", "yes") else Reject(reason="the budget was not approved")
        )
        print(f"decision: {decision!r}\n")
        events = print_events(
            runner.resume(checkpoint_id, targets={point.id: decision}), show_run_path=True
        )
        everything += events
    return everything


if __name__ == "__main__":
    main()
