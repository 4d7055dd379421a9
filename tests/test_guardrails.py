"""Guardrails through whole runs: input and output trips end the run with GuardrailTripped (the
input one before any model call), a tool-call trip leaves the tool un-run, tells the model why
and the run goes on; the ready guardrails (PIIGuardrail, ToolAllowList); bad input."""

from __future__ import annotations

import json
import threading
from typing import Any

import attrs
import pytest

from agentkit import (
    AgentTool,
    ChatModelAgent,
    GuardrailTripped,
    Message,
    Role,
    Runner,
    ToolCallInfo,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore, PickleSerializer
from agentkit.errors import AgentConfigError
from agentkit.guardrails import PIIGuardrail, ToolAllowList
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, no_thread_leak


class Recorder:
    """Counts tool runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ran: list[str] = []

    def tool(self, name: str) -> Any:
        @tool(name=name)
        def run(text: str = "") -> str:
            """A tool."""
            with self.lock:
                self.ran.append(f"{name}:{text}")
            return f"{name} did {text}"

        return run


class Words:
    """Trips on a word, at the stages it has a method for."""

    name = "words"

    def __init__(self, word: str) -> None:
        self.word = word
        self.seen: list[str] = []

    def check_input(self, messages: list[Message]) -> str | None:
        self.seen.append("input")
        text = " ".join(message.content for message in messages)
        return f"the input says {self.word!r}" if self.word in text else None

    def check_output(self, message: Message) -> str | None:
        self.seen.append("output")
        return f"the answer says {self.word!r}" if self.word in message.content else None

    def check_tool_call(self, call: ToolCallInfo) -> str | None:
        self.seen.append(f"tool_call:{call.name}")
        arguments = call.arguments if isinstance(call.arguments, dict) else {}
        return f"{call.name} may not touch {self.word!r}" if arguments.get("text") == self.word else None


def tripped(result: Any) -> GuardrailTripped:
    assert isinstance(result.error, GuardrailTripped), result.error
    return result.error


# --- input ---------------------------------------------------------------------------------


def test_an_input_trip_ends_the_run_before_any_model_call() -> None:
    model = ScriptedChatModel(["never sent"])
    guard = Words("password")
    agent = ChatModelAgent("helper", "d", model, instruction="Be nice.", guardrails=[guard])
    with no_thread_leak():
        result = Runner(agent).query("my password is hunter2").result(raise_errors=False)
    error = tripped(result)
    assert (error.stage, error.guardrail, error.agent_name) == ("input", "words", "helper")
    assert error.reason == "the input says 'password'"
    assert "guardrail 'words' of agent 'helper'" in str(error) and "input" in str(error)
    assert model.calls == []  # no tokens spent
    assert [event.err for event in result.events] == [error]


def test_input_checks_see_the_first_model_calls_messages_and_let_clean_input_through() -> None:
    seen: list[list[tuple[Role, str]]] = []

    class Spy:
        def check_input(self, messages: list[Message]) -> None:
            seen.append([(message.role, message.content) for message in messages])

    model = ScriptedChatModel(["fine"])
    agent = ChatModelAgent("helper", "d", model, instruction="Be nice.", guardrails=[Spy()])
    assert Runner(agent).invoke("hello").text == "fine"
    assert seen == [[(Role.SYSTEM, "Be nice."), (Role.USER, "hello")]]


def test_a_resumed_turn_is_not_checked_again() -> None:
    from agentkit import interrupt

    @tool
    def ask() -> str:
        """Ask a human."""
        return str(interrupt("ok?"))

    guard = Words("never")
    model = ScriptedChatModel([calls_message(call("ask", {}, id="a1")), "done"])
    agent = ChatModelAgent("helper", "d", model, tools=[ask], guardrails=[guard])
    runner = Runner(
        agent, checkpoint_store=InMemoryCheckPointStore(), serializer=PickleSerializer(b"k" * 32)
    )
    paused = runner.invoke("go", with_checkpoint_id("cp"))
    assert guard.seen == ["input", "tool_call:ask"]
    (context,) = paused.interrupt.contexts  # type: ignore[union-attr]
    assert runner.resume("cp", targets={context.id: "yes"}).result().text == "done"
    assert guard.seen == ["input", "tool_call:ask", "tool_call:ask", "output"]


# --- output --------------------------------------------------------------------------------


def test_an_output_trip_ends_the_run_and_the_answer_is_not_delivered() -> None:
    model = ScriptedChatModel(["the secret is 42"])
    agent = ChatModelAgent(
        "helper", "d", model, guardrails=[Words("secret")], output_key="answer"
    )
    result = Runner(agent).query("tell me").result(raise_errors=False)
    error = tripped(result)
    assert (error.stage, error.reason) == ("output", "the answer says 'secret'")
    assert "answer" in str(error)
    assert result.final_message is None  # the tripped answer never reached the events
    assert "answer" not in result.session_values
    assert len(model.calls) == 1


def test_a_streamed_answer_is_shown_as_it_comes_and_the_trip_follows_it() -> None:
    model = ScriptedChatModel(["the secret is 42"])
    agent = ChatModelAgent("helper", "d", model, guardrails=[Words("secret")])
    result = Runner(agent, enable_streaming=True).query("tell me").result(raise_errors=False)
    assert tripped(result).stage == "output"
    assert [event.get_message().content for event in result.events[:-1]] == ["the secret is 42"]  # type: ignore[union-attr]


def test_output_checks_skip_replies_that_call_tools_and_see_the_answer() -> None:
    recorder = Recorder()
    guard = Words("secret")
    model = ScriptedChatModel(
        [calls_message(call("look", {"text": "a"}), content="looking for the secret"), "all clear"]
    )
    agent = ChatModelAgent("helper", "d", model, tools=[recorder.tool("look")], guardrails=[guard])
    assert Runner(agent).invoke("go").text == "all clear"
    assert guard.seen == ["input", "tool_call:look", "output"]


def test_output_checks_run_with_middleware_on_the_models_reply() -> None:
    from agentkit import AgentMiddleware

    class Upper(AgentMiddleware):
        def after_model(self, state: Any, message: Message) -> Message:
            return attrs.evolve(message, content=message.content.upper())

    model = ScriptedChatModel(["a secret"])
    agent = ChatModelAgent("helper", "d", model, middlewares=[Upper()], guardrails=[Words("secret")])
    result = Runner(agent).query("x").result(raise_errors=False)
    assert tripped(result).stage == "output"
    assert result.final_message is None


def test_a_typed_answer_is_checked_before_it_is_delivered() -> None:
    @attrs.define
    class Answer:
        text: str

    model = ScriptedChatModel(['{"text": "the secret"}'])
    agent = ChatModelAgent(
        "helper", "d", model, output_type=Answer, guardrails=[Words("secret")]
    )
    result = Runner(agent).query("x").result(raise_errors=False)
    assert tripped(result).stage == "output"
    assert result.output is None


# --- tool calls ----------------------------------------------------------------------------


def test_a_tool_call_trip_leaves_the_tool_unrun_tells_the_model_and_the_run_goes_on() -> None:
    recorder = Recorder()
    model = ScriptedChatModel(
        [
            calls_message(call("wipe", {"text": "prod"}, id="w1"), call("wipe", {"text": "dev"}, id="w2")),
            "wiped dev only",
        ]
    )
    agent = ChatModelAgent(
        "ops", "d", model, tools=[recorder.tool("wipe")], guardrails=[Words("prod")]
    )
    with no_thread_leak():
        result = Runner(agent).invoke("wipe everything")
    assert result.text == "wiped dev only"
    assert recorder.ran == ["wipe:dev"]
    told = {m.tool_call_id: m.content for m in model.calls[1].messages if m.role is Role.TOOL}
    assert told["w1"] == (
        "Error: the call of wipe was blocked by guardrail 'words' and did not run: "
        "wipe may not touch 'prod'"
    )
    assert told["w2"] == "wipe did dev"


def test_a_blocked_call_does_not_count_against_a_tool_call_limit() -> None:
    from agentkit import RunLimits, with_limits

    recorder = Recorder()
    model = ScriptedChatModel(
        [calls_message(call("wipe", {"text": "prod"}), call("wipe", {"text": "dev"})), "ok"]
    )
    agent = ChatModelAgent(
        "ops", "d", model, tools=[recorder.tool("wipe")], guardrails=[Words("prod")]
    )
    result = Runner(agent).invoke("go", with_limits(RunLimits(tool_calls=1)))
    assert result.text == "ok" and recorder.ran == ["wipe:dev"]


def test_a_trip_inside_an_agent_used_as_a_tool_ends_the_outer_run_with_it() -> None:
    inner = ChatModelAgent(
        "inner", "d", ScriptedChatModel(["a secret"]), guardrails=[Words("secret")]
    )
    boss = ChatModelAgent(
        "boss", "d",
        ScriptedChatModel([calls_message(call("inner", {"request": "x"}))]),
        tools=[AgentTool(inner)],
        tool_exception_handler=lambda error, call: "handled",  # a trip is not a tool error
    )
    result = Runner(boss).query("go").result(raise_errors=False)
    error = tripped(result)
    assert (error.stage, error.agent_name) == ("output", "inner")


def test_a_check_that_raises_ends_the_run_with_its_error() -> None:
    class Broken:
        def check_input(self, messages: list[Message]) -> str | None:
            raise RuntimeError("the policy service is down")

    agent = ChatModelAgent("helper", "d", ScriptedChatModel(["x"]), guardrails=[Broken()])
    with pytest.raises(RuntimeError, match="policy service is down"):
        Runner(agent).invoke("hi")


def test_a_check_that_returns_something_else_than_a_reason_is_a_type_error() -> None:
    class Sloppy:
        def check_output(self, message: Message) -> object:
            return True

    agent = ChatModelAgent("helper", "d", ScriptedChatModel(["x"]), guardrails=[Sloppy()])
    with pytest.raises(TypeError, match=r"check_output returned bool True; return a str"):
        Runner(agent).invoke("hi")


# --- the ready guardrails --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("write to jane.doe@example.com", "an email address"),
        ("card 4111 1111 1111 1111 exp 12/30", "a payment card number"),
        ("pay to DE89 3704 0044 0532 0130 00 today", "an IBAN"),
        ("my ssn is 123-45-6789", "a US social security number"),
    ],
)
def test_pii_guardrail_finds_personal_data_without_repeating_it(text: str, found: str) -> None:
    guard = PIIGuardrail()
    reason = guard.check_input([Message(Role.SYSTEM, "ok"), Message(Role.USER, text)])
    assert reason == f"the input holds {found} (message 2, from user)"
    assert text.rsplit(maxsplit=1)[-1] not in reason


@pytest.mark.parametrize(
    "text",
    [
        "order 4111 1111 1111 1112 shipped",  # fails the Luhn check
        "ticket DE89 3704 0044 0532 0130 01",  # fails the IBAN check digits
        "ref 666-12-3456 is no social security number",
        "an @ sign alone",
    ],
)
def test_pii_guardrail_lets_look_alikes_through(text: str) -> None:
    assert PIIGuardrail().check_input([Message(Role.USER, text)]) is None


def test_pii_guardrail_stages_and_own_patterns() -> None:
    guard = PIIGuardrail(kinds=(), patterns={"an employee id": r"\bEMP-\d{6}\b"}, stages=("tool_call",))
    assert guard.check_input([Message(Role.USER, "EMP-123456")]) is None
    assert guard.check_output(Message(Role.ASSISTANT, "EMP-123456")) is None
    blocked = guard.check_tool_call(ToolCallInfo("lookup", "c1", {"who": "EMP-123456"}))
    assert blocked == "its arguments hold an employee id, which must not be sent to tools"
    # System messages are the developer's instruction: not checked.
    assert PIIGuardrail().check_input([Message(Role.SYSTEM, "mail ops@example.com")]) is None


def test_pii_guardrail_in_a_run_stops_personal_data_in_the_answer() -> None:
    model = ScriptedChatModel(["Her email is jane@example.com"])
    agent = ChatModelAgent("helper", "d", model, guardrails=[PIIGuardrail()])
    error = tripped(Runner(agent).query("who?").result(raise_errors=False))
    assert (error.guardrail, error.reason) == ("pii", "the answer holds an email address")


def test_tool_allow_list_blocks_other_tools() -> None:
    recorder = Recorder()
    model = ScriptedChatModel(
        [calls_message(call("read", {"text": "a"}), call("delete", {"text": "b"})), "done"]
    )
    agent = ChatModelAgent(
        "files", "d", model, tools=[recorder.tool("read"), recorder.tool("delete")],
        guardrails=[ToolAllowList("read")],
    )
    assert Runner(agent).invoke("go").text == "done"
    assert recorder.ran == ["read:a"]
    told = [m.content for m in model.calls[1].messages if m.role is Role.TOOL]
    assert told[1] == (
        "Error: the call of delete was blocked by guardrail 'tool_allow_list' and did not run: "
        "tool 'delete' may not be called here; the tools you may call are: read"
    )


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("guardrails", "match"),
    [
        (Words("x"), r"a list of guardrails, not one; write guardrails=\["),
        (42, "must be a list of guardrail objects"),
        ([object()], "is not a guardrail: give it at least one of check_input"),
    ],
)
def test_bad_guardrails_are_refused_when_the_agent_is_built(guardrails: Any, match: str) -> None:
    with pytest.raises(AgentConfigError, match=match):
        ChatModelAgent("helper", "d", ScriptedChatModel(["x"]), guardrails=guardrails)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: PIIGuardrail(kinds=("email", "phone")), "unknown kind"),
        (lambda: PIIGuardrail(stages=("inputs",)), "stages must be some of"),
        (lambda: PIIGuardrail(kinds="email"), "not one string"),
        (lambda: PIIGuardrail(kinds=()), "at least one kind or pattern"),
        (lambda: ToolAllowList(), "needs the names"),
        (lambda: ToolAllowList(""), "takes tool names"),
    ],
)
def test_bad_ready_guardrails_are_refused(make: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make()


def test_an_agent_keeps_its_guardrails_in_a_copy() -> None:
    guard = Words("x")
    agent = ChatModelAgent("helper", "d", ScriptedChatModel(["x"]), guardrails=(g for g in [guard]))
    copy = agent.replace(instruction="other")
    assert tripped(Runner(copy).query("x").result(raise_errors=False)).guardrail == "words"


@pytest.mark.parametrize(
    "separator",
    ["\u00a0", "\u202f", "\u2009", "\u2007", "\u3000", "\u2011", "\u2013", "\u200b", "\t"],
    ids=["nbsp", "narrow-nbsp", "thin", "figure", "ideographic", "nb-hyphen", "en-dash",
         "zero-width", "tab"],
)
def test_pii_guardrail_finds_card_numbers_with_unicode_separators(separator: str) -> None:
    """Issue 49 A21: a card number written with no-break spaces went through."""
    card = separator.join(("4111", "1111", "1111", "1111"))
    guard = PIIGuardrail(stages=("input", "output", "tool_call"))
    assert guard.check_output(Message(Role.ASSISTANT, f"card {card} ok")) == (
        "the answer holds a payment card number"
    )
    assert guard.check_input([Message(Role.USER, f"my card: {card}")]) is not None
    # In a call's arguments too, as parsed values and as the model's JSON text (escaped or not).
    for arguments in ({"card": card}, json.dumps({"card": card}),
                      json.dumps({"card": card}, ensure_ascii=False)):
        assert guard.check_tool_call(ToolCallInfo("pay", "c1", arguments)) is not None


def test_pii_guardrail_does_not_look_at_tool_calls_unless_asked() -> None:
    """Issue 49 A21, as documented: by default only the input and the answer are checked, so
    personal data a tool returned can leave through another tool's arguments; the
    ``"tool_call"`` stage blocks such calls."""
    call_ = ToolCallInfo("send_email", "c1", {"body": "card 4111 1111 1111 1111"})
    assert PIIGuardrail().check_tool_call(call_) is None
    assert PIIGuardrail(stages=("input", "output", "tool_call")).check_tool_call(call_) == (
        "its arguments hold a payment card number, which must not be sent to tools"
    )
    assert "tool_call" in (PIIGuardrail.__doc__ or "")
    assert "not checked by default" in (PIIGuardrail.__doc__ or "")
