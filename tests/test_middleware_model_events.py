"""Where a model reply's event is sent in the middleware list (Eino's
``NewEventSenderModelWrapper``)."""

from __future__ import annotations

import attrs

from agentkit import AgentMiddleware, ChatModelAgent, Message, Role, Runner, tool
from agentkit.middleware import ModelCallable, ModelEventSender
from agentkit.models import ModelOptions, ScriptedChatModel
from agentkit.testing import call, calls_message, run_events

SECRET = "hunter2"


class Clean(AgentMiddleware):
    """Hides the secret in every reply."""

    def wrap_model(self, inner: ModelCallable) -> ModelCallable:
        def cleaned(messages: list[Message], options: ModelOptions | None) -> Message:
            reply = inner(messages, options)
            return attrs.evolve(reply, content=reply.content.replace(SECRET, "***"))

        return cleaned


class Twice(AgentMiddleware):
    """Calls the inner layers twice and keeps the second reply."""

    def wrap_model(self, inner: ModelCallable) -> ModelCallable:
        def again(messages: list[Message], options: ModelOptions | None) -> Message:
            inner(messages, options)
            return inner(messages, options)

        return again


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def run_with(*middlewares: AgentMiddleware, replies: list[str | Message] | None = None) -> tuple[
    list[str], ScriptedChatModel
]:
    """The texts of the assistant events, and the model (what it saw next)."""
    model = ScriptedChatModel(
        replies
        or [
            attrs.evolve(
                calls_message(call("lookup", {"key": "k"}, id="c1")), content=f"pw {SECRET}"
            ),
            f"done, {SECRET}",
        ]
    )
    agent = ChatModelAgent("A", "d", model, tools=[lookup], middlewares=list(middlewares))
    events = run_events(Runner(agent).query("go"))
    shown = []
    for event in events:
        message = event.get_message()
        if message is not None and message.role is Role.ASSISTANT:
            shown.append(message.content)
    return shown, model


def test_event_sender_model_wrapper_default_shows_the_outermost_reply() -> None:
    shown, model = run_with(Clean())
    assert shown == ["pw ***", "done, ***"]
    assert model.calls[1].messages[-2].content == "pw ***"


def test_event_sender_model_wrapper_innermost_shows_the_models_own_reply() -> None:
    shown, model = run_with(Clean(), ModelEventSender())
    assert shown == [f"pw {SECRET}", f"done, {SECRET}"]
    # The agent goes on with what the outer layers returned.
    assert model.calls[1].messages[-2].content == "pw ***"
    assert model.calls[1].messages[-2].tool_calls[0].id == "c1"


def test_event_sender_model_wrapper_outermost_is_the_default() -> None:
    shown, _ = run_with(ModelEventSender(), Clean())
    assert shown == ["pw ***", "done, ***"]


def test_event_sender_model_wrapper_sends_one_event_a_step() -> None:
    # An outer layer calling twice: one event, of the first reply that passed the sender.
    shown, model = run_with(Twice(), ModelEventSender(), replies=["first", "second"])
    assert shown == ["first"]
    assert len(model.calls) == 2
    shown, _ = run_with(Twice(), replies=["first", "second"])
    assert shown == ["second"]


def test_event_sender_model_wrapper_in_a_streamed_run_streams_the_model() -> None:
    model = ScriptedChatModel([f"done, {SECRET}"])
    agent = ChatModelAgent("A", "d", model, middlewares=[Clean(), ModelEventSender()])
    events = run_events(Runner(agent, enable_streaming=True).query("go"))
    messages = [e.get_message() for e in events]
    assert [m.content for m in messages if m is not None] == [f"done, {SECRET}"]
