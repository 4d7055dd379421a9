"""A chat model that replies from a script: for tests, examples and offline samples.

:class:`ScriptedChatModel` plays back a list of replies (or asks a function for each one)
and records every call, so a test can run real agents on real threads and then assert on
exactly what the model was sent.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias

import attrs

from agentkit._lazy import present
from agentkit._values import BuiltValue
from agentkit.errors import AgentKitTypeError, ModelError
from agentkit.models._base import ModelOptions, ToolCallingChatModel
from agentkit.schema import FunctionCall, Message, Role, ToolCall, ToolInfo, assistant_message
from agentkit.streams import StreamReader, stream_from_list

if TYPE_CHECKING:
    from agentkit._limits import ModelPricing

__all__ = ["ModelCall", "ScriptReply", "ScriptedChatModel", "split_message"]

ScriptReply: TypeAlias = (
    "Message | str | BaseException | type[BaseException] | Callable[[list[Message]], Message | str]"
)
"""One item of a script: a message, a text (an assistant message), an exception (class or
instance) to raise, or a function of the messages that returns a message or a text."""


@attrs.define
class ModelCall:
    """One call a :class:`ScriptedChatModel` received.

    Attributes:
        messages: the messages it was sent (a copy of the list; the messages themselves).
        tools: the tools the model was bound to.
        options: the options passed to the call.
        streaming: ``True`` for :meth:`~ScriptedChatModel.stream`, ``False`` for ``generate``.
    """

    messages: list[Message]
    tools: list[ToolInfo] = attrs.Factory(list)
    options: ModelOptions | None = None
    streaming: bool = False


class _Script:
    """The replies and the call log shared by a scripted model and its tool-bound copies."""

    __slots__ = ("calls", "function", "lock", "position", "replies")

    def __init__(self, script: Sequence[ScriptReply] | Callable[[list[Message]], Message | str]):
        self.lock = threading.Lock()
        self.calls: list[ModelCall] = []
        self.position = 0
        self.function: Callable[[list[Message]], Message | str] | None = None
        self.replies: list[ScriptReply] = []
        if isinstance(script, (list, tuple)):
            self.replies = list(script)
        elif callable(script) and not _is_exception(script):
            self.function = script
        else:
            raise AgentKitTypeError(
                "ScriptedChatModel(script) needs a list of replies or a function of the "
                f"messages (got {type(script).__name__})"
            )

    def next_reply(self, call: ModelCall) -> ScriptReply:
        with self.lock:
            self.calls.append(call)
            if self.function is not None:
                return self.function
            position = self.position
            if position >= len(self.replies):
                raise ModelError(
                    f"ScriptedChatModel: the script ran out after {len(self.replies)} "
                    f"replies (call {len(self.calls)} has no reply); add replies to the "
                    "script, or pass a function of the messages to answer every call"
                )
            self.position = position + 1
            return self.replies[position]


def _is_exception(item: object) -> bool:
    return isinstance(item, BaseException) or (
        isinstance(item, type) and issubclass(item, BaseException)
    )


class ScriptedChatModel(BuiltValue):
    """A :class:`~agentkit.models.ToolCallingChatModel` that replies from a script.

    ``script`` is either a list consumed one item per call, or a function of the messages
    used for every call. A list item is:

    - a :class:`~agentkit.schema.Message`: returned as is;
    - a ``str``: returned as ``assistant_message(text)``;
    - an exception class or instance: raised by the call (``stream()`` raises it itself);
    - a function of the messages returning a message or a ``str``.

    Every call is recorded in :attr:`calls` as a :class:`ModelCall`, before its reply is
    computed (a call that raises is recorded too). :meth:`with_tools` returns a model that
    shares the script position and the call log, so an agent that binds its tools still
    consumes the same script. Thread-safe.

    :meth:`stream` sends the reply in several chunks, like a real server: the content in
    about three pieces, each tool call as a first fragment with its id and name followed by
    fragments of its arguments (all with ``index`` set), and the reply's ``response_meta``
    (finish reason and usage), when it has one, on the last chunk. ``concat_messages`` of the
    chunks gives back the reply exactly, except that its tool calls carry their ``index``.

    With ``pricing`` (a :class:`~agentkit.ModelPricing`), a reply whose
    ``response_meta`` reports token usage gets its ``cost`` set, as a priced
    :class:`~agentkit.models.OpenAIChatModel` does: script replies with
    ``ResponseMeta(usage=TokenUsage(...))`` to test budgets offline.

    Raises:
        ModelError: (from a call) the script has no reply left.

    Example::

        model = ScriptedChatModel([
            assistant_message("", [ToolCall("c1", FunctionCall("add", '{"a": 1, "b": 2}'))]),
            "The sum is 3.",
        ])
    """

    def __init__(
        self,
        script: Sequence[ScriptReply] | Callable[[list[Message]], Message | str],
        *,
        pricing: ModelPricing | None = None,
    ) -> None:
        self._script = _Script(script)
        self._tools: list[ToolInfo] = []
        self._pricing = _checked_pricing(pricing)

    @property
    def pricing(self) -> ModelPricing | None:
        """What this model's tokens cost (``None``: its replies carry no cost)."""
        return self._pricing

    @property
    def calls(self) -> list[ModelCall]:
        """Every call received so far, in order (shared with tool-bound copies)."""
        return self._script.calls

    @property
    def tools(self) -> list[ToolInfo]:
        """The tools this model is bound to (a copy)."""
        return list(self._tools)

    @property
    def replies_left(self) -> int | None:
        """How many scripted replies are not used yet; ``None`` for a function script."""
        script = self._script
        with script.lock:
            if script.function is not None:
                return None
            return len(script.replies) - script.position

    def with_tools(self, tools: Sequence[ToolInfo]) -> ToolCallingChatModel:
        """Return a model bound to ``tools`` that shares this model's script and call log."""
        bound = ScriptedChatModel.__new__(ScriptedChatModel)
        bound._script = self._script
        bound._tools = list(tools)
        bound._pricing = self._pricing
        bound._arguments = self._arguments  # replace() makes a model from the same script
        return bound

    def generate(self, messages: Sequence[Message], options: ModelOptions | None = None) -> Message:
        """Record the call and return the next scripted reply (or raise the scripted error)."""
        return self._reply(messages, options, streaming=False)

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        """Record the call and return the next scripted reply as a stream of chunks."""
        reply = self._reply(messages, options, streaming=True)
        return stream_from_list(split_message(reply))

    def _reply(
        self, messages: Sequence[Message], options: ModelOptions | None, *, streaming: bool
    ) -> Message:
        history = list(messages)
        call = ModelCall(history, list(self._tools), options, streaming)
        item = self._script.next_reply(call)
        if _is_exception(item):
            raise item  # type: ignore[misc]
        if isinstance(item, (Message, str)):
            reply = _as_message(item)
        elif callable(item):
            reply = _as_message(item(list(history)))
        else:
            raise AgentKitTypeError(
                "a ScriptedChatModel script item must be a Message, a str, an exception or a "
                f"function of the messages (got {type(item).__name__})"
            )
        return reply if self._pricing is None else self._priced(reply)

    def _priced(self, reply: Message) -> Message:
        """``reply`` with the cost of its usage (itself when it reports none)."""
        pricing = self._pricing
        meta = reply.response_meta
        if pricing is None or meta is None or meta.usage is None or meta.cost is not None:
            return reply
        return attrs.evolve(reply, response_meta=attrs.evolve(meta, cost=pricing.cost(meta.usage)))

    def __repr__(self) -> str:
        left = self.replies_left
        script = "function" if left is None else f"{left} replies left"
        return f"ScriptedChatModel({script}, calls={len(self.calls)}, tools={len(self._tools)})"


def _checked_pricing(pricing: object) -> ModelPricing | None:
    from agentkit._limits import ModelPricing

    if pricing is not None and not isinstance(pricing, ModelPricing):
        raise AgentKitTypeError(
            f"pricing must be a ModelPricing (got {pricing!r}); write "
            "pricing=ModelPricing(input_per_million=..., output_per_million=...)"
        )
    return pricing


def _as_message(value: object) -> Message:
    if isinstance(value, Message):
        return value
    if isinstance(value, str):
        return assistant_message(value)
    raise AgentKitTypeError(
        "a ScriptedChatModel reply function must return a Message or a str "
        f"(got {type(value).__name__})"
    )


def _pieces(text: str, count: int) -> list[str]:
    """Split ``text`` into at most ``count`` non-empty pieces of similar length."""
    if not text:
        return []
    size = max(1, -(-len(text) // count))
    return [text[start : start + size] for start in range(0, len(text), size)]


def split_message(message: Message, pieces: int = 3) -> list[Message]:
    """Split ``message`` into stream chunks the way a model server streams a reply.

    The first chunk carries the role, name and tool-call id fields; the content comes in up to
    ``pieces`` chunks; each tool call comes as a fragment with its id and name, then up to
    ``pieces`` fragments of its arguments, all with ``index`` set; ``response_meta`` rides on
    the last chunk. ``concat_messages`` of the result rebuilds ``message`` (its tool calls
    indexed).
    """
    role: Role = message.role
    chunks: list[Message] = [
        Message(
            role,
            tool_call_id=message.tool_call_id,
            tool_name=message.tool_name,
            name=message.name,
            extra=dict(message.extra),
        )
    ]
    chunks.extend(Message(role, piece) for piece in _pieces(message.content, pieces))
    for position, call in enumerate(message.tool_calls):
        index = call.index if call.index is not None else position
        chunks.append(
            Message(
                role,
                tool_calls=[ToolCall(call.id, FunctionCall(call.function.name), call.type, index)],
            )
        )
        for piece in _pieces(call.function.arguments, pieces):
            chunks.append(
                Message(
                    role, tool_calls=[ToolCall(function=FunctionCall(arguments=piece), index=index)]
                )
            )
    meta = message.response_meta
    if meta is not None:
        chunks[-1] = attrs.evolve(chunks[-1], response_meta=attrs.evolve(meta))
    return chunks

present(
    (
        ModelCall,
        ScriptedChatModel,
    ),
    "agentkit.models",
)

present(
    (
        split_message,
    ),
    "agentkit.models.scripted",
)
