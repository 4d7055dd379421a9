"""agentkit: a thread-based synchronous agent development kit, after CloudWeGo Eino ADK.

Agents return an event iterator at once and run in worker threads; nothing here uses
asyncio, so agentkit works the same in scripts, Jupyter notebooks and WSGI apps::

    from agentkit import ChatModelAgent, Runner, print_events
    from agentkit.models import OpenAIChatModel

    agent = ChatModelAgent("assistant", "answers questions", OpenAIChatModel("gpt-4o-mini"))
    print_events(Runner(agent).query("Hello!"))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._agent import AgentRun, BaseAgent, run_in_worker
from agentkit._cancel import CancelHandle, CancelMode
from agentkit._events import (
    Agent,
    AgentAction,
    AgentEvent,
    AgentInput,
    AgentOutput,
    BreakLoopAction,
    InterruptContext,
    InterruptInfo,
    MessageVariant,
    OnSubAgents,
    ResumableAgent,
    ResumeInfo,
    RunStep,
    TransferToAgentAction,
    event_from_message,
    gen_transfer_messages,
    new_break_loop_action,
    new_exit_action,
    new_transfer_to_agent_action,
)
from agentkit._interrupt import get_interrupt_state, interrupt, interrupt_event
from agentkit._lazy import attach, present
from agentkit._limits import LimitReached, ModelPricing, RunLimits
from agentkit._middleware import (
    AgentContext,
    AgentMiddleware,
    ModelState,
    delete_run_local_value,
    get_run_local_value,
    send_event,
    set_run_local_value,
)
from agentkit._options import (
    AgentRunOption,
    get_impl_specific_options,
    with_cancel,
    with_chat_model_options,
    with_checkpoint_id,
    with_conversation_id,
    with_limits,
    with_session_values,
    with_skip_transfer_messages,
    with_tool_options,
    wrap_impl_specific_opt_fn,
)
from agentkit._results import RunResult
from agentkit._runctx import (
    abort_on_cancel,
    add_session_value,
    add_session_values,
    cancellable_sleep,
    check_cancelled,
    get_session_value,
    get_session_values,
    get_tool_options,
    send_tool_gen_action,
    tool_call_key,
)
from agentkit._runner import Runner
from agentkit._throttle import ConcurrencyLimit, RateLimit
from agentkit.agents._chatmodel import ChatModelAgent, GenModelInput
from agentkit.agents._flow import (
    HistoryEntry,
    HistoryRewriter,
    agent_with_options,
    set_sub_agents,
)
from agentkit.agents._model_retry import ModelRetryConfig
from agentkit.errors import (
    AgentCancelledError,
    AgentKitError,
    APIConnectionError,
    APIStatusError,
    APITimeoutError,
    AuthenticationError,
    BadRequestError,
    CheckpointBusyError,
    CheckpointConsumedError,
    CheckpointError,
    CheckpointNotFoundError,
    ConversationBusyError,
    ExceedMaxIterationsError,
    GuardrailTripped,
    IncompleteStreamError,
    ModelError,
    PermissionDeniedError,
    RateLimitError,
    ResponseTooLargeError,
    RetryExhaustedError,
    RunLimitError,
    ToolArgumentsError,
    ToolError,
    ToolNotFoundError,
    ToolTimeoutError,
    TransferError,
    WillRetryError,
)
from agentkit.iterators import (
    AsyncGenerator,
    AsyncIterator,
    new_async_iterator_pair,
)
from agentkit.schema import (
    AudioPart,
    FilePart,
    FunctionCall,
    ImagePart,
    Message,
    ResponseMeta,
    Role,
    TextPart,
    TokenUsage,
    ToolCall,
    ToolInfo,
    assistant_message,
    concat_messages,
    system_message,
    tool_message,
    user_message,
)
from agentkit.streams import (
    StreamEOF,
    StreamReader,
    StreamWriter,
    concat_message_stream,
    pipe,
    stream_from_iterator,
    stream_from_list,
)
from agentkit.tools._approval import ApprovalRequest, Approve, Reject, with_approval
from agentkit.tools._base import BaseTool, InvokableTool, StreamableTool, ToolCallInfo
from agentkit.tools._function import tool
from agentkit.tools._unfinished import UnfinishedToolCall

__version__ = "0.2.0"
"""agentkit's version (the distribution's version, from ``setup.cfg``)."""

__all__ = [
    "ApprovalRequest",
    "Approve",
    "Reject",
    "UnfinishedToolCall",
    "with_approval",
    "tool_call_key",
    "AgentContext",
    "AgentMiddleware",
    "ModelState",
    "delete_run_local_value",
    "get_run_local_value",
    "send_event",
    "set_run_local_value",
    "RunInfo",
    "UsageTracker",
    "with_callbacks",
    "ModelRetryConfig",
    "ConcurrencyLimit",
    "RateLimit",
    "RetryExhaustedError",
    "WillRetryError",
    "RunLimits",
    "LimitReached",
    "ModelPricing",
    "RunLimitError",
    "GuardrailTripped",
    "with_limits",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "Agent",
    "AgentAction",
    "AgentCancelledError",
    "AgentEvent",
    "AgentInput",
    "AgentKitError",
    "AgentOutput",
    "AgentRun",
    "AgentRunOption",
    "AgentTool",
    "AsyncGenerator",
    "AsyncIterator",
    "AuthenticationError",
    "BadRequestError",
    "BaseAgent",
    "BaseTool",
    "BreakLoopAction",
    "CancelHandle",
    "CancelMode",
    "ChatModelAgent",
    "CheckpointBusyError",
    "CheckpointConsumedError",
    "CheckpointError",
    "CheckpointNotFoundError",
    "ConversationBusyError",
    "ExceedMaxIterationsError",
    "ExitTool",
    "FunctionCall",
    "GenModelInput",
    "HistoryEntry",
    "HistoryRewriter",
    "IncompleteStreamError",
    "ResponseTooLargeError",
    "LoopAgent",
    "ParallelAgent",
    "SequentialAgent",
    "InterruptContext",
    "InterruptInfo",
    "InvokableTool",
    "Message",
    "MessageVariant",
    "ModelError",
    "OnSubAgents",
    "PermissionDeniedError",
    "RateLimitError",
    "ResponseMeta",
    "ResumableAgent",
    "ResumeInfo",
    "Role",
    "RunStep",
    "RunResult",
    "Runner",
    "StreamEOF",
    "StreamReader",
    "StreamWriter",
    "StreamableTool",
    "TokenUsage",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallInfo",
    "ToolError",
    "ToolInfo",
    "TextPart",
    "ImagePart",
    "FilePart",
    "AudioPart",
    "ToolNotFoundError",
    "ToolTimeoutError",
    "TransferError",
    "TransferToAgentAction",
    "TurnLoop",
    "TurnLoopExit",
    "__version__",
    "abort_on_cancel",
    "add_session_value",
    "add_session_values",
    "cancellable_sleep",
    "check_cancelled",
    "agent_with_deterministic_transfer_to",
    "agent_with_options",
    "assistant_message",
    "concat_message_stream",
    "concat_messages",
    "event_from_message",
    "gen_transfer_messages",
    "get_impl_specific_options",
    "wrap_impl_specific_opt_fn",
    "get_interrupt_state",
    "get_session_value",
    "get_session_values",
    "get_tool_options",
    "interrupt",
    "interrupt_event",
    "new_async_iterator_pair",
    "new_break_loop_action",
    "new_exit_action",
    "new_transfer_to_agent_action",
    "pipe",
    "print_events",
    "run_in_worker",
    "send_tool_gen_action",
    "set_sub_agents",
    "stream_from_iterator",
    "stream_from_list",
    "system_message",
    "tool",
    "tool_message",
    "user_message",
    "with_cancel",
    "with_chat_model_options",
    "with_checkpoint_id",
    "with_conversation_id",
    "with_session_values",
    "with_skip_transfer_messages",
    "with_tool_options",
]

#: Public subpackages and modules, importable as attributes (``agentkit.checkpoint``).
_SUBMODULES = (
    "agents",
    "callbacks",
    "cancel",
    "checkpoint",
    "compaction",
    "conversation",
    "display",
    "errors",
    "evals",
    "events",
    "guardrails",
    "integrations",
    "iterators",
    "limits",
    "mcp",
    "middleware",
    "models",
    "options",
    "prebuilt",
    "results",
    "runner",
    "schema",
    "streams",
    "testing",
    "throttle",
    "tools",
    "turnloop",
)

# The names above are what a plain agent script uses; they present themselves as ``agentkit.X``
# in reprs and tracebacks.
present((globals()[name] for name in __all__ if name in globals()), __name__)

#: Second spellings of objects whose one import path is elsewhere (kept until agentkit 0.4).
_DEPRECATED = {
    # errors API.md does not name: agentkit.errors is the tree's home (API.md binds the others
    # at the top level too)
    "AgentConfigError": "agentkit.errors.AgentConfigError",
    "AgentFrozenError": "agentkit.errors.AgentFrozenError",
    "ContentPartError": "agentkit.errors.ContentPartError",
    "ConversationError": "agentkit.errors.ConversationError",
    "ConversationRecordError": "agentkit.errors.ConversationRecordError",
    "ConversationStoreError": "agentkit.errors.ConversationStoreError",
    "InstructionFormatError": "agentkit.errors.InstructionFormatError",
    "OutputValidationError": "agentkit.errors.OutputValidationError",
    "ResumeError": "agentkit.errors.ResumeError",
    "SharedLimitError": "agentkit.errors.SharedLimitError",
    "SharedLimitUnavailableError": "agentkit.errors.SharedLimitUnavailableError",
    "SlotTimeoutError": "agentkit.errors.SlotTimeoutError",
    # the TurnLoop's parts: agentkit.turnloop (API.md section 15 binds TurnLoop, TurnLoopExit)
    "SavedTurn": "agentkit.turnloop.SavedTurn",
    "TurnContext": "agentkit.turnloop.TurnContext",
    "TurnInput": "agentkit.turnloop.TurnInput",
    "TurnInterruptedError": "agentkit.turnloop.TurnInterruptedError",
    "TurnResume": "agentkit.turnloop.TurnResume",
    # Pythonic second names of 0.2: API.md names Eino's (sections 3, 4 and 6)
    "ItemIterator": "agentkit.AsyncIterator",
    "ItemSender": "agentkit.AsyncGenerator",
    "channel": "agentkit.new_async_iterator_pair",
    "exit_action": "agentkit.new_exit_action",
    "transfer_action": "agentkit.new_transfer_to_agent_action",
    "break_loop_action": "agentkit.new_break_loop_action",
    "custom_option": "agentkit.wrap_impl_specific_opt_fn",
    "custom_options": "agentkit.get_impl_specific_options",
    # agentkit.models is the models' module (API.md section 8)
    "ChatModel": "agentkit.models.ChatModel",
    "FailoverChatModel": "agentkit.models.FailoverChatModel",
    "ModelCall": "agentkit.models.ModelCall",
    "ModelOptions": "agentkit.models.ModelOptions",
    "OpenAIChatModel": "agentkit.models.OpenAIChatModel",
    "ScriptedChatModel": "agentkit.models.ScriptedChatModel",
    "ToolCallingChatModel": "agentkit.models.ToolCallingChatModel",
}

if TYPE_CHECKING:
    from agentkit._callbacks import RunInfo, UsageTracker, with_callbacks
    from agentkit._display import print_events
    from agentkit._turnloop import TurnLoop, TurnLoopExit
    from agentkit.agents._agenttool import AgentTool
    from agentkit.agents._deterministic import agent_with_deterministic_transfer_to
    from agentkit.agents._workflow import LoopAgent, ParallelAgent, SequentialAgent
    from agentkit.tools._exit import ExitTool
else:
    # Workflows, agent tools, callbacks, display and the TurnLoop load on first use
    # (``agentkit.LoopAgent``, ``from agentkit import LoopAgent``): ``import agentkit`` stays fast.
    __getattr__, __dir__ = attach(
        __name__,
        {
            "AgentTool": "agentkit.agents._agenttool",
            "agent_with_deterministic_transfer_to": "agentkit.agents._deterministic",
            "LoopAgent": "agentkit.agents._workflow",
            "ParallelAgent": "agentkit.agents._workflow",
            "SequentialAgent": "agentkit.agents._workflow",
            "RunInfo": "agentkit._callbacks",
            "UsageTracker": "agentkit._callbacks",
            "with_callbacks": "agentkit._callbacks",
            "print_events": "agentkit._display",
            "ExitTool": "agentkit.tools._exit",
            "TurnLoop": "agentkit._turnloop",
            "TurnLoopExit": "agentkit._turnloop",
        },
        submodules=_SUBMODULES,
        deprecated=_DEPRECATED,
    )
