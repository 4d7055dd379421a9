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
from agentkit._interrupt import get_interrupt_state, interrupt, interrupt_event
from agentkit._lazy import attach, present
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
from agentkit.agents._model_retry import ModelRetryConfig
from agentkit.agents.chatmodel import ChatModelAgent, GenModelInput
from agentkit.agents.flow import (
    HistoryEntry,
    HistoryRewriter,
    agent_with_options,
    set_sub_agents,
)
from agentkit.cancel import CancelHandle, CancelMode
from agentkit.errors import (
    AgentCancelledError,
    AgentConfigError,
    AgentFrozenError,
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
    ConversationError,
    ConversationRecordError,
    ConversationStoreError,
    ExceedMaxIterationsError,
    IncompleteStreamError,
    InstructionFormatError,
    ModelError,
    OutputValidationError,
    PermissionDeniedError,
    RateLimitError,
    ResponseTooLargeError,
    ResumeError,
    RetryExhaustedError,
    ToolArgumentsError,
    ToolError,
    ToolNotFoundError,
    ToolTimeoutError,
    TransferError,
    WillRetryError,
)
from agentkit.events import (
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
    break_loop_action,
    event_from_message,
    exit_action,
    gen_transfer_messages,
    new_break_loop_action,
    new_exit_action,
    new_transfer_to_agent_action,
    transfer_action,
)
from agentkit.iterators import (
    AsyncGenerator,
    AsyncIterator,
    ItemIterator,
    ItemSender,
    channel,
    new_async_iterator_pair,
)
from agentkit.middleware import (
    AgentContext,
    AgentMiddleware,
    ModelState,
    get_run_local_value,
    send_event,
    set_run_local_value,
)
from agentkit.models.base import ChatModel, ModelOptions, ToolCallingChatModel
from agentkit.options import (
    AgentRunOption,
    custom_option,
    custom_options,
    get_impl_specific_options,
    with_cancel,
    with_chat_model_options,
    with_checkpoint_id,
    with_conversation_id,
    with_session_values,
    with_skip_transfer_messages,
    with_tool_options,
    wrap_impl_specific_opt_fn,
)
from agentkit.results import RunResult
from agentkit.runner import Runner
from agentkit.schema import (
    FunctionCall,
    Message,
    ResponseMeta,
    Role,
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
from agentkit.tools.approval import (
    ApprovalRequest,
    Approve,
    Reject,
    UnfinishedToolCall,
    with_approval,
)
from agentkit.tools.base import BaseTool, InvokableTool, StreamableTool, ToolCallInfo
from agentkit.tools.function import tool

__version__ = "0.1.0"

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
    "get_run_local_value",
    "send_event",
    "set_run_local_value",
    "RunInfo",
    "UsageTracker",
    "with_callbacks",
    "ModelRetryConfig",
    "FailoverChatModel",
    "RetryExhaustedError",
    "WillRetryError",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "Agent",
    "AgentAction",
    "AgentCancelledError",
    "AgentConfigError",
    "AgentEvent",
    "AgentFrozenError",
    "AgentInput",
    "AgentKitError",
    "AgentOutput",
    "AgentRun",
    "AgentRunOption",
    "AgentTool",
    "AsyncGenerator",
    "AsyncIterator",
    "ItemIterator",
    "ItemSender",
    "channel",
    "AuthenticationError",
    "BadRequestError",
    "BaseAgent",
    "BaseTool",
    "BreakLoopAction",
    "CancelHandle",
    "CancelMode",
    "ChatModel",
    "ChatModelAgent",
    "CheckpointBusyError",
    "CheckpointConsumedError",
    "CheckpointError",
    "CheckpointNotFoundError",
    "ConversationBusyError",
    "ConversationError",
    "ConversationRecordError",
    "ConversationStoreError",
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
    "InstructionFormatError",
    "InterruptContext",
    "InterruptInfo",
    "InvokableTool",
    "Message",
    "MessageVariant",
    "ModelCall",
    "ModelError",
    "OutputValidationError",
    "ModelOptions",
    "OnSubAgents",
    "OpenAIChatModel",
    "PermissionDeniedError",
    "RateLimitError",
    "ResponseMeta",
    "ResumableAgent",
    "ResumeError",
    "ResumeInfo",
    "Role",
    "RunStep",
    "RunResult",
    "Runner",
    "ScriptedChatModel",
    "StreamEOF",
    "StreamReader",
    "StreamWriter",
    "StreamableTool",
    "TokenUsage",
    "ToolArgumentsError",
    "ToolCall",
    "ToolCallInfo",
    "ToolCallingChatModel",
    "ToolError",
    "ToolInfo",
    "ToolNotFoundError",
    "ToolTimeoutError",
    "TransferError",
    "TransferToAgentAction",
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
    "custom_option",
    "custom_options",
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
    "exit_action",
    "transfer_action",
    "break_loop_action",
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
    "wrap_impl_specific_opt_fn",
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
    "events",
    "integrations",
    "iterators",
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
    "tools",
)

# The names above are what a plain agent script uses; they present themselves as ``agentkit.X``
# in reprs and tracebacks.
present((globals()[name] for name in __all__ if name in globals()), __name__)

if TYPE_CHECKING:
    from agentkit.agents.agenttool import AgentTool
    from agentkit.agents.deterministic import agent_with_deterministic_transfer_to
    from agentkit.agents.workflow import LoopAgent, ParallelAgent, SequentialAgent
    from agentkit.callbacks import RunInfo, UsageTracker, with_callbacks
    from agentkit.display import print_events
    from agentkit.models.failover import FailoverChatModel
    from agentkit.models.openai import OpenAIChatModel
    from agentkit.models.scripted import ModelCall, ScriptedChatModel
    from agentkit.tools.exit import ExitTool
else:
    # Workflows, agent tools, callbacks, display and the other models load on first use
    # (``agentkit.LoopAgent``, ``from agentkit import LoopAgent``): ``import agentkit`` stays fast.
    __getattr__, __dir__ = attach(
        __name__,
        {
            "AgentTool": "agentkit.agents.agenttool",
            "agent_with_deterministic_transfer_to": "agentkit.agents.deterministic",
            "LoopAgent": "agentkit.agents.workflow",
            "ParallelAgent": "agentkit.agents.workflow",
            "SequentialAgent": "agentkit.agents.workflow",
            "RunInfo": "agentkit.callbacks",
            "UsageTracker": "agentkit.callbacks",
            "with_callbacks": "agentkit.callbacks",
            "print_events": "agentkit.display",
            "FailoverChatModel": "agentkit.models.failover",
            "OpenAIChatModel": "agentkit.models.openai",
            "ModelCall": "agentkit.models.scripted",
            "ScriptedChatModel": "agentkit.models.scripted",
            "ExitTool": "agentkit.tools.exit",
        },
        submodules=_SUBMODULES,
    )
