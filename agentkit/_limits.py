"""Run limits and model pricing: :class:`RunLimits`, :class:`LimitReached`, :class:`ModelPricing`.

The definitions behind :mod:`agentkit.limits`, whose docstring documents them.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from agentkit._lazy import present
from agentkit._persist import persisted
from agentkit.errors import AgentKitTypeError, AgentKitValueError
from agentkit.schema import TokenUsage

__all__ = ["LIMIT_NAMES", "LimitReached", "ModelPricing", "RunLimits"]

LIMIT_NAMES = (
    "model_calls",
    "tool_calls",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cost",
    "wall_time",
)
"""The names of the limits, in the order they are checked (and reported)."""

_COUNTS = frozenset({"model_calls", "tool_calls", "input_tokens", "output_tokens", "total_tokens"})


def _count(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise AgentKitTypeError(
            f"RunLimits({attribute.name}=...) takes a whole number or None (got "
            f"{type(value).__name__} {value!r})"
        )
    if value < 1:
        raise AgentKitValueError(
            f"RunLimits({attribute.name}={value!r}): a limit must be at least 1; to run "
            f"without a {attribute.name} limit, leave it out (None)"
        )


def _amount(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AgentKitTypeError(
            f"RunLimits({attribute.name}=...) takes a number or None (got "
            f"{type(value).__name__} {value!r})"
        )
    if math.isnan(value) or value <= 0:
        raise AgentKitValueError(
            f"RunLimits({attribute.name}={value!r}): a limit must be a number above 0; to run "
            f"without a {attribute.name} limit, leave it out (None)"
        )


@persisted("agentkit.RunLimits")
@attrs.frozen(repr=False)
class RunLimits:
    """What one run may use, counted over the whole run and across its resumes.

    Every field is optional (``None``: no limit of that kind), but at least one must be set.

    Args:
        model_calls: the most model calls (retried calls count, as do the model calls of
            agents used as tools and of parallel branches; a call a crash cut short is counted
            when the resumed run makes it again, not also before).
        tool_calls: the most tool calls that run (a call a guardrail blocks, or a call of a
            tool that does not exist, runs nothing and is not counted). A call counts once:
            one that stops to ask (an approval, an :class:`~agentkit.UnfinishedToolCall`
            after a crash) or that a crash or cancel cuts short is counted when it runs after
            the resume; one rejected, or answered with a result instead, is not counted.
        input_tokens: the most prompt tokens, as the model server reports them.
        output_tokens: the most completion tokens.
        total_tokens: the most tokens in all.
        cost: the most the run's model calls may cost, in the unit of the models'
            :class:`ModelPricing` (calls of a model without pricing cost nothing here).
        wall_time: the most seconds the run may run, summed over its resumes (the time a
            paused run waits for its resume does not count).

    A limit is reached once the amount used is at least the allowance: a run with
    ``model_calls=3`` makes three model calls and stops before the fourth. Model and tool
    call limits are exact, also with parallel calls (a call is counted before it starts).
    Token, cost and time limits are checked before each model and tool call against what
    finished calls used. A model call also reserves what it is expected to use of the token
    and cost limits before it starts (from its request, its ``max_tokens`` and the model's
    :class:`ModelPricing`, and never less than the largest call of its agent so far); a call
    that does not fit beside the calls already running waits for one of them to end, and goes
    alone when none is left. Parallel calls (branches, agents used as tools) so pass a budget
    by at most one call (and what calls use beyond their estimates), not by one call each. A
    limit never cuts a call short: give models a ``timeout`` and tools a time limit for that.

    Model and tool calls are counted only in runs with limits; tokens and cost always are. A
    run started without limits and resumed with some counts its calls from the resume.

    Example::

        runner = Runner(agent, checkpoint_store=store, limits=RunLimits(cost=0.50))
        result = runner.invoke("Plan the trip", with_checkpoint_id("trip-1"))
        if result.interrupted:  # the budget ran out: approve more, here or in another process
            runner.resume("trip-1", with_limits(RunLimits(cost=2.00))).result()

    Raises:
        ValueError: a limit is zero or negative, or none is set.
        TypeError: a limit is not a number.
    """

    model_calls: int | None = attrs.field(default=None, validator=_count)
    tool_calls: int | None = attrs.field(default=None, validator=_count)
    input_tokens: int | None = attrs.field(default=None, validator=_count)
    output_tokens: int | None = attrs.field(default=None, validator=_count)
    total_tokens: int | None = attrs.field(default=None, validator=_count)
    cost: float | None = attrs.field(default=None, validator=_amount)
    wall_time: float | None = attrs.field(default=None, validator=_amount)

    def __attrs_post_init__(self) -> None:
        if all(getattr(self, name) is None for name in LIMIT_NAMES):
            raise AgentKitValueError(
                f"RunLimits() sets no limit; give at least one of {', '.join(LIMIT_NAMES)} "
                "(a run without limits needs no RunLimits: with_limits(None) runs without any)"
            )

    def set_limits(self) -> list[tuple[str, float]]:
        """The limits that are set, as ``(name, allowance)`` pairs in checking order."""
        found: list[tuple[str, float]] = []
        for name in LIMIT_NAMES:
            value = getattr(self, name)
            if value is not None:
                found.append((name, value))
        return found

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self.set_limits())
        return f"RunLimits({shown})"


@persisted("agentkit.LimitReached")
@attrs.frozen
class LimitReached:
    """The info of the interrupt of a run that reached one of its :class:`RunLimits`.

    The run paused before its next model or tool call; resume it with a larger limit
    (``runner.resume(checkpoint_id, with_limits(RunLimits(...)))``) to go on. Found as the
    ``info`` of an :class:`~agentkit.InterruptContext` of ``RunResult.interrupt``.

    Attributes:
        limit: which limit: ``"model_calls"``, ``"tool_calls"``, ``"input_tokens"``,
            ``"output_tokens"``, ``"total_tokens"``, ``"cost"`` or ``"wall_time"``.
        used: how much the run used so far (over its resumes too).
        allowed: the allowance that was reached.
    """

    limit: str
    used: float
    allowed: float

    def __str__(self) -> str:
        used = _amount_text(self.limit, self.used)
        allowed = _amount_text(self.limit, self.allowed)
        return f"the run reached its {_describe(self.limit)} limit: {used} used of {allowed}"


def _describe(limit: str) -> str:
    """The words for a limit's name: ``"model_calls"`` -> ``"model calls"``."""
    return "run time" if limit == "wall_time" else limit.replace("_", " ")


def _counted(limit: str, value: float) -> str:
    """An amount of ``limit`` with its unit: ``"1 tool call"``, ``"2 tool calls"``, ``"1.2 s"``."""
    text = _amount_text(limit, value)
    if limit not in _COUNTS:
        return text  # seconds carry their unit, a cost has none
    unit = _describe(limit)
    return f"{text} {unit[:-1] if int(value) == 1 else unit}"


def _amount_text(limit: str, value: float) -> str:
    """An amount of ``limit`` as text: counts as integers, cost and seconds as decimals."""
    if limit in _COUNTS:
        return f"{int(value):,}"
    if limit == "wall_time":
        return f"{value:.3g} s"
    return f"{value:.6g}"


def _price(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is None and attribute.name in ("cached_input_per_million", "cache_write_per_million"):
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AgentKitTypeError(
            f"ModelPricing({attribute.name}=...) takes a number, the price of a million tokens "
            f"(got {type(value).__name__} {value!r})"
        )
    if not math.isfinite(value) or value < 0:
        raise AgentKitValueError(
            f"ModelPricing({attribute.name}={value!r}): a price must be a finite number >= 0"
        )


@attrs.frozen
class ModelPricing:
    """What a model's tokens cost: prices per million tokens, in the currency you choose.

    Give it to a model (``OpenAIChatModel("gpt-4o-mini", pricing=ModelPricing(0.15, 0.60))``,
    ``ScriptedChatModel(script, pricing=...)``): the model sets ``response_meta.cost`` on every
    reply that reports its token usage, the run sums it into ``RunResult.cost`` (and counts it
    against ``RunLimits(cost=...)``), and callbacks and tracing see it. A model of your own
    does the same with :meth:`cost`:
    ``ResponseMeta(usage=usage, cost=pricing.cost(usage))``.

    Args:
        input_per_million: the price of a million prompt tokens.
        output_per_million: the price of a million completion tokens.
        cached_input_per_million: the price of a million prompt tokens served from the
            provider's prompt cache (``TokenUsage.cached_tokens``); ``None``: priced as other
            prompt tokens.
        cache_write_per_million: the price of a million prompt tokens written to the
            provider's prompt cache (``TokenUsage.cache_write_tokens``; Anthropic charges
            1.25 times the input price for a five-minute cache); ``None``: priced as other
            prompt tokens.

    Raises:
        ValueError: a price is negative or not finite.
        TypeError: a price is not a number.
    """

    input_per_million: float = attrs.field(validator=_price)
    output_per_million: float = attrs.field(validator=_price)
    cached_input_per_million: float | None = attrs.field(default=None, validator=_price)
    cache_write_per_million: float | None = attrs.field(default=None, validator=_price)

    def cost(self, usage: TokenUsage) -> float:
        """The cost of ``usage``: prompt tokens (plain, read from and written to the cache)
        and completion tokens at their prices."""
        cached = min(max(usage.cached_tokens, 0), usage.prompt_tokens)
        written = min(max(usage.cache_write_tokens, 0), usage.prompt_tokens - cached)
        cached_price = self.cached_input_per_million
        if cached_price is None:
            cached_price = self.input_per_million
        write_price = self.cache_write_per_million
        if write_price is None:
            write_price = self.input_per_million
        total = (
            (usage.prompt_tokens - cached - written) * self.input_per_million
            + cached * cached_price
            + written * write_price
            + usage.completion_tokens * self.output_per_million
        )
        return total / 1_000_000

present(
    (
        LimitReached,
        ModelPricing,
        RunLimits,
    ),
    "agentkit",
)
