"""The agentkit exception tree.

Every error agentkit raises derives from :class:`AgentKitError`. Where a builtin
exception says the same thing, the agentkit error subclasses it too, so existing
``except ValueError`` / ``except KeyError`` clauses keep working::

    AgentKitError
    ├── AgentKitValueError (ValueError)       a value passed in was not valid
    ├── AgentKitTypeError (TypeError)         a value passed in had the wrong type
    ├── AgentKitRuntimeError (RuntimeError)   an object used in a state that does not allow it
    ├── AgentKitTimeoutError (TimeoutError)   a bounded wait ran out
    ├── AgentKitKeyError (KeyError)           a name or id that is not there
    ├── MissingDependencyError (ImportError)  an optional dependency is not installed
    ├── ExceedMaxIterationsError
    ├── RunLimitError
    ├── GuardrailTripped
    ├── TransferError
    ├── AgentConfigError (ValueError)
    ├── FrozenError (attrs.exceptions.FrozenInstanceError, an AttributeError)
    │   └── AgentFrozenError (RuntimeError)
    ├── InstructionFormatError (ValueError)
    ├── ResumeError
    ├── AgentCancelledError
    │   └── RunClosedError
    ├── OutputValidationError (ValueError)
    ├── ContentPartError (ValueError)
    ├── SharedLimitError
    │   ├── SlotTimeoutError (TimeoutError)
    │   └── SharedLimitUnavailableError (ConnectionError)
    ├── ConversationError
    │   ├── ConversationBusyError
    │   ├── ConversationStoreError
    │   └── ConversationRecordError (ValueError)
    ├── CheckpointError
    │   ├── CheckpointNotFoundError (KeyError)
    │   ├── CheckpointConsumedError
    │   └── CheckpointBusyError
    ├── ToolError
    │   ├── ToolArgumentsError (ValueError)
    │   ├── ToolNotFoundError (LookupError)
    │   └── ToolTimeoutError (TimeoutError)
    └── ModelError
        ├── RetryExhaustedError
        ├── WillRetryError
        ├── APIConnectionError (ConnectionError)
        │   ├── APITimeoutError (TimeoutError)
        │   └── IncompleteStreamError
        ├── ResponseTooLargeError
        ├── ContentBlockedError
        └── APIStatusError
            ├── BadRequestError          400
            ├── AuthenticationError      401
            ├── PermissionDeniedError    403
            └── RateLimitError           429

Optional parts add subclasses of these where they live: ``agentkit.mcp`` (``MCPConnectionError``
with its ``MCPProtocolError``, and ``MCPServerError``, all ``ToolError``; ``MCPClientClosedError``,
``MCPNotInstalledError``),
``agentkit.integrations.runs`` (``RunNotFoundError``, ``RunStateError``),
``agentkit.memory`` (``MemoryStoreError`` with ``MemoryTooLargeError`` and
``MemoryStoreFullError``),
``agentkit.prebuilt.planexecute`` (``PlanExecuteError``), ``agentkit.backends``
(``BackendError`` with ``PathOutsideRootError``, ``FileTooLargeError``, ``BinaryFileError`` and
``EditError``), ``agentkit.middlewares.skill`` (``SkillError``), ``agentkit.turnloop``
(``TurnInterruptedError``), ``agentkit.testing`` (``CassetteError`` with its
``CassetteMismatchError``) and ``agentkit.evals`` (``DatasetError``, ``EvalCancelledError``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

__all__ = [
    "AgentKitKeyError",
    "AgentKitRuntimeError",
    "AgentKitTimeoutError",
    "AgentKitTypeError",
    "AgentKitValueError",
    "MissingDependencyError",
    "APIConnectionError",
    "APIStatusError",
    "APITimeoutError",
    "AgentCancelledError",
    "AgentConfigError",
    "AgentFrozenError",
    "AgentKitError",
    "AuthenticationError",
    "BadRequestError",
    "CheckpointBusyError",
    "CheckpointConsumedError",
    "CheckpointError",
    "CheckpointNotFoundError",
    "ContentPartError",
    "ConversationBusyError",
    "ConversationError",
    "ConversationRecordError",
    "ConversationStoreError",
    "ExceedMaxIterationsError",
    "FrozenError",
    "GuardrailTripped",
    "IncompleteStreamError",
    "InstructionFormatError",
    "ModelError",
    "OutputValidationError",
    "PermissionDeniedError",
    "RateLimitError",
    "ResponseTooLargeError",
    "ContentBlockedError",
    "ResumeError",
    "RetryExhaustedError",
    "RunClosedError",
    "RunLimitError",
    "SharedLimitError",
    "SharedLimitUnavailableError",
    "SlotTimeoutError",
    "WillRetryError",
    "ToolArgumentsError",
    "ToolError",
    "ToolNotFoundError",
    "ToolTimeoutError",
    "TransferError",
]


class AgentKitError(Exception):
    """Base class of every error raised by agentkit."""


# The general errors: what a builtin error would say, in the agentkit tree (so ``except
# AgentKitError`` sees every error of agentkit, and ``except ValueError`` still works).


class AgentKitValueError(AgentKitError, ValueError):
    """A value passed to agentkit was not valid; the message says which, why, and what to pass."""


class AgentKitTypeError(AgentKitError, TypeError):
    """A value passed to agentkit had the wrong type; the message says what was expected."""


class AgentKitRuntimeError(AgentKitError, RuntimeError):
    """An object was used in a state that does not allow it (closed, started already...)."""


class AgentKitTimeoutError(AgentKitError, TimeoutError):
    """A bounded wait ran out of time."""


class AgentKitKeyError(AgentKitError, KeyError):
    """A name or id that is not there was asked for."""


class MissingDependencyError(AgentKitError, ImportError):
    """An optional dependency is not installed; the message names the extra that has it."""


class ExceedMaxIterationsError(AgentKitError):
    """A ChatModelAgent called its model ``max_iterations`` times without finishing.

    The message starts with ``exceeds max iterations`` (Eino's text), then says which agent hit
    which limit and how to raise it, and quotes the tool results that were errors in the last
    rounds (the unknown tool or agent the model kept asking for, the arguments a tool kept
    refusing), with how often each came back.

    Attributes:
        max_iterations: the limit that was reached, when known.
        agent_name: the agent that reached it, ``""`` when unknown.
        tool_errors: the last tool results that were errors (the text the model got), oldest
            first, each once; empty when the last rounds had none.
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        max_iterations: int | None = None,
        agent_name: str = "",
        tool_errors: Sequence[tuple[str, int]] = (),
    ) -> None:
        if message is None:
            message = _max_iterations_text(max_iterations, agent_name, tool_errors)
        super().__init__(message)
        self.max_iterations = max_iterations
        self.agent_name = agent_name
        self.tool_errors = tuple(text for text, _ in tool_errors)

    def __reduce__(self) -> tuple[Any, ...]:
        state = {
            "max_iterations": self.max_iterations,
            "agent_name": self.agent_name,
            "tool_errors": self.tool_errors,
        }
        return (type(self), (str(self),), state)


def _max_iterations_text(
    max_iterations: int | None, agent_name: str, tool_errors: Sequence[tuple[str, int]]
) -> str:
    if max_iterations is None:
        return "exceeds max iterations"
    who = f"agent '{agent_name}'" if agent_name else "the agent"
    text = (
        f"exceeds max iterations: {who} called its model {max_iterations} times "
        f"(max_iterations={max_iterations}) and the model still asked for tools instead of "
        "answering."
    )
    if not tool_errors:
        return text + (
            " Raise the limit with ChatModelAgent(..., max_iterations=N), or look at the tool "
            "results in the events: a model that keeps retrying a failing tool never finishes"
        )
    quoted = "; ".join(
        f"{_shortened(error)!r}" + (f" ({count} times)" if count > 1 else "")
        for error, count in tool_errors
    )
    return (
        f"{text} The last tool calls failed, and the model was told: {quoted}. Fix what the "
        "model keeps getting wrong (a tool or agent name, the arguments, the instruction), or "
        "raise the limit with ChatModelAgent(..., max_iterations=N)"
    )


def _shortened(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class RunLimitError(AgentKitError):
    """A run reached one of its :class:`~agentkit.RunLimits` and had no checkpoint to pause in.

    The run ended before its next model or tool call. Give the run a larger limit
    (``with_limits(...)``, ``Runner(limits=...)``), or a checkpoint id: then reaching a limit
    pauses the run (a :class:`~agentkit.LimitReached` interrupt) instead, and it can go on.

    Attributes:
        limit: which limit (``"model_calls"``, ``"tool_calls"``, ``"input_tokens"``,
            ``"output_tokens"``, ``"total_tokens"``, ``"cost"`` or ``"wall_time"``).
        used: how much the run used (over its resumes too).
        allowed: the allowance it reached.
    """

    def __init__(
        self, message: str, *, limit: str = "", used: float = 0, allowed: float = 0
    ) -> None:
        super().__init__(message)
        self.limit = limit
        self.used = used
        self.allowed = allowed

    def __reduce__(self) -> tuple[Any, ...]:
        state = {"limit": self.limit, "used": self.used, "allowed": self.allowed}
        return (type(self), (str(self),), state)


class GuardrailTripped(AgentKitError):
    """A guardrail of a :class:`~agentkit.ChatModelAgent` stopped the run.

    Raised for the input and output checks (a tripped tool-call check does not end the run:
    the call is not run and the model is told why).

    Attributes:
        stage: ``"input"``, ``"output"`` or ``"tool_call"``.
        reason: what the guardrail said.
        guardrail: the guardrail's name (its ``name`` attribute, else its class name).
        agent_name: the agent whose guardrail tripped.
    """

    def __init__(
        self,
        message: str,
        *,
        stage: str = "",
        reason: str = "",
        guardrail: str = "",
        agent_name: str = "",
    ) -> None:
        super().__init__(message)
        self.stage = stage
        self.reason = reason
        self.guardrail = guardrail
        self.agent_name = agent_name

    def __reduce__(self) -> tuple[Any, ...]:
        state = {
            "stage": self.stage,
            "reason": self.reason,
            "guardrail": self.guardrail,
            "agent_name": self.agent_name,
        }
        return (type(self), (str(self),), state)


class OutputValidationError(AgentKitError, ValueError):
    """A ChatModelAgent's model did not give an answer matching its ``output_type``.

    Raised after the corrections the agent allows (``max_output_corrections``).

    Attributes:
        agent_name: the agent whose answer was invalid.
    """

    def __init__(self, message: str, *, agent_name: str = "") -> None:
        super().__init__(message)
        self.agent_name = agent_name

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self),), {"agent_name": self.agent_name})


class ContentPartError(AgentKitError, ValueError):
    """A content part (an image, a file, a sound) or a message's parts cannot be used.

    Raised when a part is built or a message is given its parts: bytes over the size cap or
    more parts than a message may hold (see :class:`~agentkit.schema.PartLimits`), bytes that
    are not what the media type says (a truncated PNG, an executable called an image), a URL
    a model server must not be asked to fetch (``file://``, private and metadata hosts), or
    content that is not text or parts. The message names the part and says how to fix it.
    """


class SharedLimitError(AgentKitError):
    """A call could not get its turn under a shared limit (``ConcurrencyLimit``, ``RateLimit``).

    Attributes:
        limit: the limit object the call waited for.
        waited: the seconds the call waited before it gave up.
    """

    def __init__(self, message: str, *, limit: object = None, waited: float = 0.0) -> None:
        super().__init__(message)
        self.limit = limit
        self.waited = waited

    def __reduce__(self) -> tuple[Any, ...]:
        # The limit itself may hold locks or connections: it travels as its repr.
        state = {"limit": repr(self.limit), "waited": self.waited}
        return (type(self), (str(self),), state)


class SlotTimeoutError(SharedLimitError, TimeoutError):
    """A call waited for a shared limit (a free slot, or room in a rate) longer than its timeout."""


class SharedLimitUnavailableError(SharedLimitError, ConnectionError):
    """The store a shared limit keeps its state in (Redis) could not be reached."""


class ConversationError(AgentKitError):
    """A conversation could not be loaded, appended to, locked or repaired.

    Attributes:
        conversation_id: the conversation, ``""`` when unknown.
    """

    def __init__(self, message: str, *, conversation_id: str = "") -> None:
        super().__init__(message)
        self.conversation_id = conversation_id

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self),), {"conversation_id": self.conversation_id})


class ConversationBusyError(ConversationError):
    """Another turn of the same conversation is running (one writer per conversation)."""


class ConversationStoreError(ConversationError):
    """A conversation store failed to load or append a conversation."""


class ConversationRecordError(ConversationError, ValueError):
    """A conversation record is bad: not UTF-8, not JSON, not a message, or over the size limit.

    Raised by ``load`` for a stored record that cannot be read (the conversation stays as it
    is: repair it with the store's ``drop_record(conversation_id, index)``), and by ``append``
    for a message whose record would be over the store's ``max_record_bytes`` (then nothing
    of that append is stored).

    Attributes:
        conversation_id: the conversation.
        index: from ``load``, the record's position in the conversation (0 is the oldest);
            from ``append``, the message's position in the messages given to it.
    """

    def __init__(self, message: str, *, conversation_id: str = "", index: int = 0) -> None:
        super().__init__(message, conversation_id=conversation_id)
        self.index = index

    def __reduce__(self) -> tuple[Any, ...]:
        state = {"conversation_id": self.conversation_id, "index": self.index}
        return (type(self), (str(self),), state)


class TransferError(AgentKitError):
    """A transfer between agents failed (for example: unknown destination agent)."""


class AgentConfigError(AgentKitError, ValueError):
    """An agent, or the tree of agents, was configured in a way that cannot work."""


class FrozenError(AgentKitError, attrs.exceptions.FrozenInstanceError):
    """A value was changed after it was made.

    Messages, events, agents and models are values: what a run read, a reader or a later
    change cannot rewrite. The message names the attribute and how to make a changed copy
    (``attrs.evolve(value, name=...)`` or the object's ``replace``). It is an
    :class:`AttributeError` (as attrs' ``FrozenInstanceError``, which it subclasses).
    """

    def __init__(self, message: str = "can't set attribute") -> None:
        AttributeError.__init__(self, message)
        self.msg = message


class AgentFrozenError(FrozenError, RuntimeError):
    """An agent was changed after it was built: agents are values.

    Raised when a setting is assigned on a built agent (make a changed copy instead, e.g.
    ``ChatModelAgent.replace``), and when an agent that ran already is wired into a flow.
    """


class InstructionFormatError(AgentKitError, ValueError):
    """A ChatModelAgent instruction could not be formatted with the session values."""


class ResumeError(AgentKitError):
    """A run could not be resumed from its checkpoint (the agent tree does not match it)."""


class AgentCancelledError(AgentKitError):
    """The run was cancelled (``CancelHandle.cancel()`` or the event iterator was closed).

    Attributes:
        mode: the :class:`~agentkit.CancelMode` that took effect.
        escalated: ``True`` when a safe-point cancel escalated to an immediate one after its
            timeout.
    """

    def __init__(self, mode: Any = None, escalated: bool = False) -> None:
        super().__init__(_cancelled_text(mode, escalated))
        self.mode = mode
        self.escalated = escalated

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.mode, self.escalated))


class RunClosedError(AgentCancelledError):
    """The run was cancelled by its reader: the event iterator was closed before the run
    ended (``it.close()``, or a ``break`` out of ``with runner.query(...) as it``).

    :meth:`RunIterator.result <agentkit.results.RunIterator.result>` reports such a run with this
    error (``status == "cancelled"``), never as completed with the last message read.

    Attributes:
        events_read: how many events the reader had taken when it closed the iterator.
    """

    def __init__(self, mode: Any = None, escalated: bool = False, events_read: int = 0) -> None:
        super().__init__(mode, escalated)
        self.args = (
            f"the run was cancelled by its reader: the event iterator was closed after "
            f"{events_read} event(s), before the run ended. Read it to its end (or call "
            f"result()) for the whole run; a run with a checkpoint id can be resumed",
        )
        self.events_read = events_read

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.mode, self.escalated, self.events_read))


def _cancelled_text(mode: Any, escalated: bool) -> str:
    name = getattr(mode, "name", None)
    if name is None:
        return "the run was cancelled"
    if escalated:
        return (
            f"the run was cancelled: the CancelMode.{name} cancel did not reach its safe point "
            "within its timeout, so the run stopped at once"
        )
    when = {
        "IMMEDIATE": "at once",
        "AFTER_CHAT_MODEL": "after a model call, before its tools ran",
        "AFTER_TOOL_CALLS": "after a round of tool calls",
        "ANY_SAFE_POINT": "at the first safe point, after a model call or a round of tool calls",
    }.get(name, "")
    return f"the run was cancelled (CancelMode.{name}{': ' + when if when else ''})"


class CheckpointError(AgentKitError):
    """A checkpoint could not be saved, loaded or trusted."""


class CheckpointNotFoundError(CheckpointError, KeyError):
    """No checkpoint is stored under the requested id."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else ""


class CheckpointConsumedError(CheckpointError):
    """The checkpoint was consumed: a resumed run of it completed, so it cannot run again."""


class CheckpointBusyError(CheckpointError):
    """Another resume of the same checkpoint id is running (in this or another process)."""


class ToolError(AgentKitError):
    """A tool call failed.

    Attributes:
        tool_name: the name of the tool.
        call_id: the id of the tool call, ``""`` when unknown.
    """

    def __init__(self, message: str, *, tool_name: str = "", call_id: str = "") -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.call_id = call_id

    def __reduce__(self) -> tuple[Any, ...]:
        state = {"tool_name": self.tool_name, "call_id": self.call_id}
        return (type(self), (str(self),), state)


class ToolArgumentsError(ToolError, ValueError):
    """The arguments of a tool call do not match the tool's parameters."""


class ToolNotFoundError(ToolError, LookupError):
    """The model called a tool that the agent does not have."""


class ToolTimeoutError(ToolError, TimeoutError):
    """A tool call did not finish within its time limit."""


class ModelError(AgentKitError):
    """A chat model call failed.

    Attributes:
        status_code: the HTTP status, when the server answered.
        body: the decoded error body the server sent, when there was one.
    """

    def __init__(self, message: str, *, status_code: int | None = None, body: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.body = body


class APIConnectionError(ModelError, ConnectionError):
    """The model server could not be reached, or the connection broke."""


class APITimeoutError(APIConnectionError, TimeoutError):
    """The model server did not answer within the timeout."""


class IncompleteStreamError(APIConnectionError):
    """A streamed response ended before the server finished it (no ``[DONE]``, no finish reason)."""


class ResponseTooLargeError(ModelError):
    """The model server's response passed the client's size limit, and was refused.

    Raised by :class:`~agentkit.models.OpenAIChatModel` as soon as a response delivers more
    bytes than its ``max_response_bytes``, or a whole (non-streamed) body declares more in
    ``Content-Length`` (seen after its first read); nothing more is read and the connection
    is closed. It is not retried: the same request would get the same answer. Raise the
    limit (``max_response_bytes=``), or pass ``None`` to turn it off.

    Attributes:
        limit: the ``max_response_bytes`` in force.
        received: how many bytes of the body had been read when it was refused.
    """

    def __init__(
        self,
        message: str,
        *,
        limit: int,
        received: int,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message, status_code=status_code)
        self.limit = limit
        self.received = received


class ContentBlockedError(ModelError):
    """The provider's safety system blocked the prompt or the reply, so there is no answer.

    Raised by :class:`~agentkit.models.GeminiChatModel` for a response whose
    ``promptFeedback.blockReason`` is set, that has no candidate, or whose candidate finished
    for ``SAFETY``, ``PROHIBITED_CONTENT``, ``BLOCKLIST``, ``SPII``, ``RECITATION`` or
    ``IMAGE_SAFETY``. Not retried: the same request would be blocked again; rephrase it, or
    change the request's ``safetySettings`` (``ModelOptions.extra``).

    Attributes:
        reason: the provider's reason, such as ``"SAFETY"``.
    """

    def __init__(
        self, message: str, *, reason: str = "", status_code: int | None = None, body: Any = None
    ) -> None:
        super().__init__(message, status_code=status_code, body=body)
        self.reason = reason


class APIStatusError(ModelError):
    """The model server answered with an error status."""


class BadRequestError(APIStatusError):
    """HTTP 400: the server rejected the request."""


class AuthenticationError(APIStatusError):
    """HTTP 401: the API key is missing or wrong."""


class PermissionDeniedError(APIStatusError):
    """HTTP 403: the API key may not use this model or endpoint."""


class RateLimitError(APIStatusError):
    """HTTP 429: too many requests (retried with backoff before it is raised)."""


class RetryExhaustedError(ModelError):
    """A ChatModelAgent's model call was rejected (failed, or its output refused by
    ``ModelRetryConfig.should_retry``) more often than ``model_retry`` allows.

    The last error is the ``__cause__``.
    """


class WillRetryError(ModelError):
    """Ends the stream of a streamed model reply that was rejected: the call is made again.

    With ``ChatModelAgent(model_retry=...)`` in a streamed run, every attempt is streamed as it
    arrives; a rejected one's stream then raises this error at its end. Consumers skip such
    events (the run's history does: the next agents never see a rejected reply).

    Attributes:
        attempt: the retry that follows, 1-based (``0`` when unknown).
        reject_reason: what ``RetryDecision(reject_reason=...)`` said about the rejected
            reply (``None`` when not set; not kept in checkpoints, as in Eino).
    """

    def __init__(
        self, message: str, *, attempt: int = 0, reject_reason: Any = None, **kwargs: Any
    ) -> None:
        super().__init__(message, **kwargs)
        self.attempt = attempt
        self.reject_reason = reject_reason

    def __reduce__(self) -> tuple[Any, ...]:
        # The reason is any value the user chose: a run's own, never pickled into a checkpoint.
        state = {
            "attempt": self.attempt,
            "reject_reason": None,
            "status_code": self.status_code,
            "body": self.body,
            "message": self.message,
        }
        return (type(self), (str(self),), state)


def _register_persisted() -> None:
    # Errors can be kept in checkpoints (a cancelled run's error, a recorded failure); their
    # stable names are their public names.
    from agentkit._persist import register_type

    for name in __all__:
        register_type(globals()[name], f"agentkit.{name}")


_register_persisted()
