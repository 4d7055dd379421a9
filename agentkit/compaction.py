"""Context compaction: keep a long run's conversation within what the model can take.

Two middlewares (see :mod:`agentkit.middleware`), after Eino's ``summarization`` and
``reduction`` middlewares:

* :class:`SummarizationMiddleware` summarizes the older turns with a model once the
  conversation exceeds a token budget, and goes on with the summary plus the latest messages;
* :class:`ToolResultReductionMiddleware` cuts (or drops) large tool results once newer ones
  followed them.

Both rewrite the conversation in ``before_model``, so the change holds for the rest of the
run (the model never sees the long form again); the messages already delivered as events are
not touched. Tokens are counted by a pluggable ``counter``; the default,
:func:`approximate_tokens`, is a cheap characters-based estimate.

Example::

    agent = ChatModelAgent(
        "assistant", "helps", model, tools=[search],
        middlewares=[
            ToolResultReductionMiddleware(max_chars=2_000),
            SummarizationMiddleware(model, max_tokens=12_000),
        ],
    )
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from agentkit import _prompts_zh as zh
from agentkit._language import resolve
from agentkit.errors import AgentKitValueError
from agentkit.middleware import AgentMiddleware, ModelState
from agentkit.models.base import ChatModel
from agentkit.schema import (
    Message,
    Role,
    TextPart,
    media_tokens,
    system_message,
    user_message,
)

__all__ = [
    "SUMMARY_INSTRUCTION",
    "SummarizationMiddleware",
    "TokenCounter",
    "ToolResultReductionMiddleware",
    "approximate_tokens",
]

TokenCounter = Callable[[Sequence[Message]], int]
"""``counter(messages) -> tokens``: how many tokens the model would count for ``messages``."""

SUMMARY_INSTRUCTION = (
    "You summarize the earlier part of a conversation between a user and an AI assistant "
    "that uses tools, so that the assistant can go on without it. Keep every fact, decision, "
    "number, name, open question and the results of tool calls that still matter; drop "
    "chit-chat. Answer with the summary only."
)
"""What the summarizing model is told (``SummarizationMiddleware(instruction=...)``)."""

_SUMMARY_PREFIX = "Summary of the earlier conversation:\n"

_TEXTS = {
    "en": (SUMMARY_INSTRUCTION, _SUMMARY_PREFIX),
    "zh": (zh.SUMMARY_INSTRUCTION, zh.SUMMARY_PREFIX),
}


def approximate_tokens(messages: Sequence[Message]) -> int:
    """A cheap estimate: about four characters a token, plus a few tokens a message; images,
    files and sounds as :func:`~agentkit.schema.media_tokens` counts them (not their bytes)."""
    characters = 0
    media = 0
    for message in messages:
        characters += len(message.content)
        for call in message.tool_calls:
            characters += len(call.function.name) + len(call.function.arguments)
        if message.parts:
            media += media_tokens(message)
    return characters // 4 + 4 * len(messages) + media


class SummarizationMiddleware(AgentMiddleware):
    """Summarize older turns once the conversation exceeds ``max_tokens``.

    Before each model call, when ``counter(messages)`` is above ``max_tokens``, the messages
    after the leading system messages are split: the latest ``keep_last`` (or a few more, so
    that a tool result is never separated from the call that asked for it) stay as they are;
    the older ones are sent to ``model`` with ``instruction`` and replaced by one user message
    holding the summary. An earlier summary is part of what gets summarized again.

    Args:
        model: the model that writes summaries (often the agent's own, or a cheaper one).
        max_tokens: the budget that triggers a summary.
        keep_last: how many of the latest messages are always kept verbatim.
        counter: counts tokens (default :func:`approximate_tokens`).
        instruction: the summarizing model's system prompt (default: :data:`SUMMARY_INSTRUCTION`,
            or its Chinese text in Chinese).
        language: the language of the default instruction and of the summary's heading,
            ``"en"`` or ``"zh"`` (``None``: the process's, :func:`agentkit.language.set_language`).
    """

    def __init__(
        self,
        model: ChatModel,
        *,
        max_tokens: int,
        keep_last: int = 6,
        counter: TokenCounter = approximate_tokens,
        instruction: str | None = None,
        language: str | None = None,
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise AgentKitValueError(f"max_tokens must be a positive int (got {max_tokens!r})")
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
            raise AgentKitValueError(f"keep_last must be an int >= 0 (got {keep_last!r})")
        self.model = model
        self.max_tokens = max_tokens
        self.keep_last = keep_last
        self.counter = counter
        language = resolve(language)
        default, self._prefix = _TEXTS[language]
        self.instruction = default if instruction is None else instruction

    def before_model(self, state: ModelState) -> None:
        """Replace the older turns by their summary when the conversation is over budget."""
        messages = state.messages
        if self.counter(messages) <= self.max_tokens:
            return
        start = 0
        while start < len(messages) and messages[start].role is Role.SYSTEM:
            start += 1
        split = _keep_pairs(messages, max(start, len(messages) - self.keep_last))
        older = messages[start:split]
        if not older:
            return
        summary = self.model.generate(
            [system_message(self.instruction), user_message(_transcript(older))]
        )
        state.messages = [
            *messages[:start],
            user_message(self._prefix + summary.content.strip()),
            *messages[split:],
        ]


class ToolResultReductionMiddleware(AgentMiddleware):
    """Cut large tool results once newer tool results followed them.

    Before each model call, every tool result except the latest ``keep_last`` whose text is
    longer than ``max_chars`` is cut to ``max_chars`` characters with a note saying how long it
    was, or, with ``drop=True``, replaced by the note alone. The model keeps seeing that the
    call happened and what it was about.

    Args:
        max_chars: the longest older tool result kept whole.
        keep_last: how many of the latest tool results are never cut.
        drop: replace long older results by a note instead of cutting them.
    """

    def __init__(self, *, max_chars: int = 2_000, keep_last: int = 2, drop: bool = False) -> None:
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 0:
            raise AgentKitValueError(f"max_chars must be an int >= 0 (got {max_chars!r})")
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
            raise AgentKitValueError(f"keep_last must be an int >= 0 (got {keep_last!r})")
        self.max_chars = max_chars
        self.keep_last = keep_last
        self.drop = drop

    def before_model(self, state: ModelState) -> None:
        """Cut the long older tool results of the conversation."""
        results = [i for i, message in enumerate(state.messages) if message.role is Role.TOOL]
        older = results[: len(results) - self.keep_last] if self.keep_last else results
        changed = False
        messages = list(state.messages)
        for index in older:
            message = messages[index]
            length = len(message.content)
            if length <= self.max_chars:
                continue
            note = f"[tool result of {length:,} characters, cut to save context]"
            content = note if self.drop else f"{message.content[: self.max_chars]}\n{note}"
            if message.parts:  # the media stay, unless the whole result is dropped
                media = (
                    () if self.drop else tuple(p for p in message.parts if type(p) is not TextPart)
                )
                messages[index] = attrs.evolve(
                    message, content="", parts=(TextPart(content), *media)
                )
            else:
                messages[index] = attrs.evolve(message, content=content)
            changed = True
        if changed:
            state.messages = messages


def _keep_pairs(messages: Sequence[Message], split: int) -> int:
    """Move ``split`` back so that no tool result is kept without the call that asked for it."""
    while 0 < split < len(messages) and messages[split].role is Role.TOOL:
        split -= 1
    return split


def _transcript(messages: Sequence[Message]) -> str:
    lines = []
    for message in messages:
        if message.role is Role.TOOL:
            lines.append(f"[tool {message.tool_name} returned] {message.content}")
            continue
        text = message.content
        for call in message.tool_calls:
            text += f" [calls {call.function.name}({call.function.arguments})]"
        lines.append(f"[{message.role.value}] {text.strip()}")
    return "\n".join(lines)
