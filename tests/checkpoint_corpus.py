"""The agent trees behind the checkpoint corpus in ``tests/fixtures/checkpoints/``.

A checkpoint written by one version of agentkit must load and resume to the same result in every
later version. ``tests/fixtures/checkpoints/make_corpus.py`` runs each scenario below until it
stops and stores the checkpoint bytes with what resuming them gives; ``test_checkpoint_corpus.py``
resumes the stored bytes with today's code and compares. Change a scenario only together with a
new corpus entry: the stored ones are a promise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from agentkit import (
    AgentEvent,
    AgentInput,
    AgentRunOption,
    AgentTool,
    CancelHandle,
    ChatModelAgent,
    LoopAgent,
    Message,
    ModelError,
    ModelPricing,
    ParallelAgent,
    ResponseMeta,
    ResumeInfo,
    Role,
    RunLimits,
    SequentialAgent,
    TokenUsage,
    assistant_message,
    check_cancelled,
    event_from_message,
    interrupt,
    interrupt_event,
    run_in_worker,
    set_sub_agents,
    tool,
    with_cancel,
    with_limits,
    with_session_values,
)
from agentkit.models import ScriptedChatModel
from agentkit.prebuilt import supervisor
from agentkit.schema import FunctionCall, ToolCall

CORPUS_KEY = b"agentkit checkpoint corpus key, not a secret"


def _call(name: str, call_id: str, arguments: str = "{}") -> ToolCall:
    return ToolCall(id=call_id, function=FunctionCall(name, arguments))


def _tool_results(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.role is Role.TOOL]


def payer(name: str = "Payer", amount: int = 5) -> ChatModelAgent:
    """Pays once a human approved; the model answers with what the tool said."""

    @tool
    def pay(amount: int) -> str:
        """Pay an amount after approval."""
        decision = interrupt(f"approve paying {amount}?", state={"amount": amount})
        return f"paid {amount}" if decision else "payment declined"

    def reply(messages: list[Message]) -> Message:
        results = [m for m in _tool_results(messages) if m.tool_name == "pay"]
        if not results:
            return assistant_message("", [_call("pay", f"{name}-p", f'{{"amount": {amount}}}')])
        return assistant_message(f"{name}: {results[-1].content}")

    return ChatModelAgent(name, f"{name} pays bills", ScriptedChatModel(reply), tools=[pay])


def priced_payer() -> ChatModelAgent:
    """A payer whose model reports token usage (cached tokens too) and has pricing: its
    history holds replies with a cost."""

    @tool
    def pay(amount: int) -> str:
        """Pay an amount after approval."""
        decision = interrupt(f"approve paying {amount}?")
        return f"paid {amount}" if decision else "payment declined"

    def reply(messages: list[Message]) -> Message:
        results = _tool_results(messages)
        message = (
            assistant_message(f"Payer: {results[-1].content}")
            if results
            else assistant_message("", [_call("pay", "priced-p", '{"amount": 7}')])
        )
        usage = TokenUsage(100 * len(messages), 20, 100 * len(messages) + 20, cached_tokens=50)
        return attrs.evolve(message, response_meta=ResponseMeta("stop", usage))

    model = ScriptedChatModel(reply, pricing=ModelPricing(1.0, 4.0, cached_input_per_million=0.5))
    return ChatModelAgent("Payer", "pays bills", model, tools=[pay])


def stepper() -> ChatModelAgent:
    """Looks something up, then answers: two model calls."""

    @tool
    def look(what: str) -> str:
        """Look something up."""
        return f"found {what}"

    def reply(messages: list[Message]) -> Message:
        results = _tool_results(messages)
        if results:
            return assistant_message(f"Stepper: {results[-1].content}")
        return assistant_message("", [_call("look", "step-1", '{"what": "news"}')])

    return ChatModelAgent("Stepper", "looks things up", ScriptedChatModel(reply), tools=[look])


def echo(name: str) -> ChatModelAgent:
    """Answers with its name and how many messages it saw."""

    def reply(messages: list[Message]) -> Message:
        return assistant_message(f"{name} saw {len(messages)} messages")

    return ChatModelAgent(name, f"{name} echoes", ScriptedChatModel(reply))


class Asker:
    """A custom agent that asks a question and, resumed, answers with the reply."""

    name = "Asker"
    description = "asks a human"

    def run(self, input: AgentInput, *options: AgentRunOption) -> Any:
        def work(gen: Any) -> None:
            gen.send(interrupt_event("what is your name?", state={"asked": 1}))

        return run_in_worker(work)

    def resume(self, info: ResumeInfo, *options: AgentRunOption) -> Any:
        def work(gen: Any) -> None:
            text = f"hello {info.resume_data}, state {info.interrupt_state}"
            gen.send(event_from_message(assistant_message(text), None, Role.ASSISTANT))

        return run_in_worker(work)


def agent_tool_boss() -> ChatModelAgent:
    def reply(messages: list[Message]) -> Message:
        results = _tool_results(messages)
        if not results:
            return assistant_message("", [_call("Payer", "boss-1", '{"request": "pay 5"}')])
        return assistant_message(f"boss: {results[-1].content}")

    return ChatModelAgent("Boss", "delegates", ScriptedChatModel(reply), tools=[AgentTool(payer())])


def router() -> Any:
    def reply(messages: list[Message]) -> Message:
        if not _tool_results(messages):
            return assistant_message(
                "", [_call("transfer_to_agent", "r-1", '{"agent_name": "Payer"}')]
            )
        return assistant_message("router done")

    return set_sub_agents(ChatModelAgent("Router", "routes", ScriptedChatModel(reply)), [payer()])


def team() -> Any:
    def boss_reply(messages: list[Message]) -> Message:
        transfers = [m for m in _tool_results(messages) if m.tool_name == "transfer_to_agent"]
        if not transfers:
            return assistant_message(
                "", [_call("transfer_to_agent", "s-1", '{"agent_name": "Payer"}')]
            )
        return assistant_message("supervisor sums up")

    boss = ChatModelAgent("Sup", "supervises", ScriptedChatModel(boss_reply))
    return supervisor.new(boss, [payer()])


@attrs.define
class Canceller:
    """A parallel run in which one branch cancels the run while its tool works."""

    handle: CancelHandle = attrs.Factory(CancelHandle)

    def build(self, first: bool) -> Any:
        handle = self.handle

        @tool
        def slow() -> str:
            """Cancels the run while it works (in the first run only)."""
            if first:
                handle.cancel()
                check_cancelled()
            return "slow result"

        def reply(messages: list[Message]) -> Message:
            if not _tool_results(messages):
                return assistant_message("", [_call("slow", "c-1")])
            return assistant_message(f"slow: {_tool_results(messages)[-1].content}")

        slow_agent = ChatModelAgent("Slow", "slow", ScriptedChatModel(reply), tools=[slow])
        return ParallelAgent("P", "d", [echo("Fast"), slow_agent])


def failing(first: bool) -> ChatModelAgent:
    """Looks something up, then the model server fails (first run); resumed, it answers."""

    @tool
    def lookup() -> str:
        """Looks something up."""
        return "found"

    def reply(messages: list[Message]) -> Message:
        if not _tool_results(messages):
            return assistant_message("", [_call("lookup", "f-1")])
        if first:
            raise ModelError("the model server is down")
        return assistant_message("answer from what was found")

    return ChatModelAgent("Looker", "looks up", ScriptedChatModel(reply), tools=[lookup])


@attrs.frozen
class Scenario:
    """One corpus entry: how to build the agent (for the first run, or for the resume), and the
    options of the first run."""

    name: str
    build: Callable[[bool], Any]
    options: Callable[[], tuple[AgentRunOption, ...]] = lambda: ()
    resume_data: Any = True  # given to every interrupt point on resume
    resume_after_completion: bool = False  # store the tombstone a completed resume leaves


def _same(make: Callable[[], Any]) -> Callable[[bool], Any]:
    return lambda first: make()


_canceller = Canceller()


def _cancel_build(first: bool) -> Any:
    _canceller.handle = CancelHandle()
    return _canceller.build(first)

SCENARIOS = [
    Scenario("tool_interrupt", _same(payer)),
    Scenario(
        "sequential",
        _same(lambda: SequentialAgent("S", "d", [echo("Pre"), payer(), echo("Post")])),
        lambda: (with_session_values({"customer": "ACME", "limit": 100}),),
    ),
    Scenario(
        "parallel",
        _same(lambda: ParallelAgent("P", "d", [payer("A", 1), payer("B", 2), echo("Plain")])),
    ),
    Scenario(
        "loop", _same(lambda: LoopAgent("L", "d", [payer(), echo("After")], max_iterations=1))
    ),
    Scenario("agent_tool", _same(agent_tool_boss)),
    Scenario("transfer", _same(router)),
    Scenario("supervisor", _same(team)),
    Scenario("custom_agent", _same(Asker), resume_data="Ada"),
    Scenario("cancelled_parallel", _cancel_build, lambda: (with_cancel(_canceller.handle),)),
    Scenario("failed_run", failing),
    Scenario("consumed", _same(payer), resume_after_completion=True),
    # Run limits (issue 28): the checkpoint holds what the run used and its limits; the first
    # interrupts for an approval within its limits and its resume completes, the second paused
    # on a reached limit (a LimitReached), and its resume keeps the saved limits: it pauses
    # again before any call.
    Scenario(
        "within_limits",
        _same(priced_payer),
        lambda: (with_limits(RunLimits(model_calls=10, cost=1.0)),),
    ),
    Scenario("limit_reached", _same(stepper), lambda: (with_limits(RunLimits(model_calls=1)),)),
]


def summaries(events: list[AgentEvent]) -> list[list[Any]]:
    """JSON-friendly summaries of events (see ``agentkit.testing.summarize``)."""
    from agentkit.testing import summarize

    return [list(summarize(event)) for event in events]
