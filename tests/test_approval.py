"""Declarative approval: ``@tool(needs_approval=...)`` and ``with_approval(tool)``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentkit import (
    AgentTool,
    ApprovalRequest,
    Approve,
    ChatModelAgent,
    Reject,
    Role,
    Runner,
    RunResult,
    ToolError,
    ToolInfo,
    tool,
    with_approval,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.errors import ResumeError
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message

ROOT = Path(__file__).resolve().parent.parent


def make_pay(ran: list[dict[str, Any]], needs_approval: Any = True) -> Any:
    @tool(needs_approval=needs_approval)
    def pay(payee: str, amount: int) -> str:
        """Pay someone."""
        ran.append({"payee": payee, "amount": amount})
        return f"paid {amount} to {payee}"

    return pay


def start(ran: list[dict[str, Any]], amount: int = 120, **kwargs: Any) -> tuple[Runner, RunResult, ScriptedChatModel]:
    model = ScriptedChatModel(
        [
            calls_message(call("pay", {"payee": "ACME", "amount": amount}, id="p1")),
            lambda messages: f"model saw: {messages[-1].content}",
        ]
    )
    agent = ChatModelAgent("payer", "pays", model, tools=[make_pay(ran, **kwargs)])
    runner = Runner(agent, checkpoint_store=InMemoryCheckPointStore())
    return runner, runner.invoke("pay ACME", with_checkpoint_id("cp")), model


def point_of(result: RunResult) -> str:
    assert result.interrupt is not None
    [context] = result.interrupt.contexts
    return context.id


def test_a_call_needing_approval_interrupts_with_an_approval_request() -> None:
    ran: list[dict[str, Any]] = []
    _, result, _ = start(ran)
    assert result.interrupt is not None
    [context] = result.interrupt.contexts
    assert context.info == ApprovalRequest("pay", "p1", {"payee": "ACME", "amount": 120})
    assert context.address[-1] == "tool:pay:p1"
    assert ran == []


@pytest.mark.parametrize("decision", [True, Approve()])
def test_approve_runs_the_call_as_the_model_made_it(decision: Any) -> None:
    ran: list[dict[str, Any]] = []
    runner, result, _ = start(ran)
    resumed = runner.resume("cp", targets={point_of(result): decision}).result()
    assert ran == [{"payee": "ACME", "amount": 120}]
    assert resumed.text == "model saw: paid 120 to ACME"


def test_approve_with_arguments_runs_the_edited_call() -> None:
    ran: list[dict[str, Any]] = []
    runner, result, _ = start(ran)
    edit = Approve(arguments={"payee": "ACME", "amount": 100})
    resumed = runner.resume("cp", targets={point_of(result): edit}).result()
    assert ran == [{"payee": "ACME", "amount": 100}]
    assert resumed.text == "model saw: paid 100 to ACME"


@pytest.mark.parametrize(
    ("decision", "told"),
    [
        (False, "The user rejected this call of pay; it was not run."),
        (
            Reject(reason="too expensive"),
            "The user rejected this call of pay; it was not run. Reason: too expensive",
        ),
    ],
)
def test_reject_does_not_run_the_call_and_tells_the_model(decision: Any, told: str) -> None:
    ran: list[dict[str, Any]] = []
    runner, result, model = start(ran)
    resumed = runner.resume("cp", targets={point_of(result): decision}).result()
    assert ran == []
    tool_message = model.calls[-1].messages[-1]
    assert (tool_message.role, tool_message.tool_call_id, tool_message.content) == (
        Role.TOOL,
        "p1",
        told,
    )
    assert resumed.text == f"model saw: {told}"


def test_a_policy_function_decides_per_call() -> None:
    ran: list[dict[str, Any]] = []
    seen: list[dict[str, Any]] = []

    def over_100(arguments: dict[str, Any]) -> bool:
        seen.append(arguments)
        return bool(arguments["amount"] > 100)

    _, small, _ = start(ran, amount=50, needs_approval=over_100)
    assert small.interrupt is None and small.text == "model saw: paid 50 to ACME"
    _, big, _ = start(ran, amount=500, needs_approval=over_100)
    assert big.interrupt is not None
    assert seen == [{"payee": "ACME", "amount": 50}, {"payee": "ACME", "amount": 500}]


def test_invalid_arguments_go_back_to_the_model_without_asking() -> None:
    ran: list[dict[str, Any]] = []
    model = ScriptedChatModel(
        [calls_message(call("pay", {"payee": "ACME"}, id="p1")), lambda m: m[-1].content]
    )
    agent = ChatModelAgent("payer", "pays", model, tools=[make_pay(ran)])
    result = Runner(agent).invoke("pay")
    assert result.interrupt is None
    assert "'amount' is required" in result.text


def test_edited_arguments_are_checked_too() -> None:
    ran: list[dict[str, Any]] = []
    runner, result, _ = start(ran)
    edit = Approve(arguments={"payee": "ACME", "amount": "lots"})
    resumed = runner.resume("cp", targets={point_of(result): edit}).result()
    assert ran == []
    assert "'amount' must be an integer" in resumed.text


def test_resume_data_that_is_not_a_decision_fails_the_call() -> None:
    ran: list[dict[str, Any]] = []
    runner, result, _ = start(ran)
    with pytest.raises(ToolError) as caught:
        runner.resume("cp", targets={point_of(result): "yes please"}).result()
    assert isinstance(caught.value.__cause__, ResumeError) or "Approve(...)" in str(caught.value)
    assert ran == []


def test_needs_approval_must_be_a_bool_or_a_function() -> None:
    with pytest.raises(TypeError, match="needs_approval must be True, False or a function"):
        tool(needs_approval="always")  # type: ignore[call-overload]


class Transfer:
    """A hand-written tool class (like an MCP tool): invoke only."""

    def __init__(self, ran: list[str]) -> None:
        self.ran = ran

    def info(self) -> ToolInfo:
        return ToolInfo("transfer", "move money", {"type": "object", "properties": {}})

    def invoke(self, arguments: str, **options: Any) -> str:
        self.ran.append(arguments)
        what: str = json.loads(arguments)["what"]
        return "moved " + what


def test_with_approval_guards_any_tool() -> None:
    ran: list[str] = []
    model = ScriptedChatModel(
        [calls_message(call("transfer", {"what": "gold"}, id="t1")), lambda m: m[-1].content]
    )
    guarded = with_approval(Transfer(ran))
    assert guarded.info().name == "transfer"
    runner = Runner(
        ChatModelAgent("bank", "d", model, tools=[guarded]),
        checkpoint_store=InMemoryCheckPointStore(),
    )
    result = runner.invoke("move", with_checkpoint_id("t"))
    [context] = result.interrupt.contexts  # type: ignore[union-attr]
    assert context.info == ApprovalRequest("transfer", "t1", {"what": "gold"})
    edited = runner.resume("t", targets={context.id: Approve(arguments={"what": "silver"})})
    assert edited.result().text == "moved silver"
    assert ran == ['{"what": "silver"}']


def test_with_approval_guards_an_agent_tool() -> None:
    inner = ChatModelAgent("researcher", "researches", ScriptedChatModel(["deep answer"]))
    model = ScriptedChatModel(
        [
            calls_message(call("researcher", {"request": "dig"}, id="r1")),
            lambda m: f"outer: {m[-1].content}",
        ]
    )
    outer = ChatModelAgent(
        "boss", "d", model, tools=[with_approval(AgentTool(inner))]
    )
    runner = Runner(outer, checkpoint_store=InMemoryCheckPointStore())
    result = runner.invoke("go", with_checkpoint_id("a"))
    [context] = result.interrupt.contexts  # type: ignore[union-attr]
    assert isinstance(context.info, ApprovalRequest) and context.info.tool_name == "researcher"
    resumed = runner.resume("a", targets={context.id: True}).result()
    assert resumed.text == "outer: deep answer"


def test_an_approved_agent_tool_that_interrupts_inside_is_not_asked_again() -> None:
    from agentkit import interrupt

    @tool
    def confirm() -> str:
        """Ask the user."""
        return "confirmed: " + str(interrupt("really?"))

    inner_model = ScriptedChatModel(
        [calls_message(call("confirm", {}, id="i1")), lambda m: f"inner: {m[-1].content}"]
    )
    inner = ChatModelAgent("helper", "helps", inner_model, tools=[confirm])
    model = ScriptedChatModel(
        [
            calls_message(call("helper", {"request": "go"}, id="h1")),
            lambda m: f"outer: {m[-1].content}",
        ]
    )
    runner = Runner(
        ChatModelAgent("boss", "d", model, tools=[with_approval(AgentTool(inner))]),
        checkpoint_store=InMemoryCheckPointStore(),
    )
    first = runner.invoke("go", with_checkpoint_id("n"))
    assert isinstance(first.interrupt.contexts[0].info, ApprovalRequest)  # type: ignore[union-attr]
    second = runner.resume("n", targets={point_of(first): True}).result()
    [context] = second.interrupt.contexts  # type: ignore[union-attr]
    assert context.info == "really?"
    third = runner.resume("n", targets={context.id: "yes"}).result()
    assert third.text == "outer: inner: confirmed: yes"


def test_a_streaming_tool_waits_for_approval_in_a_streaming_run() -> None:
    ran: list[str] = []

    @tool(needs_approval=True)
    def count(n: int):  # type: ignore[no-untyped-def]
        """Count to n."""
        ran.append("count")
        for i in range(n):
            yield str(i)

    def reply(messages: list[Any]) -> Any:
        if messages[-1].role is Role.USER:
            return calls_message(call("count", {"n": 3}, id="c"))
        return f"got {messages[-1].content}"

    model = ScriptedChatModel(reply)
    runner = Runner(
        ChatModelAgent("a", "d", model, tools=[count]),
        enable_streaming=True,
        checkpoint_store=InMemoryCheckPointStore(),
    )
    result = runner.invoke("count", with_checkpoint_id("s"))
    assert ran == []
    approved = runner.resume("s", targets={point_of(result): True}).result()
    assert approved.text == "got 012"
    result = runner.invoke("count", with_checkpoint_id("s2"))
    rejected = runner.resume("s2", targets={point_of(result): Reject("no")}).result()
    assert rejected.text.startswith("got The user rejected this call of count")
    assert ran == ["count"]


SCRIPT = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {root!r})
    from agentkit import Approve, ChatModelAgent, Reject, Runner, tool, with_checkpoint_id
    from agentkit.checkpoint import FileCheckPointStore
    from agentkit.models import ScriptedChatModel
    from agentkit.testing import call, calls_message

    @tool(needs_approval=True)
    def pay(payee: str, amount: int) -> str:
        '''Pay someone.'''
        return f"paid {{amount}} to {{payee}}"

    def model_reply(messages):
        last = messages[-1]
        if last.role.value == "user":
            return calls_message(call("pay", {{"payee": "ACME", "amount": 120}}, id="p1"))
        return "final: " + last.content

    runner = Runner(
        ChatModelAgent("payer", "pays", ScriptedChatModel(model_reply), tools=[pay]),
        checkpoint_store=FileCheckPointStore({store!r}),
    )
    if sys.argv[1] == "run":
        result = runner.invoke("pay", with_checkpoint_id("proc"))
        [context] = result.interrupt.contexts
        print(json.dumps([context.id, context.info.tool_name, context.info.arguments]))
    else:
        decision = {{
            "approve": Approve(),
            "edit": Approve(arguments={{"payee": "ACME", "amount": 99}}),
            "reject": Reject(reason="not today"),
        }}[sys.argv[3]]
        print(runner.resume("proc", targets={{sys.argv[2]: decision}}).result().text)
    """
)


@pytest.mark.parametrize(
    ("decision", "answer"),
    [
        ("approve", "final: paid 120 to ACME"),
        ("edit", "final: paid 99 to ACME"),
        ("reject", "final: The user rejected this call of pay; it was not run. Reason: not today"),
    ],
)
def test_approval_decided_in_another_process(decision: str, answer: str, tmp_path: Path) -> None:
    script = SCRIPT.format(root=str(ROOT), store=str(tmp_path / "store"))
    first = subprocess.run(
        [sys.executable, "-c", script, "run"], capture_output=True, text=True, timeout=60
    )
    assert first.returncode == 0, first.stderr
    point, name, arguments = json.loads(first.stdout)
    assert (name, arguments) == ("pay", {"payee": "ACME", "amount": 120})
    second = subprocess.run(
        [sys.executable, "-c", script, "resume", point, decision],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == answer


def test_two_calls_in_one_reply_are_decided_separately() -> None:
    ran: list[dict[str, Any]] = []
    model = ScriptedChatModel(
        [
            calls_message(
                call("pay", {"payee": "ACME", "amount": 1}, id="a"),
                call("pay", {"payee": "Evil", "amount": 2}, id="b"),
            ),
            lambda messages: " | ".join(m.content for m in messages if m.role is Role.TOOL),
        ]
    )
    runner = Runner(
        ChatModelAgent("payer", "pays", model, tools=[make_pay(ran)]),
        checkpoint_store=InMemoryCheckPointStore(),
    )
    result = runner.invoke("pay both", with_checkpoint_id("two"))
    contexts = {c.info.call_id: c.id for c in result.interrupt.contexts}  # type: ignore[union-attr]
    assert set(contexts) == {"a", "b"}
    decisions = {contexts["a"]: Approve(), contexts["b"]: Reject(reason="unknown payee")}
    resumed = runner.resume("two", targets=decisions).result()
    assert ran == [{"payee": "ACME", "amount": 1}]
    assert resumed.text == (
        "paid 1 to ACME | The user rejected this call of pay; it was not run. "
        "Reason: unknown payee"
    )


def _duplicate_id_run(
    ran: list[dict[str, Any]], streaming: bool
) -> tuple[Runner, RunResult, ScriptedChatModel]:
    """A model that reuses one call id for two payments in one reply (issue 25, N1)."""
    model = ScriptedChatModel(
        [
            calls_message(
                call("pay", {"payee": "MALLORY", "amount": 9999}, id="call_1"),
                call("pay", {"payee": "ACME", "amount": 12}, id="call_1"),
            ),
            lambda messages: " | ".join(
                f"{m.tool_call_id}={m.content}" for m in messages if m.role is Role.TOOL
            ),
        ]
    )
    runner = Runner(
        ChatModelAgent("payer", "pays", model, tools=[make_pay(ran)]),
        checkpoint_store=InMemoryCheckPointStore(),
        enable_streaming=streaming,
    )
    return runner, runner.invoke("pay", with_checkpoint_id("dup")), model


@pytest.mark.parametrize("streaming", [False, True])
def test_calls_sharing_an_id_get_one_approval_request_each(streaming: bool) -> None:
    ran: list[dict[str, Any]] = []
    _, result, _ = _duplicate_id_run(ran, streaming)
    assert result.interrupt is not None
    requests = {c.info.call_id: c for c in result.interrupt.contexts}
    assert len(requests) == 2, "each call needs its own request"
    by_payee = {c.info.arguments["payee"]: c for c in requests.values()}
    assert by_payee["MALLORY"].info.call_id == "call_1"
    assert by_payee["ACME"].info.call_id == "call_1#2"
    assert by_payee["ACME"].address[-1] == "tool:pay:call_1#2"
    # the derived id is the one the history and the events carry
    [reply] = [e.get_message() for e in result.events if e.get_message() and e.get_message().tool_calls]  # type: ignore[union-attr]
    assert reply is not None
    assert [c.id for c in reply.tool_calls] == ["call_1", "call_1#2"]
    assert ran == []


@pytest.mark.parametrize("streaming", [False, True])
def test_approving_one_of_two_calls_sharing_an_id_runs_only_that_call(streaming: bool) -> None:
    ran: list[dict[str, Any]] = []
    runner, result, model = _duplicate_id_run(ran, streaming)
    assert result.interrupt is not None
    by_payee = {c.info.arguments["payee"]: c.id for c in result.interrupt.contexts}
    resumed = runner.resume(
        "dup",
        targets={
            by_payee["ACME"]: Approve(arguments={"payee": "ACME", "amount": 10}),
            by_payee["MALLORY"]: Reject(reason="unknown payee"),
        },
    ).result()
    assert ran == [{"payee": "ACME", "amount": 10}]  # exactly that call, with its edit
    assert resumed.text == (
        "call_1=The user rejected this call of pay; it was not run. Reason: unknown payee"
        " | call_1#2=paid 10 to ACME"
    )
    # the model is sent a history whose calls and results pair up one to one
    sent = model.calls[-1].messages
    [asked] = [m for m in sent if m.tool_calls]
    answered = [m.tool_call_id for m in sent if m.role is Role.TOOL]
    assert [c.id for c in asked.tool_calls] == answered == ["call_1", "call_1#2"]


def test_approving_only_one_of_two_calls_sharing_an_id_asks_again_for_the_other() -> None:
    ran: list[dict[str, Any]] = []
    runner, result, _ = _duplicate_id_run(ran, False)
    assert result.interrupt is not None
    by_payee = {c.info.arguments["payee"]: c.id for c in result.interrupt.contexts}
    again = runner.resume("dup", targets={by_payee["ACME"]: Approve()}).result()
    assert ran == [{"payee": "ACME", "amount": 12}]
    assert again.interrupt is not None
    [left] = again.interrupt.contexts
    assert left.info == ApprovalRequest("pay", "call_1", {"payee": "MALLORY", "amount": 9999})


def test_a_streamed_call_repeating_its_id_in_every_fragment_keeps_it() -> None:
    from agentkit import FunctionCall, Message, ToolCall, concat_message_stream, stream_from_list
    from agentkit.agents._react import UniqueCallIds

    def fragment(call_id: str, index: int, name: str = "", arguments: str = "") -> Message:
        return Message(
            Role.ASSISTANT, tool_calls=[ToolCall(call_id, FunctionCall(name, arguments), index=index)]
        )

    chunks = [
        fragment("c1", 0, "pay", '{"payee": '),
        fragment("c1", 0, arguments='"A"}'),  # some servers repeat the id in every fragment
        fragment("c1", 1, "pay", '{"payee": "B"}'),  # a second call reusing the id
        fragment("", 1, arguments=""),
    ]
    reply = concat_message_stream(UniqueCallIds(stream_from_list(chunks)))
    assert [(c.id, c.function.arguments) for c in reply.tool_calls] == [
        ("c1", '{"payee": "A"}'),
        ("c1#2", '{"payee": "B"}'),
    ]
