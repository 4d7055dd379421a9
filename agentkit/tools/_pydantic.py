"""Pydantic v2 models as tool parameters, tool results and structured output.

Framework-internal. pydantic is optional and never imported here: a class can only be a
pydantic model once its program imported pydantic, so every check looks for the module
among those already loaded (``sys.modules``). A program that brings no pydantic model never
loads pydantic through agentkit.

A model keeps pydantic's own rules: its JSON Schema is ``model_json_schema()`` (with the
``$defs`` of nested models written in place, because a tool's parameters are one
self-contained schema), and a JSON object becomes an instance with ``model_validate`` (lax or
strict as the model's ``model_config`` says). Validation errors are reworded for the model in
the style of every other argument error (:func:`problems`).
"""

from __future__ import annotations

import copy
import sys
from typing import Any, NamedTuple

from agentkit._jsonable import pydantic_model_class
from agentkit.errors import AgentKitValueError

__all__ = [
    "PydanticProblem",
    "is_pydantic_model",
    "is_pydantic_v1_model",
    "model_field_names",
    "model_schema",
    "problems",
]


def is_pydantic_model(tp: Any) -> bool:
    """Whether ``tp`` is a pydantic (v2) model class."""
    model = pydantic_model_class()
    return model is not None and isinstance(tp, type) and issubclass(tp, model)


def is_pydantic_v1_model(tp: Any) -> bool:
    """Whether ``tp`` is a model class of pydantic v1 (``pydantic.v1.BaseModel``)."""
    for name in ("pydantic.v1", "pydantic"):
        module = sys.modules.get(name)
        model = getattr(module, "BaseModel", None) if module is not None else None
        if (
            isinstance(model, type)
            and not hasattr(model, "model_dump")
            and isinstance(tp, type)
            and issubclass(tp, model)
        ):
            return True
    return False


def model_field_names(tp: Any) -> list[str]:
    """The names a JSON object gives the fields of model class ``tp`` (aliases when set)."""
    return [field.alias or name for name, field in tp.model_fields.items()]


def model_schema(tp: type) -> dict[str, Any]:
    """The JSON Schema of model class ``tp``, self-contained (no ``$ref``, no ``$defs``).

    Raises:
        ValueError: pydantic cannot make a schema of it, or it refers to itself (the
            message says which).
    """
    try:
        schema: dict[str, Any] = tp.model_json_schema()  # type: ignore[attr-defined]
    except Exception as error:
        raise AgentKitValueError(
            f"pydantic cannot make a JSON schema of {tp.__qualname__} "
            f"({type(error).__name__}: {error})"
        ) from None
    definitions = schema.pop("$defs", {})
    if "$ref" in schema:  # the model itself is among the definitions: it is recursive
        name = schema["$ref"].removeprefix("#/$defs/")
        raise AgentKitValueError(
            f"{tp.__qualname__} refers to itself (through {name}); recursive models have no "
            "self-contained JSON schema"
        )
    return _inline(schema, definitions, (tp.__qualname__,))  # type: ignore[no-any-return]


def _inline(node: Any, definitions: dict[str, Any], stack: tuple[str, ...]) -> Any:
    """``node`` with every ``{"$ref": "#/$defs/X"}`` replaced by a copy of X."""
    if isinstance(node, list):
        return [_inline(item, definitions, stack) for item in node]
    if not isinstance(node, dict):
        return node
    reference = node.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/$defs/"):
        name = reference.removeprefix("#/$defs/")
        if name in stack[1:] or name not in definitions:
            raise AgentKitValueError(
                f"{stack[0]} refers to itself (through {name}); recursive models have no "
                "self-contained JSON schema"
            )
        target = _inline(copy.deepcopy(definitions[name]), definitions, (*stack, name))
        siblings = {key: value for key, value in node.items() if key != "$ref"}
        return {**target, **_inline(siblings, definitions, stack)}
    return {key: _inline(value, definitions, stack) for key, value in node.items()}


class PydanticProblem(NamedTuple):
    """One error of a pydantic validation, in agentkit's words."""

    location: tuple[str | int, ...]
    """Where, from the validated value: field names (str) and list positions (int)."""
    missing: bool
    """A required field was not given (``value`` is then the object it is missing from)."""
    text: str
    """What is wrong: ``"must be an integer"``, ``"is not valid: n must be positive"``."""
    value: Any
    """The value that is wrong."""


# pydantic error types and what a value of them must be, in the words of agentkit's hooks.
_EXPECTED = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "a boolean",
    "bool_parsing": "a boolean",
    "none_required": "null",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dict_type": "an object",
    "dataclass_type": "an object",
    "list_type": "an array",
    "tuple_type": "an array",
    "set_type": "an array",
    "frozen_set_type": "an array",
}
_PREFIXES = ("Value error, ", "Assertion failed, ")


def problems(error: BaseException) -> list[PydanticProblem] | None:
    """The problems of a pydantic ``ValidationError``; ``None`` for any other exception."""
    core = sys.modules.get("pydantic_core")
    validation_error = getattr(core, "ValidationError", None) if core is not None else None
    if not isinstance(validation_error, type) or not isinstance(error, validation_error):
        return None
    found = []
    for entry in error.errors(include_url=False):  # type: ignore[attr-defined]
        kind = entry["type"]
        message = str(entry["msg"])
        location = tuple(entry["loc"])
        if kind == "missing":
            found.append(PydanticProblem(location, True, "is required", entry["input"]))
            continue
        if kind in _EXPECTED:
            text = f"must be {_EXPECTED[kind]}"
        elif message.startswith("Input should be "):
            text = "must be " + message.removeprefix("Input should be ")
        else:
            for prefix in _PREFIXES:
                message = message.removeprefix(prefix)
            text = f"is not valid: {message}"
        found.append(PydanticProblem(location, False, text, entry["input"]))
    return found
