"""Explaining a failed argument conversion in words a model can act on.

Framework-internal: :func:`explain` walks the tree of ``cattrs`` validation errors (and the
:class:`~agentkit.tools._scalar_hooks.Invalid` errors of agentkit's own hooks, and the
``ValidationError`` of pydantic models) and writes one message per wrong argument, naming
where it is (``'trip.days[2]'``) and what was expected.
"""

from __future__ import annotations

import json
from typing import Any

from agentkit.tools._pydantic import problems as pydantic_problems
from agentkit.tools._scalar_hooks import MISSING, Invalid, show

__all__ = ["explain"]

_Segment = tuple[str, Any]  # ("attr", name) | ("key", dict key) | ("index", position)


def explain(exc: BaseException, path: list[_Segment], data: Any, problems: list[str]) -> None:
    """Turn a structuring error (a tree of cattrs validation errors) into messages for the model."""
    where = _format_path(path)
    if isinstance(exc, Invalid):
        problems.append(f"'{where}' must be {exc.expected} (got {show(exc.value)})")
        return
    found = pydantic_problems(exc)
    if found is not None:  # a pydantic model's own validation
        for problem in found:
            segments: list[_Segment] = [
                ("index", key) if isinstance(key, int) else ("attr", key)
                for key in problem.location
            ]
            place = _format_path([*path, *segments])
            problems.append(f"'{place}' {problem.text} (got {show(problem.value)})")
        return
    from cattrs.errors import AttributeValidationNote, BaseValidationError, IterableValidationNote

    if isinstance(exc, BaseValidationError):
        for sub in exc.exceptions:
            segment: _Segment | None = None
            for note in getattr(sub, "__notes__", ()):
                if isinstance(note, AttributeValidationNote):
                    segment = ("attr", note.name)
                elif isinstance(note, IterableValidationNote):
                    segment = ("key" if isinstance(note.index, str) else "index", note.index)
            explain(sub, path if segment is None else [*path, segment], data, problems)
    elif isinstance(exc, KeyError) and _is_missing(data, path):
        problems.append(f"'{where}' is required (got {show(_lookup(data, path[:-1]))})")
    else:
        problems.append(f"'{where}' is not valid: {str(exc) or type(exc).__name__}")


def _format_path(path: list[_Segment]) -> str:
    text = ""
    for kind, key in path:
        if kind == "index":
            text += f"[{key}]"
        elif kind == "key":
            text += f"[{json.dumps(key, ensure_ascii=False)}]"
        else:
            text += f".{key}" if text else str(key)
    return text


def _lookup(data: Any, path: list[_Segment]) -> Any:
    for kind, key in path:
        found = (
            type(data) is list and 0 <= key < len(data)
            if kind == "index"
            else type(data) is dict and key in data
        )
        if not found:
            return MISSING
        data = data[key]
    return data


def _is_missing(data: Any, path: list[_Segment]) -> bool:
    if not path or path[-1][0] != "attr":
        return False
    parent = _lookup(data, path[:-1])
    return type(parent) is dict and path[-1][1] not in parent
