"""Run results: ``Runner.invoke``, ``iterator.result()`` and what a RunResult holds."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from agentkit import (
    AgentEvent,
    AgentInput,
    ChatModelAgent,
    Message,
    ParallelAgent,
    ResponseMeta,
    Role,
    Runner,
    RunResult,
    SequentialAgent,
    TokenUsage,
    ToolCall,
    ToolError,
    assistant_message,
    event_from_message,
    interrupt,
    run_in_worker,
    tool,
    user_message,
    with_checkpoint_id,
    with_session_values,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.errors import IncompleteStreamError
from agentkit.models import OpenAIChatModel, ScriptedChatModel
from agentkit.testing import FakeOpenAIServer, Reply, call, calls_message


def _reply(text: str, prompt: int, completion: int, calls: list[ToolCall] | None = None) -> Message:
    return Message(
        Role.ASSISTANT,
        text,
        calls or [],
        response_meta=ResponseMeta(
            finish_reason="stop", usage=TokenUsage(prompt, completion, prompt + completion)
        ),
    )


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def test_invoke_returns_the_answer_usage_and_session_values() -> None:
    model = ScriptedChatModel(
        [
            _reply("", 10, 2, [call("add", {"a": 2, "b": 2}, id="c1")]),
            _reply("2 + 2 = 4", 20, 5),
        ]
    )
    agent = ChatModelAgent("calc", "adds", model, tools=[add], output_key="answer")
    result = Runner(agent).invoke("what is 2 + 2?", with_session_values({"user": "ann"}))
    assert isinstance(result, RunResult)
    assert result.text == "2 + 2 = 4"
    assert result.final_message is not None and result.final_message.role is Role.ASSISTANT
    assert [e.get_message().content for e in result.events] == ["", "4", "2 + 2 = 4"]  # type: ignore[union-attr]
    assert result.usage == TokenUsage(30, 7, 37)
    assert result.usage_by_agent == {"calc": TokenUsage(30, 7, 37)}
    assert result.session_values == {"user": "ann", "answer": "2 + 2 = 4"}
    assert result.error is None and result.interrupt is None and result.checkpoint_id is None
    assert result.status == "completed"
    assert result.output is None


def test_invoke_takes_a_list_of_messages() -> None:
    model = ScriptedChatModel(["hi there"])
    result = Runner(ChatModelAgent("a", "d", model)).invoke([user_message("hello")])
    assert result.text == "hi there"
    assert model.calls[0].messages[-1].content == "hello"


def test_usage_is_summed_per_agent_in_a_workflow() -> None:
    first = ChatModelAgent("first", "d", ScriptedChatModel([_reply("one", 3, 1)]))
    second = ChatModelAgent("second", "d", ScriptedChatModel([_reply("two", 5, 2)]))
    result = Runner(SequentialAgent("seq", "d", [first, second])).invoke("go")
    assert result.text == "two"
    assert result.usage == TokenUsage(8, 3, 11)
    assert result.usage_by_agent == {"first": TokenUsage(3, 1, 4), "second": TokenUsage(5, 2, 7)}


def test_result_after_reading_some_events_still_sees_the_whole_run() -> None:
    model = ScriptedChatModel([calls_message(call("add", {"a": 1, "b": 1}, id="c")), "two"])
    events = Runner(ChatModelAgent("a", "d", model, tools=[add])).query("1+1")
    first = next(events)
    result = events.result()
    assert result.events[0] is first
    assert len(result.events) == 3
    assert result.text == "two"
    assert events.result().events == result.events  # the same again


@tool
def explode() -> str:
    """Fail."""
    raise RuntimeError("the disk is on fire")


def test_a_failed_run_raises_its_own_error_with_agent_and_path() -> None:
    model = ScriptedChatModel([calls_message(call("explode", {}, id="x"))])
    inner = ChatModelAgent("worker", "d", model, tools=[explode])
    runner = Runner(SequentialAgent("team", "d", [inner]))
    with pytest.raises(ToolError) as caught:
        runner.invoke("go")
    assert "the disk is on fire" in str(caught.value)
    if sys.version_info >= (3, 11):
        assert any(
            "agent 'worker'" in note and "team > worker" in note
            for note in caught.value.__notes__
        )


def test_raise_errors_false_returns_the_error_in_the_result() -> None:
    model = ScriptedChatModel([calls_message(call("explode", {}, id="x"))])
    runner = Runner(ChatModelAgent("worker", "d", model, tools=[explode]))
    result = runner.query("go").result(raise_errors=False)
    assert isinstance(result.error, ToolError)
    assert result.status == "failed"
    assert result.events[-1].err is result.error
    assert "failed" in str(result)


@tool
def pay(amount: int) -> str:
    """Pay after approval."""
    return "paid" if interrupt(f"pay {amount}?") else "declined"


def test_an_interrupted_run_is_not_a_failure_and_resume_gives_a_result() -> None:
    model = ScriptedChatModel([calls_message(call("pay", {"amount": 3}, id="p")), "done: paid"])
    store = InMemoryCheckPointStore()
    runner = Runner(ChatModelAgent("payer", "d", model, tools=[pay]), checkpoint_store=store)
    result = runner.invoke("pay 3", with_checkpoint_id("cp1"))
    assert result.status == "interrupted"
    assert result.error is None
    assert result.checkpoint_id == "cp1"
    assert result.interrupt is not None
    [context] = result.interrupt.contexts
    assert context.info == "pay 3?"
    resumed = runner.resume("cp1", targets={context.id: True}).result()
    assert resumed.text == "done: paid"
    assert resumed.interrupt is None and resumed.checkpoint_id is None
    assert [e.get_message().content for e in resumed.events] == ["paid", "done: paid"]  # type: ignore[union-attr]


def test_interrupt_without_a_checkpoint_id_has_no_checkpoint() -> None:
    model = ScriptedChatModel([calls_message(call("pay", {"amount": 3}, id="p"))])
    result = Runner(ChatModelAgent("payer", "d", model, tools=[pay])).invoke("pay")
    assert result.interrupt is not None and result.checkpoint_id is None


def test_a_parallel_branch_that_breaks_mid_stream_fails_the_run() -> None:
    def handler(request: dict[str, object]) -> Reply:
        messages = request["messages"]
        assert isinstance(messages, list)
        if "broken" in str(messages[0]):
            return Reply("one two three four five six", chunks=6, cut_after=2)
        return Reply("fine answer")

    with FakeOpenAIServer(handler) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="k", max_retries=0)
        good = ChatModelAgent("good", "d", model, instruction="good")
        bad = ChatModelAgent("bad", "d", model, instruction="broken")
        runner = Runner(ParallelAgent("both", "d", [good, bad]), enable_streaming=True)
        with pytest.raises(IncompleteStreamError):
            runner.invoke("go")
        result = runner.query("go").result(raise_errors=False)
    assert isinstance(result.error, IncompleteStreamError)
    assert result.usage_by_agent["good"].total_tokens > 0


def test_usage_from_the_loopback_server_streamed_and_not() -> None:
    with FakeOpenAIServer() as server:
        server.queue(Reply("hello there", usage=TokenUsage(7, 2, 9)))
        server.queue(Reply("again", usage=TokenUsage(4, 1, 5)))
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="k")
        agent = ChatModelAgent("a", "d", model)
        plain = Runner(agent).invoke("hi")
        streamed = Runner(agent, enable_streaming=True).invoke("hi")
    assert (plain.text, plain.usage) == ("hello there", TokenUsage(7, 2, 9))
    assert (streamed.text, streamed.usage) == ("again", TokenUsage(4, 1, 5))


class Echo:
    """A custom agent: its run_in_worker iterator has result() too."""

    name = "echo"
    description = "repeats"

    def run(self, input: AgentInput, *options: object) -> Iterator[AgentEvent]:
        def work(gen):  # type: ignore[no-untyped-def]
            text = input.messages[-1].content
            gen.send(event_from_message(assistant_message(text.upper()), None, Role.ASSISTANT))

        return run_in_worker(work)


def test_a_custom_agent_iterator_has_result() -> None:
    events = Echo().run(AgentInput(messages=[user_message("psst")]))
    assert events.result().text == "PSST"  # type: ignore[attr-defined]
    assert Runner(Echo()).invoke("hey").text == "HEY"  # type: ignore[arg-type]


def test_result_renders_as_text_and_escaped_html() -> None:
    model = ScriptedChatModel(["<script>alert('x')</script> & more"])
    result = Runner(ChatModelAgent("a", "d", model)).invoke("hi")
    page = result._repr_html_()
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; more" in page
    assert "status: completed" in str(result)
    assert repr(result).startswith("RunResult(status='completed', text=")


def test_invoke_runs_in_the_calling_thread() -> None:
    import threading

    from agentkit import ChatModelAgent, Runner, tool
    from agentkit.models import ScriptedChatModel
    from agentkit.testing import call, calls_message

    seen: list[threading.Thread] = []

    @tool
    def where() -> str:
        """Notes the thread it runs in."""
        seen.append(threading.current_thread())
        return "here"

    model = ScriptedChatModel([calls_message(call("where", id="w1")), "done"])
    result = Runner(ChatModelAgent("A", "d", model, tools=[where])).invoke("go")
    assert result.text == "done"
    # nobody reads the events live, so no worker thread hands them over
    assert seen == [threading.current_thread()]
