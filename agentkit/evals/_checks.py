"""The built-in checks: answers (:class:`Equals`, :class:`Contains`, :class:`Matches`), typed
output (:class:`OutputType`, :class:`MatchesSchema`), tools (:class:`ToolCalled`) and budgets
(:class:`MaxSteps`, :class:`MaxTokens`, :class:`MaxLatency`, :class:`MaxCost`).

A check is called with a :class:`~agentkit.evals.CaseRun` and returns ``None`` when the case
passes it, or the reason it fails, which starts with the check itself
(``Contains('Paris'): ...``) so a report line says which check failed and why.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import attrs

from agentkit._jsonable import dumps as json_dumps
from agentkit._limits import ModelPricing
from agentkit.errors import AgentKitTypeError, AgentKitValueError, MissingDependencyError
from agentkit.evals._case import CaseRun
from agentkit.tools._base import ToolCallInfo
from agentkit.tools._convert import explain, get_converter
from agentkit.tools._schema import type_name

_SHOWN = 120


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _json_data(value: Any) -> Any:
    """``value`` as plain JSON data (attrs classes, dataclasses and enums included)."""
    return json.loads(json_dumps(value))


def _strip_fence(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```"):
        body = stripped[3:-3]
        newline = body.find("\n")
        return body[newline + 1 :] if newline >= 0 else body
    return stripped


def _answer_json(run: CaseRun) -> tuple[Any, str | None]:
    """The answer as JSON data: the structured output, or the text parsed (code fences allowed)."""
    if run.result.output is not None:
        return _json_data(run.result.output), None
    try:
        return json.loads(_strip_fence(run.text)), None
    except ValueError as error:
        return None, f"the answer is not JSON ({error}): {_show(run.text)}"


def _check_repr(check: Any) -> str:
    """``Name(positional, keyword=value)``, keywords shown only when not at their default."""
    parts: list[str] = []
    for field in attrs.fields(type(check)):
        if not field.init or not field.repr:
            continue
        value = getattr(check, field.name)
        if field.kw_only:
            if value != field.default:
                parts.append(f"{field.name}={value!r}")
        elif value is not None or field.default is not None:
            parts.append(repr(value))
    return f"{type(check).__name__}({', '.join(parts)})"


class _Shown:
    """Gives a check the repr users write it with, which starts its failure reasons."""

    __slots__ = ()

    def __repr__(self) -> str:
        return _check_repr(self)


class _Expected:
    """The default of :class:`Equals`: compare with the case's ``expected``."""

    def __repr__(self) -> str:
        return "<the case's expected value>"


_EXPECTED: Any = _Expected()


@attrs.frozen(repr=False)
class Equals:
    """The answer equals ``value`` (by default the case's ``expected``).

    The answer is the structured output when the agent has an ``output_type``, else the
    final text, compared exactly. A structured output compared with a dict or list (as
    written in a dataset file) is compared as JSON data.
    """

    value: Any = _EXPECTED

    def __call__(self, run: CaseRun) -> str | None:
        wanted = run.case.expected if self.value is _EXPECTED else self.value
        got = run.output
        if got == wanted:
            return None
        structured = not isinstance(got, (dict, list, str))
        if isinstance(wanted, (dict, list)) and structured and _json_data(got) == wanted:
            return None
        return f"{self!r}: the answer is {_show(got)}, expected {_show(wanted)}"

    def __repr__(self) -> str:
        return "Equals()" if self.value is _EXPECTED else f"Equals({self.value!r})"


@attrs.frozen(repr=False)
class Contains(_Shown):
    """The answer's text contains ``text`` (``case_sensitive=False`` ignores case)."""

    text: str = attrs.field()
    case_sensitive: bool = attrs.field(default=True, kw_only=True)

    @text.validator
    def _check_text(self, _: attrs.Attribute[Any], value: str) -> None:
        if not isinstance(value, str):
            raise AgentKitTypeError(f"Contains() takes a str (got {value!r})")

    def __call__(self, run: CaseRun) -> str | None:
        answer = run.text
        found = (
            self.text in answer
            if self.case_sensitive
            else self.text.casefold() in answer.casefold()
        )
        if found:
            return None
        return f"{self!r}: the answer does not contain it: {_show(answer)}"


@attrs.frozen(repr=False)
class Matches(_Shown):
    """The answer's text matches the regular expression ``pattern`` (``re.search``).

    Raises:
        ValueError: (when made) ``pattern`` is not a valid regular expression.
    """

    pattern: str
    flags: int = attrs.field(default=0, kw_only=True)
    _compiled: re.Pattern[str] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        try:
            compiled = re.compile(self.pattern, self.flags)
        except re.error as error:
            raise AgentKitValueError(
                f"Matches({self.pattern!r}): not a valid regex: {error}"
            ) from None
        object.__setattr__(self, "_compiled", compiled)

    def __call__(self, run: CaseRun) -> str | None:
        if self._compiled.search(run.text):
            return None
        return f"{self!r}: the answer does not match: {_show(run.text)}"


def _arguments_match(wanted: Any, got: Any) -> bool:
    """``got`` has what ``wanted`` asks for: mappings by subset, patterns by search."""
    if isinstance(wanted, re.Pattern):
        text = got if isinstance(got, str) else json.dumps(got, default=repr)
        return wanted.search(text) is not None
    if isinstance(wanted, Mapping):
        return isinstance(got, Mapping) and all(
            key in got and _arguments_match(value, got[key]) for key, value in wanted.items()
        )
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(got, (list, tuple))
            and len(wanted) == len(got)
            and all(_arguments_match(w, g) for w, g in zip(wanted, got, strict=True))
        )
    return bool(wanted == got)


def _arguments(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if value is None else dict(value)


@attrs.frozen(repr=False)
class ToolCalled(_Shown):
    """The model called the tool ``name`` (sub-agents' calls included).

    ``arguments``, when given, must be found in a call's arguments: each key with an equal
    value (nested mappings compared the same way, so ``{"city": "Paris"}`` matches a call
    with more arguments), or a value that is a compiled regex searched in the argument (its
    JSON text when it is not a string: ``{"city": re.compile("^Par"), "days":
    re.compile("^[1-3]$")}``). ``times``, when given, is the exact number of
    matching calls (``times=0``: the tool was not called so).
    """

    name: str
    arguments: dict[str, Any] | None = attrs.field(default=None, converter=_arguments)
    times: int | None = attrs.field(default=None, kw_only=True)

    @times.validator
    def _check_times(self, _: attrs.Attribute[Any], value: int | None) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise AgentKitValueError(f"ToolCalled(times=...) must be an int >= 0 (got {value!r})")

    def _matches(self, call: ToolCallInfo) -> bool:
        if call.name != self.name:
            return False
        return self.arguments is None or _arguments_match(self.arguments, call.arguments)

    def __call__(self, run: CaseRun) -> str | None:
        matching = [call for call in run.tool_calls if self._matches(call)]
        if self.times is not None:
            if len(matching) == self.times:
                return None
            count = len(matching)
            return f"{self!r}: {count} matching call(s), expected {self.times}{self._seen(run)}"
        if matching:
            return None
        return f"{self!r}: no matching call{self._seen(run)}"

    def _seen(self, run: CaseRun) -> str:
        same = [call.arguments for call in run.tool_calls if call.name == self.name]
        if same:
            return f"; {self.name} was called with {', '.join(_show(a) for a in same)}"
        names = sorted(set(run.tool_names))
        return f"; the model called {', '.join(names)}" if names else "; the model called no tool"


def _positive(kind: str) -> Any:
    def check(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise AgentKitValueError(
                f"{type(instance).__name__}({attribute.name}=...) must be a {kind} >= 0 "
                f"(got {value!r})"
            )

    return check


@attrs.frozen(repr=False)
class MaxSteps(_Shown):
    """The run made at most ``n`` model calls (its steps; sub-agents' calls included)."""

    n: int = attrs.field(validator=_positive("number"))

    def __call__(self, run: CaseRun) -> str | None:
        if run.model_calls <= self.n:
            return None
        calls = "model call" if run.model_calls == 1 else "model calls"
        return f"{self!r}: the run made {run.model_calls} {calls}"


@attrs.frozen(repr=False)
class MaxTokens(_Shown):
    """The run used at most ``total`` tokens (and at most ``input``/``output`` tokens).

    Counts come from the model's usage reports (``RunResult.usage``), all the run's calls
    together.

    Raises:
        ValueError: (when made) no limit given, or a negative one.
    """

    total: int | None = attrs.field(default=None, validator=_positive("number"))
    input: int | None = attrs.field(default=None, kw_only=True, validator=_positive("number"))
    output: int | None = attrs.field(default=None, kw_only=True, validator=_positive("number"))

    def __attrs_post_init__(self) -> None:
        if self.total is None and self.input is None and self.output is None:
            raise AgentKitValueError("MaxTokens() needs a limit: total, input= or output=")

    def __call__(self, run: CaseRun) -> str | None:
        usage = run.usage
        over = [
            f"{name} {used} > {limit}"
            for name, used, limit in (
                ("total", usage.total_tokens, self.total),
                ("input", usage.prompt_tokens, self.input),
                ("output", usage.completion_tokens, self.output),
            )
            if limit is not None and used > limit
        ]
        return f"{self!r}: {', '.join(over)} tokens" if over else None


@attrs.frozen(repr=False)
class MaxLatency(_Shown):
    """The run took at most ``seconds`` of wall time."""

    seconds: float = attrs.field(validator=_positive("number of seconds"))

    def __call__(self, run: CaseRun) -> str | None:
        if run.duration <= self.seconds:
            return None
        return f"{self!r}: the run took {run.duration:.2f} s"


def _pricing(value: ModelPricing | None) -> ModelPricing | None:
    if value is not None and not isinstance(value, ModelPricing):
        raise AgentKitTypeError(f"MaxCost(pricing=...) takes a ModelPricing (got {value!r})")
    return value


@attrs.frozen(repr=False)
class MaxCost(_Shown):
    """The run cost at most ``amount``.

    The cost is the run's own (``RunResult.cost``: what its models priced with
    ``pricing=ModelPricing(...)`` reported), or, with ``pricing``, the run's token usage at
    those prices (for models that have no pricing, such as replayed or scripted ones).
    A run whose cost is unknown fails the check, saying how to price it.
    """

    amount: float = attrs.field(validator=_positive("number"))
    pricing: ModelPricing | None = attrs.field(default=None, kw_only=True, converter=_pricing)

    def cost(self, run: CaseRun) -> float | None:
        """The cost of ``run``: at ``pricing`` when given, else the run's own (or ``None``)."""
        if self.pricing is not None:
            return self.pricing.cost(run.usage)
        return run.result.cost

    def __call__(self, run: CaseRun) -> str | None:
        cost = self.cost(run)
        if cost is None:
            return (
                f"{self!r}: the run's cost is unknown (no model had pricing); give the model "
                "pricing=ModelPricing(...), or give MaxCost(pricing=...)"
            )
        if cost <= self.amount:
            return None
        return f"{self!r}: the run cost {cost:.6g}"


@attrs.frozen(repr=False)
class OutputType:
    """The answer is a ``type`` value: the structured output converted back and forth, or the
    answer text parsed as JSON into it (for agents without ``output_type``).

    ``type`` is what ``ChatModelAgent(output_type=...)`` takes: an attrs class, a dataclass,
    a TypedDict, an Enum, or ``list[...]``/``dict[str, ...]`` of those, or a plain type.
    """

    type: Any

    def __call__(self, run: CaseRun) -> str | None:
        data, problem = _answer_json(run)
        if problem is not None:
            return f"{self!r}: {problem}"
        try:
            get_converter(True).get_structure_hook(self.type)(data, self.type)
        except Exception as error:
            problems: list[str] = []
            explain(error, [("attr", "answer")], {"answer": data}, problems)
            return f"{self!r}: {'; '.join(problems) or error}"
        return None

    def __repr__(self) -> str:
        return f"OutputType({type_name(self.type)})"


def _schema_copy(value: Mapping[str, Any]) -> dict[str, Any]:
    return dict(value)


@attrs.frozen(repr=False)
class MatchesSchema:
    """The answer, as JSON (the structured output, or the text parsed), is valid against the
    JSON Schema ``schema``. Needs ``jsonschema`` (``pip install 'agentkit[evals]'``).

    Raises:
        ImportError: (when made) jsonschema is not installed.
        ValueError: (when made) ``schema`` is not a valid JSON Schema.
    """

    schema: dict[str, Any] = attrs.field(converter=_schema_copy)
    _validator: Any = attrs.field(init=False, eq=False)

    def __attrs_post_init__(self) -> None:
        try:
            import jsonschema
        except ImportError:
            raise MissingDependencyError(
                "MatchesSchema needs jsonschema: pip install 'agentkit[evals]' (or jsonschema)"
            ) from None
        cls = jsonschema.validators.validator_for(self.schema)
        try:
            cls.check_schema(self.schema)
        except jsonschema.SchemaError as error:
            raise AgentKitValueError(
                f"MatchesSchema: not a valid JSON Schema: {error.message}"
            ) from None
        object.__setattr__(self, "_validator", cls(self.schema))

    def __call__(self, run: CaseRun) -> str | None:
        data, problem = _answer_json(run)
        if problem is not None:
            return f"{self!r}: {problem}"
        errors = sorted(self._validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        if not errors:
            return None
        shown = [
            f"{'/'.join(map(str, error.absolute_path)) or '(the answer)'}: {error.message}"
            for error in errors[:3]
        ]
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        return f"{self!r}: {'; '.join(shown)}{more}"

    def __repr__(self) -> str:
        title = self.schema.get("title")
        return f"MatchesSchema({title!r})" if title else "MatchesSchema(...)"
