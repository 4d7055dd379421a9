"""The public surface is a tested artifact: names, docstrings, lazy imports, import time."""

from __future__ import annotations

import inspect
import subprocess
import sys
import types

import pytest

import agentkit

# Everything API.md promises at the top level, plus the documented extras. Errors API.md does
# not name are in agentkit.errors only; the TurnLoop's parts in agentkit.turnloop.
DOCUMENTED = {
    # 1. messages
    "Role", "FunctionCall", "ToolCall", "TokenUsage", "ResponseMeta", "Message", "ToolInfo",
    "user_message", "system_message", "assistant_message", "tool_message", "concat_messages",
    # 2. streams
    "pipe", "StreamReader", "StreamWriter", "StreamEOF", "stream_from_list",
    "stream_from_iterator", "concat_message_stream",
    # 3. iterator pair
    "new_async_iterator_pair", "AsyncIterator", "AsyncGenerator",
    # 4. core types
    "RunStep", "AgentInput", "MessageVariant", "AgentOutput", "TransferToAgentAction",
    "InterruptContext", "InterruptInfo", "BreakLoopAction", "AgentAction", "AgentEvent",
    "ResumeInfo", "event_from_message", "new_exit_action", "new_transfer_to_agent_action",
    "new_break_loop_action", "gen_transfer_messages",
    # 5. agents
    "Agent", "ResumableAgent", "OnSubAgents", "run_in_worker", "ChatModelAgent", "GenModelInput",
    "ExitTool", "SequentialAgent", "ParallelAgent", "LoopAgent", "set_sub_agents",
    "agent_with_options", "HistoryEntry", "HistoryRewriter", "agent_with_deterministic_transfer_to",
    "AgentTool", "BaseAgent", "AgentRun",
    # 6. run context and options
    "get_session_value", "get_session_values", "add_session_value", "add_session_values",
    "AgentRunOption", "with_session_values", "with_checkpoint_id", "with_chat_model_options",
    "with_tool_options", "get_tool_options", "with_skip_transfer_messages",
    "wrap_impl_specific_opt_fn", "get_impl_specific_options",
    # 7. runner, interrupt, cancel
    "Runner", "interrupt", "get_interrupt_state", "interrupt_event", "send_tool_gen_action",
    "CancelHandle", "CancelMode", "with_cancel", "check_cancelled", "abort_on_cancel",
    "cancellable_sleep",
    # 14. wave-3 additions
    "RunResult", "ApprovalRequest", "Approve", "Reject", "with_approval",
    "ConversationBusyError", "with_conversation_id",
    # 15. wave-4 additions: durable steps and crashes
    "UnfinishedToolCall", "tool_call_key",
    # 16. wave-5 additions: content parts
    "TextPart", "ImagePart", "FilePart", "AudioPart",
    # 8. models: in agentkit.models, the module API.md names (the model errors are here too)
    # 9. tools
    "BaseTool", "InvokableTool", "StreamableTool", "tool", "ToolCallInfo",
    # 11. errors
    "AgentKitError", "ExceedMaxIterationsError", "TransferError",
    "AgentCancelledError",
    "CheckpointError", "CheckpointNotFoundError", "CheckpointBusyError",
    "CheckpointConsumedError", "ToolError",
    "ToolArgumentsError", "ToolNotFoundError", "ToolTimeoutError", "ModelError", "APIConnectionError",
    "APITimeoutError", "IncompleteStreamError", "ResponseTooLargeError", "APIStatusError", "BadRequestError",
    "AuthenticationError", "PermissionDeniedError", "RateLimitError",
    # 14. middleware, callbacks, retries and failover
    "AgentMiddleware", "AgentContext", "ModelState", "set_run_local_value", "get_run_local_value",
    "delete_run_local_value", "send_event", "with_callbacks", "RunInfo", "UsageTracker", "ModelRetryConfig",
    "RetryExhaustedError", "WillRetryError",
    # 15. limits, budgets, guardrails
    "RunLimits", "LimitReached", "ModelPricing", "RunLimitError", "GuardrailTripped", "with_limits",
    # 15. the Eino v0.9 line: TurnLoop
    "TurnLoop", "TurnLoopExit",
    # 15. shared limits
    "ConcurrencyLimit", "RateLimit",
    # display, version
    "print_events", "__version__",
}

#: Eino name (API.md) -> the Pythonic second name of 0.2, deprecated until agentkit 0.4.
PYTHONIC_ALIASES = {
    "new_exit_action": "exit_action",
    "new_transfer_to_agent_action": "transfer_action",
    "new_break_loop_action": "break_loop_action",
    "wrap_impl_specific_opt_fn": "custom_option",
    "get_impl_specific_options": "custom_options",
    "AsyncIterator": "ItemIterator",
    "AsyncGenerator": "ItemSender",
    "new_async_iterator_pair": "channel",
}


def _is_class_or_function(obj: object) -> bool:
    # A type alias such as Callable[[str], int] is a class to Python 3.10's inspect.isclass;
    # its documentation is the docstring under its assignment (the API reference reads it).
    if isinstance(obj, types.GenericAlias):
        return False
    return inspect.isclass(obj) or inspect.isfunction(obj)


def test_all_is_exactly_the_documented_surface() -> None:
    assert set(agentkit.__all__) == DOCUMENTED
    assert len(agentkit.__all__) == len(set(agentkit.__all__))


def test_every_exported_name_resolves_and_is_documented() -> None:
    for name in agentkit.__all__:
        obj = getattr(agentkit, name)
        if _is_class_or_function(obj):
            assert obj.__doc__ and obj.__doc__.strip(), f"{name} has no docstring"


def test_the_eino_names_are_the_objects_names_and_the_pythonic_ones_warn() -> None:
    for eino, old in PYTHONIC_ALIASES.items():
        obj = getattr(agentkit, eino)
        assert obj.__name__ == eino and old not in agentkit.__all__
        with pytest.warns(DeprecationWarning, match=f"use agentkit.{eino} "):
            assert getattr(agentkit, old) is obj


def test_the_eino_names_work() -> None:
    assert agentkit.new_exit_action() == agentkit.AgentAction(exit=True)
    assert agentkit.new_transfer_to_agent_action("b").transfer_to_agent == agentkit.TransferToAgentAction("b")
    assert agentkit.new_break_loop_action("a").break_loop == agentkit.BreakLoopAction(from_agent="a")

    class Settings:
        def __init__(self) -> None:
            self.level = 0

    option = agentkit.wrap_impl_specific_opt_fn(Settings, lambda s: setattr(s, "level", 2))
    assert agentkit.get_impl_specific_options(Settings(), option).level == 2

    events: agentkit.AsyncIterator[int]
    sender: agentkit.AsyncGenerator[int]
    events, sender = agentkit.new_async_iterator_pair()
    assert sender.send(1) and sender.send(2)
    sender.close()
    assert list(events) == [1, 2]
    assert isinstance(events, agentkit.AsyncIterator) and isinstance(sender, agentkit.AsyncGenerator)


def test_exported_objects_present_themselves_as_agentkit() -> None:
    assert agentkit.Runner.__module__ == "agentkit"
    assert agentkit.ToolError.__module__ == "agentkit"
    assert agentkit.tool.__module__ == "agentkit"


# What a plain ReAct script does not need: ``import agentkit`` leaves these modules unloaded.
NOT_IMPORTED_BY_IMPORT_AGENTKIT = (
    # third-party and heavy standard-library modules
    "httpx", "tenacity", "redis", "sqlite3", "cattrs", "docstring_parser", "hashlib", "hmac",
    "pickle", "mcp", "opentelemetry", "flask", "celery",
    # agentkit's own optional parts, loaded on first use
    "agentkit.agents._workflow", "agentkit.agents._deterministic", "agentkit.agents._agenttool",
    "agentkit.prebuilt.supervisor", "agentkit.prebuilt.planexecute", "agentkit._display",
    "agentkit.compaction", "agentkit._callbacks", "agentkit.integrations.otel", "agentkit.conversation",
    "agentkit.conversation._file", "agentkit.conversation._memory", "agentkit.conversation._sqlite",
    "agentkit.conversation._redis", "agentkit.checkpoint._serializer", "agentkit.checkpoint._file",
    "agentkit.checkpoint._memory", "agentkit.models.openai", "agentkit.models._scripted",
    "agentkit.models._failover", "agentkit.mcp", "agentkit.testing", "agentkit.tools._exit",
    "agentkit.backends", "agentkit.middlewares", "agentkit.prebuilt.deep", "yaml",
)


def test_import_is_light_and_lazy() -> None:
    code = (
        "import sys, agentkit; "
        f"print(','.join(m for m in {NOT_IMPORTED_BY_IMPORT_AGENTKIT!r} if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_lazy_names_load_on_first_use_and_are_the_defining_modules_objects() -> None:
    code = (
        "import sys, agentkit\n"
        "assert 'agentkit.agents.workflow' not in sys.modules\n"
        "from agentkit import LoopAgent\n"
        "from agentkit.agents.workflow import LoopAgent as Defined\n"
        "assert LoopAgent is Defined and agentkit.LoopAgent is Defined\n"
        "assert 'LoopAgent' in dir(agentkit) and 'LoopAgent' in vars(agentkit)\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_an_unknown_name_is_an_attribute_error_naming_the_module_and_a_close_match() -> None:
    with pytest.raises(AttributeError, match=r"module 'agentkit' has no attribute 'Runer'.*'Runner'"):
        agentkit.Runer  # type: ignore[attr-defined]  # noqa: B018 (the misspelling is the test)
    with pytest.raises(ImportError, match="Runer"):
        from agentkit import Runer  # type: ignore[attr-defined]  # noqa: F401 (the misspelling is the test)


def test_openai_chat_model_loads_on_first_use() -> None:
    from agentkit.models import OpenAIChatModel

    assert agentkit.models.OpenAIChatModel is OpenAIChatModel


def test_the_model_client_imports_tenacity_only_when_a_call_is_retried() -> None:
    code = (
        "import sys; from agentkit.models import OpenAIChatModel; "
        "OpenAIChatModel('m', api_key='k', base_url='http://127.0.0.1:9'); "
        "print('tenacity' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


# agentkit.testing: what applications use to test their agents (docs/guides/testing.md).
TESTING_DOCUMENTED = {
    "call", "calls_message", "summarize", "run_events",
    "no_thread_leak", "ThreadLeakError", "FakeOpenAIServer", "FakeAnthropicServer", "FakeGeminiServer", "FakeResponsesServer", "Reply", "check_checkpoint_store",
    "StoreConformanceError", "StoreCheck", "StoreFactory", "ALL_CHECKS", "STORE_CHECKS",
    "LEASE_CHECKS", "STEP_CHECKS", "UNUSUAL_IDS", "cassette", "Cassette", "CassetteError", "CassetteMismatchError",
    "CassetteUnplayedError",
    "Clock", "ManualClock",
}


# agentkit.evals: evaluating agents (docs/guides/testing.md, API.md section 15).
EVALS_DOCUMENTED = {
    "Case", "Dataset", "DatasetError", "CaseRun", "Check", "CheckOutcome", "Equals", "Contains",
    "Matches", "ToolCalled", "OutputType", "MatchesSchema", "MaxSteps", "MaxTokens", "MaxLatency",
    "MaxCost", "Judge", "evaluate", "EvalCancelledError", "EvalReport", "CaseReport",
    "EvalComparison", "CaseChange",
}


def test_evals_all_is_exactly_the_documented_surface() -> None:
    import agentkit.evals

    assert set(agentkit.evals.__all__) == EVALS_DOCUMENTED
    for name in agentkit.evals.__all__:
        obj = getattr(agentkit.evals, name)
        if _is_class_or_function(obj):
            assert obj.__doc__ and obj.__doc__.strip(), f"agentkit.evals.{name} has no docstring"
            assert obj.__module__ == "agentkit.evals", f"{name}: {obj.__module__}"


def test_testing_all_is_exactly_the_documented_surface() -> None:
    import agentkit.testing

    assert set(agentkit.testing.__all__) == TESTING_DOCUMENTED
    assert len(agentkit.testing.__all__) == len(set(agentkit.testing.__all__))


def test_every_testing_name_resolves_is_documented_and_presents_itself_publicly() -> None:
    import agentkit.testing

    for name in agentkit.testing.__all__:
        obj = getattr(agentkit.testing, name)
        if _is_class_or_function(obj):
            assert obj.__doc__ and obj.__doc__.strip(), f"agentkit.testing.{name} has no docstring"
            # a public path in reprs (agentkit.testing.X, agentkit.models.scripted.X), never a
            # private module
            assert not any(part.startswith("_") for part in obj.__module__.split(".")), (
                f"{name}: {obj.__module__}"
            )
    for check in agentkit.testing.ALL_CHECKS:
        assert check.__doc__ and check.__doc__.strip(), f"{check.__name__} has no docstring"

