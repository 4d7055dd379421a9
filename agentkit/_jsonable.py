"""The Python values agentkit sends as JSON besides JSON's own: the one table of conversions.

Framework-internal. Tool results (:mod:`agentkit.tools.function`), schema defaults and the
JSON form of events (:meth:`~agentkit.AgentEvent.to_dict`, which the run log, SSE and Celery
readers get) all convert with :func:`jsonable`, so a value looks the same wherever it goes:

=======================================  ===============================================
value                                    JSON
=======================================  ===============================================
enum member                              its value
attrs instance, dataclass instance       object of its fields
pydantic model (v2)                      ``model.model_dump(mode="json")``
``datetime``, ``date``, ``time``         ISO 8601 string (``"2025-01-31T09:30:00+00:00"``)
``timedelta``                            ISO 8601 duration string (``"P1DT2H30M"``)
``Decimal``                              string of its exact digits (``"12.50"``)
``UUID``                                 string (``"0b6f...-..."``)
``pathlib`` path                         string (``"data/report.csv"``)
``set``, ``frozenset``, ``tuple``        array
=======================================  ===============================================

pydantic is never imported here: a pydantic model exists only once its program imported
pydantic, so the check looks for the module among those already loaded.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import enum
import json
import pathlib
import sys
import uuid
from typing import Any

import attrs

from agentkit.errors import AgentKitTypeError

__all__ = ["UNENCODABLE", "dumps", "jsonable", "pydantic_model_class", "unencodable_part"]

UNENCODABLE: Any = object()
"""What :func:`jsonable` returns for a value that has no JSON form."""


def pydantic_model_class() -> type | None:
    """``pydantic.BaseModel`` when the program imported pydantic (v2), else ``None``."""
    module = sys.modules.get("pydantic")
    model = getattr(module, "BaseModel", None) if module is not None else None
    # pydantic v1 has BaseModel too, but no model_dump: only v2 is supported.
    return model if isinstance(model, type) and hasattr(model, "model_dump") else None


def jsonable(value: Any) -> Any:
    """``value`` one level closer to JSON, or :data:`UNENCODABLE`.

    Containers come back with their items as they are (``json.dumps`` walks them and calls
    this again for each item it cannot encode): an attrs instance becomes the dict of its
    fields, a set a list. JSON's own types are not expected here.
    """
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (datetime.date, datetime.time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return _iso_duration(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (uuid.UUID, pathlib.PurePath)):
        return str(value)
    if isinstance(value, (set, frozenset)):
        return list(value)
    if attrs.has(type(value)):
        return attrs.asdict(value, recurse=False)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    model = pydantic_model_class()
    if model is not None and isinstance(value, model):
        return value.model_dump(mode="json")  # type: ignore[attr-defined]
    return UNENCODABLE


def _default(value: Any) -> Any:
    converted = jsonable(value)
    if converted is UNENCODABLE:
        raise AgentKitTypeError(f"Object of type {type(value).__name__} is not JSON serializable")
    return converted


def dumps(value: Any, **options: Any) -> str:
    """``json.dumps`` that also encodes the values of the table above.

    Raises:
        TypeError: a part of ``value`` has no JSON form (:func:`unencodable_part` finds it).
        ValueError: ``value`` contains itself.
    """
    return json.dumps(value, default=_default, **options)


def unencodable_part(value: Any, name: str = "result") -> str | None:
    """What in ``value`` (called ``name``) has no JSON form, in words; ``None`` if nothing.

    The first such part is named as Python would index it from ``value``, with its type:
    ``"result['when'][2] is of type Clock"``, ``"result.slot has a key of type tuple: (1, 2)"``.
    """
    return _find(value, name, set())


_SCALARS = (str, int, float, bool, type(None))


def _find(value: Any, where: str, seen: set[int]) -> str | None:
    if isinstance(value, _SCALARS):
        return None
    if id(value) in seen:  # a cycle: json.dumps reports it as such
        return None
    seen = seen | {id(value)}
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, _SCALARS):  # JSON keys: what json.dumps takes (no enums)
                return f"{where} has a key of type {type(key).__qualname__}: {key!r}"
            found = _find(item, f"{where}[{key!r}]", seen)
            if found is not None:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _find(item, f"{where}[{index}]", seen)
            if found is not None:
                return found
        return None
    converted = jsonable(value)
    if converted is UNENCODABLE:
        return f"{where} is of type {type(value).__qualname__}"
    if isinstance(converted, dict):  # the fields of a record: named as attributes
        for key, item in converted.items():
            found = _find(item, f"{where}.{key}", seen)
            if found is not None:
                return found
        return None
    return _find(converted, where, seen)


def _iso_duration(delta: datetime.timedelta) -> str:
    """``delta`` as an ISO 8601 duration, as pydantic writes it (``"-P1DT2H"`` when negative)."""
    sign = "-" if delta < datetime.timedelta(0) else ""
    delta = abs(delta)
    days = delta.days
    minutes, seconds = divmod(delta.seconds, 60)
    hours, minutes = divmod(minutes, 60)
    text = f"{sign}P{days}D" if days else f"{sign}P"
    clock = ""
    if hours:
        clock += f"{hours}H"
    if minutes:
        clock += f"{minutes}M"
    if seconds or delta.microseconds:
        fraction = f"{seconds}.{delta.microseconds:06d}".rstrip("0").rstrip(".")
        clock += f"{fraction}S"
    if clock:
        text += f"T{clock}"
    elif not days:
        text += "T0S"
    return text
