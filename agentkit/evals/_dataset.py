"""A set of eval cases, :class:`Dataset`, and its file form (YAML or JSON).

A dataset file is a mapping with ``cases`` (and optionally ``name`` and ``checks`` for every
case), or just the list of cases::

    name: weather
    checks:
      - max_steps: 4
    cases:
      - name: paris
        input: What's the weather in Paris?
        checks:
          - tool_called: {name: get_weather, arguments: {city: Paris}}
          - contains: Paris
      - input: What is 2 + 2?
        expected: "4"
        metadata: {difficulty: easy}

A case is ``input`` (a text, or a list of ``{role, content}`` messages) with ``expected``,
``name``, ``metadata`` and ``checks``. A check is written as its name in snake case with its
argument, or a mapping of its arguments: ``equals``, ``contains``, ``matches``,
``tool_called``, ``max_steps``, ``max_tokens``, ``max_latency``, ``matches_schema``. Checks
that need Python objects (:class:`~agentkit.evals.Judge`, :class:`~agentkit.evals.OutputType`,
functions) are added in code: ``Dataset.from_file(path, checks=[Judge(...)])``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from agentkit.errors import AgentKitTypeError
from agentkit.evals._case import Case, Check
from agentkit.evals._checks import (
    Contains,
    Equals,
    Matches,
    MatchesSchema,
    MaxLatency,
    MaxSteps,
    MaxTokens,
    ToolCalled,
)
from agentkit.evals._errors import DatasetError

_CASE_KEYS = ("input", "expected", "name", "metadata", "checks")
_FILE_KEYS = ("name", "checks", "cases")


def _named(cases: Iterable[Case]) -> tuple[Case, ...]:
    """The cases, each with a name, the names unique."""
    named: list[Case] = []
    seen: dict[str, int] = {}
    for number, case in enumerate(cases, 1):
        if not isinstance(case, Case):
            raise AgentKitTypeError(f"a Dataset holds Case objects (item {number} is {case!r})")
        name = case.name or case.default_name(number)
        if name in seen:
            raise DatasetError(
                f"cases {seen[name]} and {number} are both named {name!r}; give them "
                "distinct names (Case(..., name=...)) so reports can tell them apart"
            )
        seen[name] = number
        named.append(case if case.name == name else attrs.evolve(case, name=name))
    return tuple(named)


def _shared_checks(value: Iterable[Check]) -> tuple[Check, ...]:
    checks = tuple(value)
    for check in checks:
        if not callable(check):
            raise AgentKitTypeError(f"a check is a function of a CaseRun (got {check!r})")
    return checks


@attrs.frozen
class Dataset:
    """Cases to evaluate an agent on; ``checks`` apply to every case.

    Every case gets a name unique in the dataset (see :class:`~agentkit.evals.Case`).

    Example::

        dataset = Dataset(
            [
                Case("What is 2 + 2?", expected="4"),
                Case("Capital of France?", checks=[Contains("Paris")]),
            ],
            name="basics",
            checks=[MaxSteps(2)],
        )

    Raises:
        DatasetError: two cases have the same name.
    """

    cases: tuple[Case, ...] = attrs.field(converter=_named)
    name: str | None = attrs.field(default=None, kw_only=True)
    checks: tuple[Check, ...] = attrs.field(default=(), converter=_shared_checks, kw_only=True)

    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[Case]:
        return iter(self.cases)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike[str], *, checks: Sequence[Check] = ()
    ) -> Dataset:
        """Load a dataset from a YAML (``.yaml``/``.yml``, needs PyYAML) or JSON file.

        ``checks`` are added to the checks the file gives every case (for checks made in
        Python, such as a :class:`~agentkit.evals.Judge`). The dataset's name defaults to
        the file's name. A file is read within bounds: at most 16 MiB, and YAML with at most
        1000 aliases, 50 levels of nesting and 1,000,000 values once its aliases are
        expanded (a YAML alias bomb of a few hundred bytes stands for billions).

        Raises:
            DatasetError: the file is not a dataset, or is past those bounds; the message
                names the case and the field.
            OSError: the file cannot be read.
        """
        where = Path(path)
        data = _read(where)
        if isinstance(data, list):
            data = {"cases": data}
        if not isinstance(data, dict):
            raise DatasetError(
                f"{where}: a dataset file holds a mapping with 'cases', or a list of cases"
            )
        _no_unknown(data, _FILE_KEYS, f"{where}")
        raw_cases = data.get("cases")
        if not isinstance(raw_cases, list) or not raw_cases:
            raise DatasetError(f"{where}: 'cases' must be a non-empty list of cases")
        shared = _parse_checks(data.get("checks"), f"{where}: checks")
        cases = [_parse_case(item, f"{where}: case {n}") for n, item in enumerate(raw_cases, 1)]
        name = data.get("name", where.stem)
        return cls(cases, name=None if name is None else str(name), checks=[*shared, *checks])


_MAX_FILE_CHARS = 16 * 1024 * 1024


def _read(path: Path) -> Any:
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise DatasetError(f"{path}: a dataset file ends in .yaml, .yml or .json")
    with path.open(encoding="utf-8") as file:
        text = file.read(_MAX_FILE_CHARS + 1)
    if len(text) > _MAX_FILE_CHARS:
        raise DatasetError(
            f"{path}: a dataset file holds at most {_MAX_FILE_CHARS:,} characters; split it"
        )
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError:
            raise DatasetError(
                f"{path}: YAML datasets need PyYAML: pip install 'agentkit[evals]' (or pyyaml)"
            ) from None
        from agentkit._yaml import YAMLBoundError, YAMLBounds, load_bounded

        bounds = YAMLBounds(
            max_chars=_MAX_FILE_CHARS, max_aliases=1000, max_depth=50, max_values=1_000_000
        )
        try:
            return load_bounded(text, bounds)
        except YAMLBoundError as error:
            raise DatasetError(f"{path}: the YAML {error}; a dataset holds cases") from None
        except yaml.YAMLError as error:
            raise DatasetError(f"{path}: not valid YAML: {error}") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as error:
        raise DatasetError(f"{path}: not valid JSON: {error}") from None


def _no_unknown(data: Mapping[str, Any], known: Sequence[str], where: str) -> None:
    unknown = [key for key in data if key not in known]
    if unknown:
        raise DatasetError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; known: {', '.join(known)}"
        )


def _parse_case(item: Any, where: str) -> Case:
    if isinstance(item, str):
        return Case(item)
    if not isinstance(item, dict):
        raise DatasetError(f"{where}: a case is a mapping with 'input' (or just the input text)")
    if "name" in item:
        where = f"{where} ({item['name']!r})"
    _no_unknown(item, _CASE_KEYS, where)
    if "input" not in item:
        raise DatasetError(f"{where}: 'input' is required")
    metadata = item.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise DatasetError(f"{where}: 'metadata' must be a mapping")
    name = item.get("name")
    try:
        return Case(
            item["input"],
            expected=item.get("expected"),
            checks=_parse_checks(item.get("checks"), f"{where}: checks"),
            name=None if name is None else str(name),
            metadata=metadata,
        )
    except (TypeError, ValueError, KeyError) as error:
        if isinstance(error, DatasetError):
            raise
        raise DatasetError(f"{where}: {error}") from None


def _tool_called(value: Any) -> ToolCalled:
    if isinstance(value, str):
        return ToolCalled(value)
    return ToolCalled(**value)


def _max_tokens(value: Any) -> MaxTokens:
    return MaxTokens(**value) if isinstance(value, dict) else MaxTokens(value)


def _text_check(cls: Callable[..., Check], key: str) -> Callable[[Any], Check]:
    def make(value: Any) -> Check:
        return cls(**value) if isinstance(value, dict) else cls(value)

    make.__name__ = key
    return make


_FILE_CHECKS: dict[str, Callable[[Any], Check]] = {
    "equals": Equals,
    "contains": _text_check(Contains, "contains"),
    "matches": _text_check(Matches, "matches"),
    "tool_called": _tool_called,
    "max_steps": MaxSteps,
    "max_tokens": _max_tokens,
    "max_latency": MaxLatency,
    "matches_schema": MatchesSchema,
}


def _parse_checks(value: Any, where: str) -> list[Check]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise DatasetError(f"{where}: a list of checks, such as [{{contains: Paris}}]")
    checks: list[Check] = []
    for number, item in enumerate(value, 1):
        if not isinstance(item, dict) or len(item) != 1:
            raise DatasetError(
                f"{where} {number}: a check is one key, its kind, with its argument "
                f"(such as {{contains: Paris}}); got {item!r}"
            )
        ((kind, argument),) = item.items()
        make = _FILE_CHECKS.get(kind)
        if make is None:
            raise DatasetError(
                f"{where} {number}: unknown check {kind!r}; known: {', '.join(_FILE_CHECKS)} "
                "(add others in Python: Dataset.from_file(path, checks=[...]))"
            )
        try:
            checks.append(make(argument))
        except (TypeError, ValueError) as error:
            raise DatasetError(f"{where} {number} ({kind}): {error}") from None
    return checks
