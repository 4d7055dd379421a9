"""Token and cost budgets hold under fan-out (issue 49, A15).

Before, a model call was checked against what *finished* calls had used, so six parallel
branches all passed the check at once and spent 4-5 times ``RunLimits(cost=0.15)``. A call now
reserves what it is expected to use before it starts: the spend beyond the budget is at most
one call's.

The calls really overlap: every model call waits at a gate until all six callers have come (on
a run that lets them all in at once) or until the gate's guard timeout (on a run that holds
some back). The gate's timeout only bounds the test; the assertions hold whichever way the
threads are scheduled.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import attrs
import pytest

from agentkit import (
    AgentTool,
    CancelMode,
    ChatModelAgent,
    Message,
    ModelPricing,
    ParallelAgent,
    ResponseMeta,
    RunLimitError,
    RunLimits,
    Runner,
    TokenUsage,
    assistant_message,
    tool,
    user_message,
    with_chat_model_options,
    with_limits,
)
from agentkit._observe import CallEstimate, UsageLedger
from agentkit._scope import RunScope
from agentkit.errors import AgentCancelledError
from agentkit.models import ScriptedChatModel
from agentkit.schema import Role
from agentkit.testing import call, calls_message, no_thread_leak

FAN_OUT = 6
CALL_COST = 0.05  # every model call: 40,000 prompt + 5,000 completion tokens at the prices below
PRICING = ModelPricing(input_per_million=1.0, output_per_million=2.0)
USAGE = TokenUsage(prompt_tokens=40_000, completion_tokens=5_000, total_tokens=45_000)
BUDGET = 0.15
GATE_GUARD = 2.0


class Gate:
    """Holds each model call until ``FAN_OUT`` calls came, or for ``GATE_GUARD`` seconds."""

    def __init__(self) -> None:
        self.arrived = 0
        self.most_at_once = 0
        self.inside = 0
        self.condition = threading.Condition()

    def __call__(self) -> None:
        with self.condition:
            self.arrived += 1
            self.inside += 1
            self.most_at_once = max(self.most_at_once, self.inside)
            self.condition.notify_all()
            self.condition.wait_for(lambda: self.arrived >= FAN_OUT, timeout=GATE_GUARD)
            self.inside -= 1


def priced(reply: Message) -> Message:
    return attrs.evolve(reply, response_meta=ResponseMeta(usage=USAGE))


def branch_model(gate: Gate, name: str) -> ScriptedChatModel:
    """A model that calls two tools at once, then answers: two calls of ``CALL_COST`` each."""

    def answer(messages: Sequence[Message]) -> Message:
        gate()
        if messages[-1].role is Role.TOOL:
            return priced(assistant_message(f"{name} done"))
        return priced(calls_message(call("look", {"what": "a"}), call("look", {"what": "b"})))

    return ScriptedChatModel(answer, pricing=PRICING)


@tool
def look(what: str) -> str:
    """Look something up.

    Args:
        what: what to look up.
    """
    return f"found {what}"


def spent_beyond_the_budget(runner: Runner) -> float:
    result = runner.run([user_message("go")], with_limits(RunLimits(cost=BUDGET))).result(raise_errors=False)
    assert isinstance(result.error, RunLimitError) and result.error.limit == "cost"
    assert result.cost is not None
    return result.cost - BUDGET


def test_six_parallel_branches_spend_at_most_one_call_beyond_the_cost_budget() -> None:
    gate = Gate()
    branches = [
        ChatModelAgent(f"b{i}", "d", branch_model(gate, f"b{i}"), tools=[look])
        for i in range(FAN_OUT)
    ]
    with no_thread_leak():
        beyond = spent_beyond_the_budget(Runner(ParallelAgent("team", "d", branches)))
    assert beyond <= CALL_COST + 1e-9, f"spent {beyond:.2f} beyond a budget of {BUDGET}"


def test_six_agents_called_as_parallel_tools_spend_at_most_one_call_beyond_the_budget() -> None:
    gate = Gate()
    helpers = [
        ChatModelAgent(f"h{i}", "d", branch_model(gate, f"h{i}"), tools=[look])
        for i in range(FAN_OUT)
    ]
    boss = ChatModelAgent(
        "boss",
        "d",
        ScriptedChatModel(
            [calls_message(*(call(f"h{i}", {"request": "go"}) for i in range(FAN_OUT))), "done"]
        ),
        tools=[AgentTool(helper) for helper in helpers],
    )
    with no_thread_leak():
        beyond = spent_beyond_the_budget(Runner(boss))
    assert beyond <= CALL_COST + 1e-9, f"spent {beyond:.2f} beyond a budget of {BUDGET}"


def test_calls_that_fit_the_budget_still_run_at_once() -> None:
    # A budget far from spent holds nobody back: once a call has shown what calls cost, the
    # six branches' calls overlap.
    gate = Gate()
    branches = [
        ChatModelAgent(f"b{i}", "d", branch_model(gate, f"b{i}"), tools=[look])
        for i in range(FAN_OUT)
    ]
    runner = Runner(ParallelAgent("team", "d", branches))
    result = runner.run([user_message("go")], with_limits(RunLimits(cost=10.0))).result()
    assert result.cost == pytest.approx(2 * FAN_OUT * CALL_COST)
    assert gate.most_at_once >= FAN_OUT - 1


def test_a_request_with_max_tokens_is_estimated_before_any_call_finished() -> None:
    # With max_tokens the whole cost of a call is known from its request: six calls that fit
    # the budget are let in at once from the start.
    gate = Gate()
    branches = [
        ChatModelAgent(f"b{i}", "d", branch_model(gate, f"b{i}"), tools=[look])
        for i in range(FAN_OUT)
    ]
    runner = Runner(ParallelAgent("team", "d", branches))
    result = runner.run(
        [user_message("go")], with_limits(RunLimits(cost=10.0)), with_chat_model_options(max_tokens=5_000)
    ).result()
    assert result.error is None
    assert gate.most_at_once == FAN_OUT


# --- the wait for room ----------------------------------------------------------------------


def test_a_call_waiting_for_room_ends_at_once_on_an_immediate_cancel() -> None:
    ledger = UsageLedger(RunLimits(cost=BUDGET))
    scope = RunScope()
    first_estimate = CallEstimate("a", 100, pricing=PRICING)
    first = ledger.begin("model_calls", first_estimate, scope)  # alone: nothing answered yet
    assert first is not None
    outcome: list[BaseException | None] = []

    def second() -> None:
        try:
            ledger.begin("model_calls", CallEstimate("b", 100, pricing=PRICING), scope)
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    waiter = threading.Thread(target=second)
    waiter.start()
    scope.request_cancel(CancelMode.IMMEDIATE)
    waiter.join(timeout=10)  # a guard: the cancel wakes the wait, the first call never ends
    assert not waiter.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], AgentCancelledError)
    ledger.release(first, first_estimate, answered=True)
    assert ledger.snapshot().model_calls == 1  # the cancelled call was never counted


def test_a_call_that_does_not_fit_waits_for_a_running_one_then_goes() -> None:
    ledger = UsageLedger(RunLimits(cost=BUDGET))
    scope = RunScope()
    first_estimate = CallEstimate("a", 100, pricing=PRICING)
    first = ledger.begin("model_calls", first_estimate, scope)
    assert first is not None
    admitted = threading.Event()

    def second() -> None:
        ledger.begin("model_calls", CallEstimate("b", 100, pricing=PRICING), scope)
        admitted.set()

    waiter = threading.Thread(target=second)
    waiter.start()
    assert ledger.snapshot().model_calls == 1  # the second call is not counted while it waits
    ledger.add("a", USAGE, CALL_COST)
    ledger.release(first, first_estimate, answered=True)
    assert admitted.wait(timeout=10)
    waiter.join(timeout=10)
    assert ledger.snapshot().model_calls == 2
