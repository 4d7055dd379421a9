"""Signature analysis of a function tool: its JSON Schema and how each argument is converted.

Worked out once, when the tool is made (framework-internal; see :mod:`agentkit.tools.function`).
"""

from __future__ import annotations

import collections.abc
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from agentkit.errors import AgentKitTypeError
from agentkit.schema import AudioPart, FilePart, ImagePart, TextPart
from agentkit.tools._convert import Hook, get_converter, scalar_hook
from agentkit.tools._schema import (
    Unsupported,
    describe_property,
    parse_docstring,
    record_default,
    schema_of,
    strip_annotated,
    type_name,
)

__all__ = [
    "Param",
    "SignaturePlan",
    "check_function",
    "plan_signature",
    "qualname",
    "yields_parts",
]

_SUPPORTED = (
    "str, int, float, bool, None, Any, list/Sequence, tuple, set/frozenset, dict[str, ...], "
    "Optional/Union, Literal, Enum, attrs classes, dataclasses, TypedDicts, pydantic models, "
    "Annotated and NewType"
)


@attrs.frozen
class Param:
    """How one parameter is filled from the JSON arguments."""

    name: str
    type: Any
    hook: Hook | None  # None: the JSON value is passed as it is
    required: bool
    positional: bool  # positional-only: always passed positionally, default filled in
    default: Any


@attrs.frozen
class SignaturePlan:
    """A function's description, parameters schema and conversion plan."""

    description: str
    schema: dict[str, Any]
    params: tuple[Param, ...]


def check_function(fn: object) -> None:
    """Raise ``TypeError`` unless ``fn`` is a function or bound method (``async`` or not)."""
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        raise AgentKitTypeError(
            f"tool() needs a Python function or bound method, got {fn!r} ({type(fn).__name__})"
        )


def plan_signature(
    fn: Callable[..., Any], localns: Mapping[str, Any] | None, strict: bool
) -> SignaturePlan:
    """Work out the schema and the conversion plan of ``fn`` (once, when the tool is made)."""
    where = qualname(fn)
    hints = _resolve_hints(fn, localns, where)
    summary, param_docs = parse_docstring(inspect.getdoc(fn))
    properties: dict[str, Any] = {}
    required: list[str] = []
    params: list[Param] = []
    parameters = list(inspect.signature(fn).parameters.values())
    if (
        parameters
        and inspect.isfunction(fn)
        and parameters[0].name in ("self", "cls")
        and parameters[0].name not in hints
    ):
        raise AgentKitTypeError(
            f"{where}: the first parameter is {parameters[0].name!r}; a method in a class body "
            "cannot be a tool: make the tool from the bound method, e.g. tool(instance.method)"
        )
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            raise AgentKitTypeError(
                f"{where}: *{parameter.name} cannot be filled from named JSON arguments; "
                "use a list parameter instead"
            )
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            continue  # never receives anything: the schema is the contract, extras are dropped
        annotation = hints.get(parameter.name, Any)
        try:
            schema = schema_of(annotation, localns, ())
        except Unsupported as exc:
            raise AgentKitTypeError(
                f"{where}: parameter {parameter.name!r} has the type {type_name(annotation)}, "
                f"which tools do not support: {exc}. Supported: {_SUPPORTED}"
            ) from None
        describe_property(schema, annotation, param_docs.get(parameter.name))
        has_default = parameter.default is not inspect.Parameter.empty
        if has_default:
            record_default(schema, parameter.default)
        else:
            required.append(parameter.name)
        properties[parameter.name] = schema
        hook = (
            None
            if strip_annotated(annotation) is Any
            else scalar_hook(annotation, strict)
            or get_converter(strict).get_structure_hook(annotation)
        )
        params.append(
            Param(
                name=parameter.name,
                type=annotation,
                hook=hook,
                required=not has_default,
                positional=parameter.kind is inspect.Parameter.POSITIONAL_ONLY,
                default=parameter.default,
            )
        )
    object_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        object_schema["required"] = required
    return SignaturePlan(summary, object_schema, tuple(params))


_PARTS = (TextPart, ImagePart, FilePart, AudioPart)
_ITERATORS = (
    collections.abc.Iterator,
    collections.abc.Iterable,
    collections.abc.Generator,
    collections.abc.AsyncIterator,
    collections.abc.AsyncIterable,
    collections.abc.AsyncGenerator,
)


def yields_parts(fn: Callable[..., Any], localns: Mapping[str, Any] | None) -> bool:
    """Whether the generator function ``fn`` is annotated to yield content parts
    (``Iterator[str | ImagePart]``, ``AsyncIterator[TextPart | ImagePart]``...)."""
    returned = _resolve_hints(fn, localns, qualname(fn)).get("return")
    if typing.get_origin(returned) not in _ITERATORS:
        return False
    items = typing.get_args(returned)
    if not items:
        return False
    item = strip_annotated(items[0])
    union = typing.get_origin(item) in (typing.Union, types.UnionType)
    members = typing.get_args(item) if union else (item,)
    return any(isinstance(m, type) and issubclass(m, _PARTS) for m in members)


def _resolve_hints(
    fn: Callable[..., Any], localns: Mapping[str, Any] | None, where: str
) -> dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except NameError as exc:
        error: Exception = exc
        if localns:
            try:
                return typing.get_type_hints(fn, localns=dict(localns), include_extras=True)
            except Exception as retry_exc:
                error = retry_exc
    except Exception as exc:
        error = exc
    raise AgentKitTypeError(
        f"{where}: cannot resolve its type annotations ({type(error).__name__}: {error}); "
        "annotations are evaluated in the module that defines the function, so every type they "
        "name must be importable there when the tool is made"
    ) from error


def qualname(fn: object) -> str:
    """The name of ``fn`` for error messages."""
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))
