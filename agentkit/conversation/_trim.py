"""History trimming: what of a long conversation the next turn is given.

A trimmer is ``fn(history: list[Message]) -> list[Message]``, passed as
``with_conversation_id(id, trim=...)``. The stored conversation is never changed; only the
turn's input is. The trimmers here cut at turn boundaries (a turn starts at a user message),
so a tool call is never separated from its result.
"""

from __future__ import annotations

from collections.abc import Callable

from agentkit._lazy import present
from agentkit.errors import AgentKitValueError
from agentkit.schema import Message, Role, media_tokens

__all__ = [
    "HistoryTrimmer",
    "TokenCounter",
    "approximate_tokens",
    "keep_last_turns",
    "keep_within_tokens",
]

HistoryTrimmer = Callable[[list[Message]], list[Message]]
"""``trim(history) -> the part of it the next turn sees``."""

TokenCounter = Callable[[Message], int]
"""``count(message) -> tokens``, e.g. a tiktoken-based counter."""


def approximate_tokens(message: Message) -> int:
    """About four characters a token, plus a few per message (no tokenizer needed); images,
    files and sounds as :func:`~agentkit.schema.media_tokens` counts them (not their bytes)."""
    size = len(message.content)
    for call in message.tool_calls:
        size += len(call.function.name) + len(call.function.arguments)
    return size // 4 + 4 + (media_tokens(message) if message.parts else 0)


def _turn_starts(history: list[Message]) -> list[int]:
    starts = [index for index, message in enumerate(history) if message.role is Role.USER]
    if not starts or starts[0] != 0:
        starts.insert(0, 0)
    return starts


def keep_last_turns(turns: int) -> HistoryTrimmer:
    """Keep the last ``turns`` turns of the history (0 keeps nothing)."""
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 0:
        raise AgentKitValueError(f"turns must be an int >= 0 (got {turns!r})")

    def trim(history: list[Message]) -> list[Message]:
        if turns == 0:
            return []
        starts = _turn_starts(history)
        return list(history[starts[-turns] if turns <= len(starts) else 0 :])

    return trim


def keep_within_tokens(budget: int, counter: TokenCounter = approximate_tokens) -> HistoryTrimmer:
    """Drop the oldest turns until the history counts at most ``budget`` tokens.

    ``counter`` counts one message (default :func:`approximate_tokens`); pass a real
    tokenizer's count for exact budgets. System messages at the start are kept, and counted.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise AgentKitValueError(f"budget must be an int >= 0 (got {budget!r})")

    def trim(history: list[Message]) -> list[Message]:
        head = 0
        while head < len(history) and history[head].role is Role.SYSTEM:
            head += 1
        kept_head = history[:head]
        rest = history[head:]
        total = sum(counter(message) for message in history)
        starts = [*_turn_starts(rest), len(rest)]
        cut = 0
        for index in range(len(starts) - 1):
            if total <= budget:
                break
            total -= sum(counter(message) for message in rest[starts[index] : starts[index + 1]])
            cut = starts[index + 1]
        return kept_head + rest[cut:]

    return trim


# Defined here; documented and imported as agentkit.conversation.
present((approximate_tokens, keep_last_turns, keep_within_tokens), "agentkit.conversation")
