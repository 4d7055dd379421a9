"""Model retry decisions: ``ModelRetryConfig(decide=...)``, Eino's ``ShouldRetry``/``RetryDecision``.

Each test is named after the Eino test (``adk/chatmodel_retry_test.go``) whose behaviour it
follows, run on a scripted model through a real Runner.
"""

from __future__ import annotations

import pickle

import pytest

from agentkit import (
    ChatModelAgent,
    Message,
    ModelError,
    ModelRetryConfig,
    RetryExhaustedError,
    Role,
    Runner,
    WillRetryError,
    tool,
    user_message,
    with_chat_model_options,
)
from agentkit.agents.chatmodel import RetryContext, RetryDecision
from agentkit.errors import AgentConfigError
from agentkit.models import ModelOptions, ScriptedChatModel
from agentkit.testing import call, calls_message


def no_wait(attempt: int) -> float:
    return 0.0


def run(model: ScriptedChatModel, retry: ModelRetryConfig, **kwargs: object) -> list[object]:
    agent = ChatModelAgent("a", "d", model, model_retry=retry, **kwargs)  # type: ignore[arg-type]
    return list(Runner(agent).query("hi", with_chat_model_options(temperature=0.5)))


def test_should_retry_generate_retry_context_fields() -> None:
    seen: list[RetryContext] = []

    def decide(context: RetryContext) -> RetryDecision:
        seen.append(context)
        return RetryDecision(retry=context.error is not None or context.output.content == "bad")  # type: ignore[union-attr]

    model = ScriptedChatModel([ModelError("boom"), "bad", "good"])
    events = run(model, ModelRetryConfig(max_retries=3, backoff=no_wait, decide=decide))
    assert [c.attempt for c in seen] == [1, 2, 3]
    assert isinstance(seen[0].error, ModelError) and seen[0].output is None
    assert seen[1].error is None and seen[1].output.content == "bad"  # type: ignore[union-attr]
    assert [m.content for m in seen[0].input_messages] == ["hi"]
    assert seen[0].options == ModelOptions(temperature=0.5)
    assert events[-1].get_message().content == "good"  # type: ignore[attr-defined]


def test_should_retry_generate_rewrite_error_on_message() -> None:
    class Unusable(ModelError):
        pass

    def decide(context: RetryContext) -> RetryDecision:
        return RetryDecision(rewrite_error=Unusable("the model answered in the wrong language"))

    model = ScriptedChatModel(["bonjour", "never asked"])
    events = run(model, ModelRetryConfig(backoff=no_wait, decide=decide))
    assert len(model.calls) == 1
    assert isinstance(events[-1].err, Unusable)  # type: ignore[attr-defined]


def test_should_retry_generate_rewrite_error_on_error() -> None:
    replaced = ModelError("the provider is down; try again later")

    def decide(context: RetryContext) -> RetryDecision:
        return RetryDecision(rewrite_error=replaced)

    events = run(ScriptedChatModel([ModelError("502")]), ModelRetryConfig(decide=decide))
    err = events[-1].err  # type: ignore[attr-defined]
    assert err is replaced
    assert str(err.__cause__) == "502"


def test_should_retry_generate_additional_options() -> None:
    # Options add up over one call's retries; the next model call of the loop starts afresh.
    def decide(context: RetryContext) -> RetryDecision | None:
        if context.output is not None and context.output.content == "cut":
            more = ModelOptions(max_tokens=100 * context.attempt, top_p=0.1 * context.attempt)
            return RetryDecision(retry=True, options=more)
        return None

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = ScriptedChatModel(["cut", "cut", calls_message(call("ping", {})), "done"])
    run(model, ModelRetryConfig(max_retries=3, backoff=no_wait, decide=decide), tools=[ping])
    options = [c.options for c in model.calls]
    assert options[0] == ModelOptions(temperature=0.5)
    assert options[1] == ModelOptions(temperature=0.5, max_tokens=100, top_p=0.1)
    assert options[2] == ModelOptions(temperature=0.5, max_tokens=200, top_p=0.2)
    assert options[3] == ModelOptions(temperature=0.5)


def test_should_retry_generate_modified_input_messages_no_persist() -> None:
    def decide(context: RetryContext) -> RetryDecision | None:
        if context.error is not None:
            shorter = [user_message("hi (shortened)")]
            return RetryDecision(retry=True, input_messages=shorter)
        return None

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    too_long = ModelError("context length exceeded")
    model = ScriptedChatModel([too_long, calls_message(call("ping", {})), "done"])
    run(model, ModelRetryConfig(backoff=no_wait, decide=decide), tools=[ping])
    assert [m.content for m in model.calls[1].messages] == ["hi (shortened)"]
    # The agent's conversation keeps its own messages: the next call sees the original input.
    assert [m.role for m in model.calls[2].messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert model.calls[2].messages[0].content == "hi"


def test_should_retry_generate_backoff() -> None:
    asked: list[int] = []

    def config_backoff(attempt: int) -> float:
        asked.append(attempt)
        return 0.0

    def decide(context: RetryContext) -> RetryDecision:
        if context.attempt == 1:
            return RetryDecision(retry=True, backoff=0.0)  # chosen: the config is not asked
        return RetryDecision(retry=context.error is not None)

    model = ScriptedChatModel([ModelError("a"), ModelError("b"), "ok"])
    events = run(model, ModelRetryConfig(max_retries=3, backoff=config_backoff, decide=decide))
    assert asked == [2]
    assert events[-1].get_message().content == "ok"  # type: ignore[attr-defined]


def test_attack_should_retry_nil_decision_on_every_call() -> None:
    model = ScriptedChatModel(["", "never asked"])
    events = run(model, ModelRetryConfig(decide=lambda context: None))
    assert len(model.calls) == 1 and events[-1].get_message().content == ""  # type: ignore[attr-defined]
    failing = ScriptedChatModel([ModelError("x")])
    assert str(run(failing, ModelRetryConfig(decide=lambda context: None))[-1].err) == "x"  # type: ignore[attr-defined]


def test_attack_should_retry_retry_true_with_rewrite_error_ignores_rewrite() -> None:
    def decide(context: RetryContext) -> RetryDecision:
        return RetryDecision(
            retry=context.error is not None, rewrite_error=ModelError("ignored when retrying")
        )

    model = ScriptedChatModel([ModelError("a"), "ok"])
    events = run(model, ModelRetryConfig(backoff=no_wait, decide=decide))
    # Retried (the rewrite ignored); the accepted reply then is rewritten.
    assert len(model.calls) == 2
    assert str(events[-1].err) == "ignored when retrying"  # type: ignore[attr-defined]


def test_attack_should_retry_max_retries_zero_reject_first_attempt() -> None:
    model = ScriptedChatModel(["bad"])
    events = run(model, ModelRetryConfig(max_retries=0, decide=lambda c: RetryDecision(True)))
    err = events[-1].err  # type: ignore[attr-defined]
    assert isinstance(err, RetryExhaustedError)
    assert "rejected by decide at attempt 1" in str(err.__cause__)


def test_reject_reason_stream_path() -> None:
    def decide(context: RetryContext) -> RetryDecision | None:
        if context.output is not None and context.output.content == "draft":
            return RetryDecision(retry=True, reject_reason={"why": "a draft"})
        return None

    agent = ChatModelAgent(
        "a",
        "d",
        ScriptedChatModel(["draft", "final"]),
        model_retry=ModelRetryConfig(backoff=no_wait, decide=decide),
    )
    events = list(Runner(agent, enable_streaming=True).query("hi"))
    assert len(events) == 2
    stream = events[0].output.message_output.open_stream()  # type: ignore[union-attr]
    with pytest.raises(WillRetryError) as raised:
        list(stream)
    assert raised.value.reject_reason == {"why": "a draft"}
    assert raised.value.attempt == 1
    assert events[1].get_message().content == "final"  # type: ignore[union-attr]


def test_will_retry_error_reject_reason_stays_out_of_pickles() -> None:
    error = WillRetryError("retrying", attempt=2, reject_reason=object())
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.attempt, copy.reject_reason) == ("retrying", 2, None)


def test_decide_and_should_retry_are_exclusive() -> None:
    with pytest.raises(AgentConfigError, match="should_retry or decide, not both"):
        ModelRetryConfig(should_retry=lambda o, e: True, decide=lambda c: None)
    with pytest.raises(AgentConfigError, match="decide must be a function"):
        ModelRetryConfig(decide="retry")  # type: ignore[arg-type]


def test_a_decision_of_the_wrong_type_is_an_error_naming_decide() -> None:
    events = run(ScriptedChatModel(["x"]), ModelRetryConfig(decide=lambda c: True))  # type: ignore[arg-type,return-value]
    assert "return a RetryDecision" in str(events[-1].err)  # type: ignore[attr-defined]


def test_retry_decision_checks_its_fields() -> None:
    with pytest.raises(AgentConfigError, match="backoff must be seconds"):
        RetryDecision(retry=True, backoff=-1)
    with pytest.raises(AgentConfigError, match="options must be ModelOptions"):
        RetryDecision(retry=True, options={"max_tokens": 9})  # type: ignore[arg-type]
    with pytest.raises(AgentConfigError, match="input_messages must be a list of Message"):
        RetryDecision(retry=True, input_messages="hi")  # type: ignore[arg-type]
    decision = RetryDecision(retry=True, input_messages=[Message(Role.USER, "x")])
    assert decision.input_messages == (Message(Role.USER, "x"),)


def test_should_retry_still_works_beside_decide() -> None:
    # The existing configuration keeps working: should_retry(output, error) -> bool.
    model = ScriptedChatModel(["", "ok"])
    retry = ModelRetryConfig(should_retry=lambda out, err: not out.content, backoff=no_wait)  # type: ignore[union-attr]
    assert run(model, retry)[-1].get_message().content == "ok"  # type: ignore[attr-defined]


# --- RetryDecision(persist_input_messages=True): Eino's PersistModifiedInputMessages ---


def _compress(context: RetryContext) -> RetryDecision | None:
    """Eino's test decision: a too-long reply (or error) retries on a compressed history."""
    output = context.output
    if context.error is not None or (output is not None and "too long" in output.content):
        shorter = [Message(Role.SYSTEM, "compressed instruction"), user_message("summarized")]
        return RetryDecision(
            retry=True,
            input_messages=shorter,
            persist_input_messages=True,
            options=ModelOptions(max_tokens=16384),
        )
    return None


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def test_should_retry_generate_modified_input_messages_with_persist() -> None:
    # The retried call and every later call of the turn go on with the rewritten history,
    # system message included; the extra options hold for the retried call only.
    model = ScriptedChatModel(
        [ModelError("context length exceeded"), calls_message(call("ping", {})), "done"]
    )
    retry = ModelRetryConfig(backoff=no_wait, decide=_compress)
    events = run(model, retry, tools=[ping], instruction="You are a helpful assistant.")
    assert events[-1].get_message().content == "done"  # type: ignore[attr-defined]
    first, retried, after_tools = (c.messages for c in model.calls)
    assert [(m.role, m.content) for m in first] == [
        (Role.SYSTEM, "You are a helpful assistant."), (Role.USER, "hi"),
    ]
    assert [m.content for m in retried] == ["compressed instruction", "summarized"]
    assert [(m.role, m.content) for m in after_tools[:2]] == [
        (Role.SYSTEM, "compressed instruction"), (Role.USER, "summarized"),
    ]
    assert [m.role for m in after_tools[2:]] == [Role.ASSISTANT, Role.TOOL]
    assert model.calls[1].options == ModelOptions(temperature=0.5, max_tokens=16384)
    assert model.calls[2].options == ModelOptions(temperature=0.5)


def test_should_retry_stream_modified_inputs_and_options_with_persist() -> None:
    model = ScriptedChatModel(
        ["too long response exceeds limit", calls_message(call("ping", {})), "good response"]
    )
    agent = ChatModelAgent(
        "a", "d", model, instruction="You are a helpful assistant.", tools=[ping],
        model_retry=ModelRetryConfig(backoff=no_wait, decide=_compress),
    )
    events = list(Runner(agent, enable_streaming=True).query("hi"))
    assert events[-1].get_message().content == "good response"  # type: ignore[union-attr]
    assert [m.content for m in model.calls[1].messages] == ["compressed instruction", "summarized"]
    assert [m.content for m in model.calls[2].messages[:2]] == [
        "compressed instruction", "summarized",
    ]
    assert model.calls[1].options == ModelOptions(max_tokens=16384)


def test_persisted_input_messages_are_what_a_resumed_run_goes_on_with() -> None:
    # A checkpoint taken after the persisted retry holds the rewritten history: the resumed
    # run's model sees it, not the original input.
    from agentkit import interrupt, with_checkpoint_id
    from agentkit.checkpoint import InMemoryCheckPointStore

    @tool
    def approve() -> str:
        """Ask for approval."""
        return f"approved: {interrupt('ok?')}"

    def agent(model: ScriptedChatModel) -> ChatModelAgent:
        return ChatModelAgent(
            "a", "d", model, instruction="You are a helpful assistant.", tools=[approve],
            model_retry=ModelRetryConfig(backoff=no_wait, decide=_compress),
        )

    store = InMemoryCheckPointStore()
    first = ScriptedChatModel([ModelError("too long"), calls_message(call("approve", {}))])
    stopped = list(Runner(agent(first), checkpoint_store=store).query("hi", with_checkpoint_id("cp")))
    interrupted = stopped[-1].action.interrupted  # type: ignore[union-attr]
    assert interrupted is not None
    resumed_model = ScriptedChatModel(["done"])
    events = list(
        Runner(agent(resumed_model), checkpoint_store=store).resume(
            "cp", targets={interrupted.contexts[0].id: "yes"}
        )
    )
    assert events[-1].get_message().content == "done"  # type: ignore[union-attr]
    (seen,) = (c.messages for c in resumed_model.calls)
    assert [(m.role, m.content) for m in seen] == [
        (Role.SYSTEM, "compressed instruction"),
        (Role.USER, "summarized"),
        (Role.ASSISTANT, ""),
        (Role.TOOL, "approved: yes"),
    ]


def test_persist_input_messages_needs_the_messages_to_persist() -> None:
    with pytest.raises(AgentConfigError, match="needs input_messages"):
        RetryDecision(retry=True, persist_input_messages=True)
    with pytest.raises(AgentConfigError, match="persist_input_messages must be True or False"):
        RetryDecision(retry=True, input_messages=[], persist_input_messages="yes")  # type: ignore[arg-type]
