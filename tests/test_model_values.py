"""Models are values once built: a write raises and says what to do; ``replace`` makes a copy.

``model.timeout = 1`` was accepted and ignored (the model reads its private settings): now it
raises :class:`~agentkit.errors.FrozenError` naming ``replace``, and ``replace(timeout=1)``
gives a model that uses it, the original unchanged.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentkit.errors import AgentKitTypeError, FrozenError
from agentkit.models import (
    AnthropicChatModel,
    FailoverChatModel,
    GeminiChatModel,
    OpenAIChatModel,
    OpenAIResponsesModel,
    ScriptedChatModel,
)
from agentkit.schema import ToolInfo, user_message
from agentkit.testing import (
    FakeAnthropicServer,
    FakeGeminiServer,
    FakeOpenAIServer,
    FakeResponsesServer,
)


def test_a_write_to_a_model_setting_raises_and_says_to_replace() -> None:
    model = OpenAIChatModel("m", api_key="sk-test", base_url="http://model.test/v1", timeout=5)
    with pytest.raises(FrozenError, match=r"OpenAIChatModel\.timeout.*\.replace\(timeout=\.\.\.\)"):
        model.timeout = 1
    with pytest.raises(AttributeError):  # FrozenError is one
        del model.model
    assert not hasattr(model, "timeout")


def test_replace_makes_a_changed_model_and_leaves_the_original() -> None:
    with FakeOpenAIServer() as server:
        server.queue("one", "two")
        model = OpenAIChatModel("m", api_key="sk-test", base_url=server.base_url, temperature=0.5)
        hotter = model.replace(temperature=1.5, model="m2")
        assert (hotter.model, hotter.defaults.temperature) == ("m2", 1.5)
        assert (model.model, model.defaults.temperature) == ("m", 0.5)
        model.generate([user_message("hi")])
        hotter.generate([user_message("hi")])
        sent = [(r["model"], r["temperature"]) for r in server.requests]
        assert sent == [("m", 0.5), ("m2", 1.5)]


def test_replace_keeps_a_bound_model_bound_to_its_tools() -> None:
    tool = ToolInfo("add", "adds")
    bound = ScriptedChatModel(["a"]).with_tools([tool])
    changed = bound.replace(script=["b"])  # type: ignore[attr-defined]
    assert changed.tools == [tool]
    assert changed.generate([user_message("x")]).content == "b"


def test_replace_with_an_unknown_argument_names_the_arguments() -> None:
    model = ScriptedChatModel(["a"])
    with pytest.raises(AgentKitTypeError, match="unknown argument.*'scirpt'.*script"):
        model.replace(scirpt=["b"])


def test_every_built_in_model_is_a_value() -> None:
    first, second = ScriptedChatModel(["a"]), ScriptedChatModel(["b"])
    failover = FailoverChatModel([first, second])
    with pytest.raises(FrozenError):
        failover.models = []  # type: ignore[misc]
    with pytest.raises(FrozenError):
        first.script = ["c"]
    assert failover.replace(models=[second]) is not failover


@pytest.mark.parametrize(
    ("model_type", "server_type"),
    [
        (AnthropicChatModel, FakeAnthropicServer),
        (GeminiChatModel, FakeGeminiServer),
        (OpenAIResponsesModel, FakeResponsesServer),
    ],
)
def test_the_native_models_are_values_and_replace_keeps_their_tools(
    model_type: Any, server_type: Any
) -> None:
    tool = ToolInfo("add", "adds")
    with server_type() as server:
        server.queue("one", "two")
        model = model_type("m1", api_key="k", base_url=server.base_url, timeout=5).with_tools(
            [tool]
        )
        with pytest.raises(FrozenError, match=rf"{model_type.__name__}\.timeout.*replace"):
            model.timeout = 1
        changed = model.replace(model="m2")
        assert (changed.model, model.model) == ("m2", "m1")
        assert changed.tools == model.tools == (tool,)
        assert model.generate([user_message("hi")]).content == "one"
        assert changed.generate([user_message("hi")]).content == "two"
        paths = " ".join(server.request_paths) + json.dumps(server.requests)
        assert "m1" in paths and "m2" in paths


def test_a_runner_is_a_value_too() -> None:
    from agentkit import ChatModelAgent, Runner

    runner = Runner(ChatModelAgent("a", "d", ScriptedChatModel(["one", "two"])))
    with pytest.raises(FrozenError, match=r"Runner\.enable_streaming.*replace"):
        runner.enable_streaming = True
    streaming = runner.replace(enable_streaming=True)
    assert (streaming.enable_streaming, runner.enable_streaming) == (True, False)
    assert streaming.invoke("hi").text == "one"  # the same agent, the same script
    assert runner.invoke("hi").text == "two"
