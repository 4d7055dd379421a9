"""Tools from Python functions: :func:`tool`, :class:`FunctionTool`, :class:`StreamingFunctionTool`.

Everything about a function that a model needs is worked out once, when the tool is made:

* the JSON Schema of its parameters, from the type hints (resolved where the function is
  defined, so ``from __future__ import annotations`` works) and the docstring (Google, reST or
  NumPy style, parsed with ``docstring-parser``);
* a conversion plan: for every parameter a ``cattrs`` structuring hook that checks the JSON value
  and turns it into the annotated type (attrs instances, enum members, tuples, sets...).

A call then only parses the JSON text, runs the prepared hooks and calls the function.

The JSON value accepted for each annotation, and the schema it gets:

==========================================  =============================================
annotation                                  JSON value (schema)
==========================================  =============================================
``str`` / ``int`` / ``float`` / ``bool``    string / integer / number / boolean; an
                                            integer is a valid ``float``, an integral
                                            number (``3.0``) a valid ``int``, a boolean is
                                            neither; unless ``strict=True``, a string that
                                            spells one is accepted too (``"2"``,
                                            ``"2.5"``, ``"true"``), not inside a union
                                            that has a member taking the string as it is
``None``                                    null
no annotation, ``Any``                      anything (``{}``)
``list[X]``, ``Sequence[X]``                array (``items``); a ``list`` is passed
``tuple[X, ...]`` / ``tuple[X, Y]``         array / array of exactly 2 (``prefixItems``)
``set[X]``, ``frozenset[X]``                array (``uniqueItems``; duplicates collapse)
``dict[str, X]``, ``Mapping[str, X]``       object (``additionalProperties``)
``X | Y``, ``Optional[X]``                  ``anyOf``; the most specific member that
                                            accepts the value wins, whatever the order:
                                            literals and enums, bool, int, float, str,
                                            arrays and objects (of attrs classes, the one
                                            with most fields in the value), null, Any; a
                                            number keeps its kind in ``int | float``
``Literal[...]``                            one of the values (``enum``)
``Enum`` subclass                           one of the members' values (``enum``)
attrs class                                 object with the class's fields (defaults kept)
``Annotated[X, "text"]``                    as ``X``, described by ``"text"``
``NewType("N", X)``                         as ``X``
==========================================  =============================================
"""

from __future__ import annotations

import collections.abc
import copy
import enum
import functools
import inspect
import json
import re
import sys
import threading
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Generic, Literal, ParamSpec, TypeVar, Union, overload

import attrs

from agentkit.errors import AgentConfigError, ToolArgumentsError, ToolError
from agentkit.schema import ToolInfo
from agentkit.streams import StreamReader, stream_from_iterator
from agentkit.tools import _lax

if TYPE_CHECKING:
    import cattrs

__all__ = ["FunctionTool", "StreamingFunctionTool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")
I = TypeVar("I", bound=Iterator[Any])  # noqa: E741 - the conventional name for an iterator type

_Hook = Callable[[Any, Any], Any]
_NoneType = type(None)
_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SUPPORTED = (
    "str, int, float, bool, None, Any, list/Sequence, tuple, set/frozenset, dict[str, ...], "
    "Optional/Union, Literal, Enum, attrs classes, Annotated and NewType"
)


# --- the decorator ------------------------------------------------------------------------------


@overload
def tool(
    fn: Callable[P, I],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
) -> StreamingFunctionTool[P, I]: ...


@overload
def tool(
    fn: Callable[P, R],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
) -> FunctionTool[P, R]: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
) -> _Decorator: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
) -> FunctionTool[Any, Any] | _Decorator:
    """Make a tool of a Python function: its schema comes from the type hints and the docstring.

    Use it as ``@tool``, ``@tool()``, ``@tool(name=..., description=...)``, or call it:
    ``tool(fn, name=...)``. A generator function becomes a :class:`StreamingFunctionTool` (each
    yielded item is a chunk), any other function a :class:`FunctionTool`. Either stays callable
    like the function itself.

    Example::

        from typing import Literal

        @tool
        def get_weather(city: str, days: int = 1, unit: Literal["C", "F"] = "C") -> dict:
            '''Get the weather forecast for a city.

            Args:
                city: the city, for example "Paris".
                days: how many days to forecast.
                unit: the temperature unit.
            '''
            return {"city": city, "forecast": ["sunny"] * days, "unit": unit}

        get_weather.info().parameters["required"]    # ['city']
        get_weather.invoke('{"city": "Paris"}')
        # '{"city": "Paris", "forecast": ["sunny"], "unit": "C"}'
        get_weather("Paris", days=2)                  # the plain function call

    Args:
        fn: the function, or a bound method (to make a tool of a method, pass
            ``instance.method``). When omitted, a decorator is returned.
        name: the tool name (default: the function's ``__name__``); 1-64 letters, digits,
            ``_`` or ``-``, as model APIs require.
        description: what the model is told the tool does (default: the docstring without its
            parameter, return and raise sections).
        strict: refuse scalars in the wrong JSON kind. By default a string that spells the
            value unambiguously is accepted for an ``int``, ``float`` or ``bool`` (``"2"``,
            ``"2.5"``, ``"true"``/``"false"``), because models often quote numbers; with
            ``strict=True`` only the JSON kind the schema names is accepted.

    Raises:
        TypeError: ``fn`` is not a function, is ``async``, has ``*args``, or a parameter has an
            annotation that cannot be expressed in JSON (the message names the parameter and type).
        AgentConfigError: the name is not a valid tool name (a lambda needs ``name=``).
    """
    if fn is None:
        return _Decorator(name, description, strict)
    if isinstance(fn, str):
        raise TypeError(
            f"tool() takes the function first; to name the tool write @tool(name={fn!r})"
        )
    return _make_tool(fn, name, description, strict, sys._getframe(1).f_locals)


@attrs.frozen
class _Decorator:
    """What ``tool()`` and ``tool(name=..., description=...)`` return."""

    name: str | None
    description: str | None
    strict: bool

    @overload
    def __call__(self, fn: Callable[P, I], /) -> StreamingFunctionTool[P, I]: ...

    @overload
    def __call__(self, fn: Callable[P, R], /) -> FunctionTool[P, R]: ...

    def __call__(self, fn: Callable[..., Any], /) -> FunctionTool[Any, Any]:
        return _make_tool(
            fn, self.name, self.description, self.strict, sys._getframe(1).f_locals
        )


def _make_tool(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    strict: bool,
    localns: Mapping[str, Any] | None,
) -> FunctionTool[Any, Any]:
    if isinstance(fn, FunctionTool):
        fn = fn.__wrapped__
    cls = StreamingFunctionTool if inspect.isgeneratorfunction(fn) else FunctionTool
    return cls(fn, name=name, description=description, strict=strict, localns=localns)


# --- the tools ----------------------------------------------------------------------------------


class FunctionTool(Generic[P, R]):
    """A Python function as an :class:`~agentkit.tools.InvokableTool`; made by :func:`tool`.

    ``invoke`` parses the JSON arguments, checks and converts them to the annotated types
    (unknown arguments are ignored; parameters that were not sent get their defaults), calls the
    function and returns its result: a ``str`` as it is, an enum as its value, anything else as
    JSON (attrs instances as objects, sets and tuples as arrays).

    Errors:

    * Arguments that do not match the parameters raise
      :class:`~agentkit.errors.ToolArgumentsError` before the function runs, with a message
      for the model that names the tool, the argument and what was expected, e.g.
      ``get_weather: 'days' must be an integer (got 'three')``.
    * A result that cannot be JSON-encoded raises :class:`~agentkit.errors.ToolError`.
    * Exceptions raised by the function propagate unchanged (the agent running the tool adds
      the tool-call id). Only ``Exception`` subclasses are ever caught by the tool, so
      ``BaseException``-based signals such as interrupts pass through untouched.

    ``**tool_options`` passed to ``invoke`` are ignored: a function tool reads whatever it
    needs from the run context.

    The object is still the function: calling it calls the function directly, and
    ``__wrapped__``, ``__name__``, ``__doc__`` and ``__module__`` are the function's.
    Nothing in a tool changes after it is made: invoke it from as many threads as you like.
    """

    __wrapped__: Callable[P, R]

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        strict: bool = False,
        localns: Mapping[str, Any] | None = None,
    ) -> None:
        """Build the tool; prefer :func:`tool`, which picks the class for generator functions.

        ``localns`` is a namespace tried when an annotation names something that is not a
        global of the function's module (a class defined inside a function, for example);
        :func:`tool` passes the namespace it is called from. ``strict`` is as for :func:`tool`.
        """
        _check_function(fn)
        if inspect.isgeneratorfunction(fn) and not isinstance(self, StreamingFunctionTool):
            raise TypeError(
                f"{_qualname(fn)} is a generator function: make it a StreamingFunctionTool "
                "(tool() does this)"
            )
        functools.update_wrapper(self, fn)
        tool_name = fn.__name__ if name is None else name
        if not isinstance(tool_name, str) or _TOOL_NAME.fullmatch(tool_name) is None:
            raise AgentConfigError(
                f"{tool_name!r} is not a valid tool name for {_qualname(fn)}: use 1-64 letters, "
                "digits, '_' or '-' (pass name=...)"
            )
        plan = _plan(fn, localns, strict)
        self._fn = fn
        self._name = tool_name
        self._description = plan.description if description is None else description
        self._parameters = plan.schema
        self._params = plan.params

    @property
    def name(self) -> str:
        """The tool name the model calls."""
        return self._name

    def info(self) -> ToolInfo:
        """Return the name, description and JSON Schema parameters (a fresh copy each time)."""
        return ToolInfo(self._name, self._description, copy.deepcopy(self._parameters))

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Run the function with the model's JSON arguments and return its result as text.

        Raises:
            ToolArgumentsError: the arguments are not valid JSON or do not match the parameters.
            ToolError: the result cannot be encoded as JSON.
        """
        args, kwargs = self._convert(arguments)
        return _encode_result(self._name, self._fn(*args, **kwargs))

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r})"

    def _convert(self, arguments: str) -> tuple[list[Any], dict[str, Any]]:
        """Parse, check and convert JSON arguments into positional and keyword arguments."""
        if not isinstance(arguments, str):
            raise TypeError(
                f"{self._name}: invoke() takes the arguments as JSON text (str), not "
                f"{type(arguments).__name__}; use json.dumps(...)"
            )
        if not arguments or arguments.isspace():
            data: Any = {}
        else:
            try:
                data = json.loads(arguments)
            except (ValueError, RecursionError) as exc:
                raise ToolArgumentsError(
                    f"{self._name}: arguments are not valid JSON: {exc} (got {_show(arguments)})",
                    tool_name=self._name,
                ) from exc
            if type(data) is not dict:
                raise ToolArgumentsError(
                    f"{self._name}: arguments must be a JSON object, not {_json_kind(data)} "
                    f"(got {_show(arguments)})",
                    tool_name=self._name,
                )
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        problems: list[str] = []
        for param in self._params:
            name = param.name
            if name in data:
                value = data[name]
                if param.hook is not None:
                    try:
                        value = param.hook(value, param.type)
                    except Exception as exc:
                        _explain(exc, [("attr", name)], data, problems)
                        continue
            elif param.required:
                problems.append(f"'{name}' is required (got {_show(data)})")
                continue
            elif param.positional:
                value = param.default
            else:
                continue
            if param.positional:
                args.append(value)
            else:
                kwargs[name] = value
        if problems:
            raise ToolArgumentsError(f"{self._name}: {'; '.join(problems)}", tool_name=self._name)
        return args, kwargs


class StreamingFunctionTool(FunctionTool[P, R]):
    """A generator function as a :class:`~agentkit.tools.StreamableTool`; made by :func:`tool`.

    ``stream`` checks and converts the arguments at once (raising
    :class:`~agentkit.errors.ToolArgumentsError` before anything runs), then returns a reader
    that runs the generator lazily, in the thread that reads: each yielded item is one chunk,
    a ``str`` as it is, anything else JSON-encoded as for :class:`FunctionTool`. An exception
    raised by the generator is the stream's error. Closing the reader closes the generator.

    ``invoke`` returns the chunks joined with no separator, which is what Eino does when a
    streaming tool is called by an agent that does not stream; an agent that streams calls
    ``stream``.
    """

    def stream(self, arguments: str, **tool_options: Any) -> StreamReader[str]:
        """Run the generator with the model's JSON arguments; its items are the chunks.

        Raises:
            ToolArgumentsError: the arguments are not valid JSON or do not match the parameters.
        """
        args, kwargs = self._convert(arguments)
        items: Iterator[Any] = self._fn(*args, **kwargs)  # type: ignore[assignment]
        return stream_from_iterator(_encode_chunks(self._name, items))

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Run the generator to its end and return all chunks joined."""
        return "".join(self.stream(arguments))


def _encode_chunks(name: str, items: Iterator[Any]) -> Iterator[str]:
    try:
        for item in items:
            yield _encode_result(name, item)
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()


# --- signature analysis -------------------------------------------------------------------------


@attrs.frozen
class _Param:
    """How one parameter is filled from the JSON arguments."""

    name: str
    type: Any
    hook: _Hook | None  # None: the JSON value is passed as it is
    required: bool
    positional: bool  # positional-only: always passed positionally, default filled in
    default: Any


@attrs.frozen
class _Plan:
    description: str
    schema: dict[str, Any]
    params: tuple[_Param, ...]


def _check_function(fn: object) -> None:
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)):
        raise TypeError(
            f"tool() needs a Python function or bound method, got {fn!r} ({type(fn).__name__})"
        )
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise TypeError(
            f"{_qualname(fn)} is async; agentkit runs tools in threads: make it a plain function"
        )


def _plan(fn: Callable[..., Any], localns: Mapping[str, Any] | None, strict: bool) -> _Plan:
    """Work out the schema and the conversion plan of ``fn`` (once, when the tool is made)."""
    where = _qualname(fn)
    hints = _resolve_hints(fn, localns, where)
    summary, param_docs = _parse_docstring(inspect.getdoc(fn))
    converter = _get_converter(strict)
    properties: dict[str, Any] = {}
    required: list[str] = []
    params: list[_Param] = []
    parameters = list(inspect.signature(fn).parameters.values())
    if (
        parameters
        and inspect.isfunction(fn)
        and parameters[0].name in ("self", "cls")
        and parameters[0].name not in hints
    ):
        raise TypeError(
            f"{where}: the first parameter is {parameters[0].name!r}; a method in a class body "
            "cannot be a tool: make the tool from the bound method, e.g. tool(instance.method)"
        )
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            raise TypeError(
                f"{where}: *{parameter.name} cannot be filled from named JSON arguments; "
                "use a list parameter instead"
            )
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            continue  # never receives anything: the schema is the contract, extras are dropped
        annotation = hints.get(parameter.name, Any)
        try:
            schema = _schema(annotation, localns, ())
        except _Unsupported as exc:
            raise TypeError(
                f"{where}: parameter {parameter.name!r} has the type {_type_name(annotation)}, "
                f"which tools do not support: {exc}. Supported: {_SUPPORTED}"
            ) from None
        _describe_property(schema, annotation, param_docs.get(parameter.name))
        has_default = parameter.default is not inspect.Parameter.empty
        if has_default:
            _record_default(schema, parameter.default)
        else:
            required.append(parameter.name)
        properties[parameter.name] = schema
        hook = (
            None
            if _strip_annotated(annotation) is Any
            else converter.get_structure_hook(annotation)
        )
        params.append(
            _Param(
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
    return _Plan(summary, object_schema, tuple(params))


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
    raise TypeError(
        f"{where}: cannot resolve its type annotations ({type(error).__name__}: {error}); "
        "annotations are evaluated in the module that defines the function, so every type they "
        "name must be importable there when the tool is made"
    ) from error


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Return the description and the per-parameter descriptions of a docstring."""
    if not doc:
        return "", {}
    import docstring_parser

    try:
        parsed = docstring_parser.parse(doc)
    except docstring_parser.ParseError:
        return doc.strip(), {}
    params = {
        param.arg_name: param.description.strip()
        for param in parsed.params
        if param.description and param.description.strip()
    }
    return (parsed.description or "").strip(), params


def _qualname(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


# --- schema inference ---------------------------------------------------------------------------


class _Unsupported(Exception):
    """An annotation that has no JSON form; the message says which part and why."""


_ARRAYS: frozenset[Any] = frozenset(
    {
        list,
        tuple,
        set,
        frozenset,
        collections.abc.Sequence,
        collections.abc.MutableSequence,
        collections.abc.Set,
        collections.abc.MutableSet,
    }
)
_SETS: frozenset[Any] = frozenset({set, frozenset, collections.abc.Set, collections.abc.MutableSet})
_MAPPINGS: frozenset[Any] = frozenset(
    {dict, collections.abc.Mapping, collections.abc.MutableMapping}
)
_SCALARS: dict[Any, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    _NoneType: "null",
}


def _is_class(tp: Any) -> bool:
    # list[int] passes isinstance(..., type) on Python 3.10; it is no class here.
    return isinstance(tp, type) and not isinstance(tp, types.GenericAlias)


def _bare(tp: Any) -> Any:
    """``tp`` without its type arguments: ``list`` for ``list[int]``."""
    origin = typing.get_origin(tp)
    return tp if origin is None else origin


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (Union, types.UnionType)


def _is_literal(tp: Any) -> bool:
    return typing.get_origin(tp) is Literal


def _is_enum(tp: Any) -> bool:
    return isinstance(tp, enum.EnumMeta)


def _is_attrs(tp: Any) -> bool:
    return _is_class(tp) and attrs.has(tp)


def _is_array(tp: Any) -> bool:
    return _is_class(_bare(tp)) and _bare(tp) in _ARRAYS


def _is_mapping(tp: Any) -> bool:
    return _is_class(_bare(tp)) and _bare(tp) in _MAPPINGS


def _strip_annotated(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _fixed_tuple_args(tp: Any) -> tuple[Any, ...] | None:
    """The element types of ``tuple[X, Y]``; ``None`` for ``tuple[X, ...]`` and bare tuples."""
    if typing.get_origin(tp) is not tuple:
        return None
    args = typing.get_args(tp)
    if not args or (len(args) == 2 and args[1] is Ellipsis):
        return None
    return args


def _schema(tp: Any, localns: Mapping[str, Any] | None, seen: tuple[type, ...]) -> dict[str, Any]:
    """Return a fresh JSON Schema for ``tp``; raise :class:`_Unsupported` when it has none."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        schema = _schema(args[0], localns, seen)
        text = next((meta for meta in tp.__metadata__ if isinstance(meta, str)), None)
        if text:
            schema["description"] = text
        return schema
    if tp is Any:
        return {}
    if tp is None or tp is _NoneType:
        return {"type": "null"}
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:  # typing.NewType
        return _schema(supertype, localns, seen)
    if _is_class(tp) and tp in _SCALARS:
        return {"type": _SCALARS[tp]}
    if _is_enum(tp):
        values = [member.value for member in tp]
        for value in values:
            if not _is_json_scalar(value):
                raise _Unsupported(
                    f"the value {value!r} of {tp.__qualname__} is not a JSON string, number, "
                    "boolean or null"
                )
        return _enum_schema(values)
    if origin is Literal:
        for value in args:
            if not _is_json_scalar(value):
                raise _Unsupported(
                    f"the Literal value {value!r} is not a JSON string, number, boolean or null"
                )
        return _enum_schema(list(args))
    if origin in (Union, types.UnionType):
        return {"anyOf": [_schema(member, localns, seen) for member in args]}
    if _is_attrs(tp):
        return _attrs_schema(tp, localns, seen)
    if _is_array(tp):
        fixed = _fixed_tuple_args(tp)
        if fixed is not None:
            items = [_schema(item, localns, seen) for item in fixed]
            # `items` for readers that ignore prefixItems: any of the element schemas
            # ({} when one of them is already anything).
            any_item: dict[str, Any] = {}
            unique = [item for i, item in enumerate(items) if item not in items[:i]]
            if len(unique) == 1:
                any_item = copy.deepcopy(unique[0])
            elif all(unique):
                any_item = {"anyOf": copy.deepcopy(unique)}
            return {
                "type": "array",
                "prefixItems": items,
                "items": any_item,
                "minItems": len(items),
                "maxItems": len(items),
            }
        item_type = args[0] if args else Any
        schema = {"type": "array", "items": _schema(item_type, localns, seen)}
        if _bare(tp) in _SETS:
            if not _is_hashable(item_type):
                raise _Unsupported(f"set items must be hashable and {_type_name(item_type)} is not")
            schema["uniqueItems"] = True
        return schema
    if _is_mapping(tp):
        if args and _strip_annotated(args[0]) not in (str, Any):
            raise _Unsupported(
                f"dictionary keys must be str (JSON object keys are strings), not "
                f"{_type_name(args[0])}"
            )
        value_type = args[1] if len(args) == 2 else Any
        schema = {"type": "object"}
        if _strip_annotated(value_type) is not Any:
            schema["additionalProperties"] = _schema(value_type, localns, seen)
        return schema
    hint = ""
    if _is_class(tp) and tp.__module__ != "builtins":
        hint = " (a class must be an attrs class or an Enum)"
    raise _Unsupported(f"{_type_name(tp)} has no JSON form{hint}")


def _describe_property(schema: dict[str, Any], tp: Any, doc: str | None) -> None:
    """Describe a parameter or field: ``Annotated`` text, else its docstring entry, else the
    description its type has (an attrs class's docstring summary)."""
    if doc and not (
        typing.get_origin(tp) is typing.Annotated
        and any(isinstance(meta, str) for meta in tp.__metadata__)
    ):
        schema["description"] = doc


def _is_json_scalar(value: Any) -> bool:
    return value is None or type(value) in (str, int, float, bool)


def _enum_schema(values: list[Any]) -> dict[str, Any]:
    kinds: list[str] = []
    for value in values:
        kind = _SCALARS[type(value)]
        if kind not in kinds:
            kinds.append(kind)
    if "integer" in kinds and "number" in kinds:
        kinds.remove("integer")
    return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": list(values)}


def _attrs_schema(
    cls: type, localns: Mapping[str, Any] | None, seen: tuple[type, ...]
) -> dict[str, Any]:
    if cls in seen:
        raise _Unsupported(
            f"{cls.__qualname__} refers to itself; recursive types cannot be tool parameters"
        )
    _resolve_attrs_types(cls, localns)
    summary, field_docs = _parse_docstring(inspect.getdoc(cls) if cls.__doc__ else None)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cls):
        if not field.init:
            continue
        field_type = Any if field.type is None else field.type
        try:
            schema = _schema(field_type, localns, (*seen, cls))
        except _Unsupported as exc:
            raise _Unsupported(f"in {cls.__qualname__}.{field.name}: {exc}") from None
        _describe_property(schema, field_type, field_docs.get(field.name))
        if field.default is attrs.NOTHING:
            required.append(field.name)
        elif not isinstance(field.default, attrs.Factory):  # type: ignore[arg-type]
            _record_default(schema, field.default)
        properties[field.name] = schema
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    if summary:
        schema["description"] = summary
    return schema


def _resolve_attrs_types(cls: type, localns: Mapping[str, Any] | None) -> None:
    try:
        attrs.resolve_types(cls)
        return
    except NameError as exc:
        error: Exception = exc
        if localns:
            try:
                attrs.resolve_types(cls, localns=dict(localns))
                return
            except Exception as retry_exc:
                error = retry_exc
    except Exception as exc:
        error = exc
    raise _Unsupported(
        f"the annotations of {cls.__qualname__} cannot be resolved ({type(error).__name__}: "
        f"{error})"
    )


def _is_hashable(tp: Any) -> bool:
    tp = _strip_annotated(tp)
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType) or origin is tuple:
        return all(_is_hashable(arg) for arg in typing.get_args(tp) if arg is not Ellipsis)
    if _is_array(tp) or _is_mapping(tp):
        return _bare(tp) in (tuple, frozenset)
    if _is_attrs(tp):
        return tp.__hash__ is not None
    return True


def _record_default(schema: dict[str, Any], default: Any) -> None:
    """Add ``default`` to the schema when it has a JSON form."""
    try:
        text = json.dumps(default, default=_to_json, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return
    schema["default"] = json.loads(text)


def _type_name(tp: Any) -> str:
    if tp is None or tp is _NoneType:
        return "None"
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__qualname__
    return repr(tp).replace("typing.", "")


# --- argument conversion ------------------------------------------------------------------------


class _Invalid(Exception):
    """A JSON value is not what the annotation accepts (raised by the converter's hooks)."""

    def __init__(self, expected: str, value: Any) -> None:
        super().__init__(f"must be {expected} (got {_show(value)})")
        self.expected = expected
        self.value = value


_converters: dict[bool, cattrs.Converter] = {}  # by strictness
_converter_lock = threading.Lock()


def _get_converter(strict: bool) -> cattrs.Converter:
    """Return the strict or the lax converter shared by all function tools, made on first use
    (cattrs is heavy)."""
    converter = _converters.get(strict)
    if converter is None:
        with _converter_lock:
            if True not in _converters:
                _converters[True] = _make_converter(None)
            if not strict and False not in _converters:
                _converters[False] = _make_converter(_converters[True])
            converter = _converters[strict]
    return converter


def _make_converter(strict: cattrs.Converter | None) -> cattrs.Converter:
    """A cattrs converter that checks JSON values and reports where they are wrong.

    Given no ``strict`` converter it is the strict one. Given one it is lax: scalars also
    accept strings that spell them (see :mod:`agentkit.tools._lax`), and a union first tries
    the strict converter's hook, so coercion only applies when no member takes the value as
    it is (``"2"`` stays a string in ``int | str``).

    Scalars are registered by class (cattrs dispatches classes first, by MRO); their hooks pass
    enums with a ``str``/``int``/``float`` mixin on to the enum hook. Containers and attrs
    classes reuse cattrs' generated hooks behind a check of the JSON kind, because cattrs would
    happily turn a string into a list of characters.
    """
    import cattrs
    from cattrs.cols import (
        homogenous_tuple_structure_factory,
        list_structure_factory,
        mapping_structure_factory,
    )
    from cattrs.errors import IterableValidationError, IterableValidationNote
    from cattrs.gen import make_dict_structure_fn

    converter = cattrs.Converter(detailed_validation=True, forbid_extra_keys=False)
    lax = strict is not None
    converter.register_structure_hook(str, _structure_str)
    converter.register_structure_hook(int, _lax_int if lax else _structure_int)
    converter.register_structure_hook(float, _lax_float if lax else _structure_float)
    converter.register_structure_hook(bool, _lax_bool if lax else _structure_bool)
    converter.register_structure_hook(_NoneType, _structure_none)
    converter.register_structure_hook_func(_is_enum, _structure_enum)

    def literal_hook(tp: Any) -> _Hook:
        choices = typing.get_args(tp)
        expected = _describe(tp)

        def structure_literal(value: Any, _: Any) -> Any:
            for choice in choices:
                if _same_json(choice, value):
                    return choice
            raise _Invalid(expected, value)

        return structure_literal

    def union_hook(tp: Any, converter: cattrs.Converter) -> _Hook:
        members = _union_members(tp)
        # A float stays a float when the union has a float member: 3.0 is not taken as the
        # int 3 in `int | float` (the int member comes first).
        has_float = float in members
        handlers = [
            (member, converter.get_structure_hook(member), _union_rank(member) == _STRUCTURED)
            for member in members
        ]
        expected = _describe(tp)

        def structure_union(value: Any, _: Any) -> Any:
            nested: list[Exception] = []
            best: Any = _MISSING
            best_score = (-1, 0)
            for member, handler, structured in handlers:
                if best is not _MISSING and not structured:
                    break
                if member is int and has_float and type(value) is float:
                    continue
                try:
                    result = handler(value, member)
                except _Invalid:
                    continue  # wrong JSON kind for this member
                except Exception as exc:
                    nested.append(exc)
                    continue
                if not structured:
                    return result
                score = _match_score(member, value)
                if score > best_score:
                    best, best_score = result, score
            if best is not _MISSING:
                return best
            if len(nested) == 1:
                # Only one member took this kind of value: its detailed error says the most.
                raise nested[0]
            raise _Invalid(expected, value)

        if strict is None:
            return structure_union
        as_it_is = strict.get_structure_hook(tp)

        def structure_lax_union(value: Any, cl: Any) -> Any:
            try:
                return as_it_is(value, cl)
            except Exception:
                return structure_union(value, cl)

        return structure_lax_union

    def array_hook(tp: Any, converter: cattrs.Converter) -> _Hook:
        fixed = _fixed_tuple_args(tp)
        if fixed is not None:
            return fixed_tuple_hook(fixed, converter)
        origin = typing.get_origin(tp) or tp
        args = typing.get_args(tp)
        item_type = args[0] if args else Any
        inner: _Hook
        if origin is tuple:
            inner = homogenous_tuple_structure_factory(_alias(tuple, item_type, ...), converter)
        elif origin in _SETS:
            as_list = list_structure_factory(_alias(list, item_type), converter)
            make = set if origin in (set, collections.abc.MutableSet) else frozenset

            def inner(value: Any, _: Any) -> Any:
                return make(as_list(value, list))

        else:
            inner = list_structure_factory(_alias(list, item_type), converter)

        def structure_array(value: Any, cl: Any) -> Any:
            if type(value) is not list:
                raise _Invalid("an array", value)
            return inner(value, cl)

        return structure_array

    def fixed_tuple_hook(item_types: tuple[Any, ...], converter: cattrs.Converter) -> _Hook:
        handlers = [(item, converter.get_structure_hook(item)) for item in item_types]
        size = len(handlers)
        expected = f"an array of {size} items"

        def structure_tuple(value: Any, _: Any) -> Any:
            if type(value) is not list or len(value) != size:
                raise _Invalid(expected, value)
            result = []
            errors: list[Exception] = []
            for index, ((item_type, handler), item) in enumerate(zip(handlers, value, strict=True)):
                try:
                    result.append(handler(item, item_type))
                except Exception as exc:
                    note = IterableValidationNote(
                        f"Structuring tuple @ index {index}", index, item_type
                    )
                    exc.__dict__.setdefault("__notes__", []).append(note)
                    errors.append(exc)
            if errors:
                raise IterableValidationError("While structuring a tuple", errors, tuple)
            return tuple(result)

        return structure_tuple

    def mapping_hook(tp: Any, converter: cattrs.Converter) -> _Hook:
        args = typing.get_args(tp)
        value_type = args[1] if len(args) == 2 else Any
        inner: _Hook = mapping_structure_factory(_alias(dict, str, value_type), converter)

        def structure_mapping(value: Any, cl: Any) -> Any:
            if type(value) is not dict:
                raise _Invalid("an object", value)
            return inner(value, cl)

        return structure_mapping

    def attrs_hook(tp: Any, converter: cattrs.Converter) -> _Hook:
        inner = make_dict_structure_fn(tp, converter)

        def structure_attrs(value: Any, cl: Any) -> Any:
            if type(value) is not dict:
                raise _Invalid("an object", value)
            return inner(value, cl)

        return structure_attrs

    # Factories registered later take precedence over cattrs' own.
    converter.register_structure_hook_factory(_is_literal, literal_hook)
    converter.register_structure_hook_factory(_is_union, union_hook)
    converter.register_structure_hook_factory(_is_array, array_hook)
    converter.register_structure_hook_factory(_is_mapping, mapping_hook)
    converter.register_structure_hook_factory(_is_attrs, attrs_hook)
    return converter


def _alias(origin: type, *args: Any) -> Any:
    """``origin[args]`` for type arguments known only at run time."""
    return types.GenericAlias(origin, args)


# Union members are tried from the most specific kind to the least. The order cannot be the
# declared one: `A | B == B | A`, so cattrs caches one hook for both spellings.
_STRUCTURED = 6


def _union_rank(tp: Any) -> int:
    tp = _strip_annotated(tp)
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:
        return _union_rank(supertype)
    if _is_literal(tp) or _is_enum(tp):
        return 0
    ranks = {bool: 1, int: 2, float: 3, str: 4, _NoneType: 7}
    if _is_class(tp) and tp in ranks:
        return ranks[tp]
    if tp is Any:
        return 8
    return _STRUCTURED  # arrays, objects, attrs classes


def _union_members(tp: Any) -> list[Any]:
    """The members of a union, most specific first, in an order that does not depend on how
    the union was spelled."""
    return sorted(typing.get_args(tp), key=lambda member: (_union_rank(member), repr(member)))


def _match_score(tp: Any, value: Any) -> tuple[int, int]:
    """How well a JSON object fits an attrs class: most of its keys are fields, fewest fields
    left to their defaults."""
    tp = _strip_annotated(tp)
    if type(value) is dict and _is_attrs(tp):
        fields = attrs.fields(tp)
        matched = sum(1 for field in fields if field.name in value)
        return matched, matched - len(fields)
    return 0, 0


def _structure_str(value: Any, cl: Any) -> Any:
    if cl is not str:
        return _structure_enum(value, cl)
    if isinstance(value, str):
        return value
    raise _Invalid("a string", value)


def _structure_int(value: Any, cl: Any) -> Any:
    if cl is not int:
        return _structure_enum(value, cl)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _Invalid("an integer", value)


def _structure_float(value: Any, cl: Any) -> Any:
    if cl is not float:
        return _structure_enum(value, cl)
    if isinstance(value, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            raise _Invalid("a number in the range of a float", value) from None
    raise _Invalid("a number", value)


def _lax_int(value: Any, cl: Any) -> Any:
    return _lax_scalar(_structure_int, _lax.number, int, value, cl)


def _lax_float(value: Any, cl: Any) -> Any:
    return _lax_scalar(_structure_float, _lax.number, float, value, cl)


def _lax_bool(value: Any, cl: Any) -> Any:
    return _lax_scalar(_structure_bool, _lax.boolean, bool, value, cl)


def _lax_scalar(
    structure: _Hook, read: Callable[[str, Any], Any], scalar: type, value: Any, cl: Any
) -> Any:
    """``structure(value)``; when that fails on a string, the value the string spells (the
    error keeps naming what the model sent)."""
    try:
        return structure(value, cl)
    except _Invalid:
        spelled = read(value, _MISSING) if cl is scalar and type(value) is str else _MISSING
        if spelled is _MISSING:
            raise
        try:
            return structure(spelled, cl)
        except _Invalid:
            pass
        raise


def _structure_bool(value: Any, _: Any) -> Any:
    if value is True or value is False:
        return value
    raise _Invalid("a boolean", value)


def _structure_none(value: Any, _: Any) -> Any:
    if value is None:
        return None
    raise _Invalid("null", value)


def _structure_enum(value: Any, cl: Any) -> Any:
    for member in cl:
        if _same_json(member.value, value):
            return member
    raise _Invalid(_describe(cl), value)


def _same_json(expected: Any, value: Any) -> bool:
    """Whether a JSON value equals a Literal/enum value (``True`` is not ``1``; ``1.0`` is)."""
    if isinstance(expected, bool) or isinstance(value, bool):
        return expected is value
    if isinstance(expected, str) != isinstance(value, str):
        return False
    return bool(expected == value)


def _describe(tp: Any) -> str:
    """What a JSON value of type ``tp`` is, for error messages: 'an integer', 'one of ...'."""
    tp = _strip_annotated(tp)
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:
        return _describe(supertype)
    simple = {
        str: "a string",
        int: "an integer",
        float: "a number",
        bool: "a boolean",
        _NoneType: "null",
        None: "null",
        Any: "any JSON value",
    }
    if tp in simple:
        return simple[tp]
    if _is_enum(tp):
        return _one_of([member.value for member in tp])
    if _is_literal(tp):
        return _one_of(list(typing.get_args(tp)))
    if _is_union(tp):
        alternatives: list[str] = []
        for member in _union_members(tp):
            text = _describe(member)
            if text not in alternatives:
                alternatives.append(text)
        if len(alternatives) == 1:
            return alternatives[0]
        return f"{', '.join(alternatives[:-1])} or {alternatives[-1]}"
    fixed = _fixed_tuple_args(tp)
    if fixed is not None:
        return f"an array of {len(fixed)} items"
    if _is_array(tp):
        return "an array"
    return "an object"


def _one_of(values: list[Any]) -> str:
    if len(values) == 1:
        return repr(values[0])
    return "one of " + ", ".join(repr(value) for value in values)


_Segment = tuple[str, Any]  # ("attr", name) | ("key", dict key) | ("index", position)


def _explain(exc: BaseException, path: list[_Segment], data: Any, problems: list[str]) -> None:
    """Turn a structuring error (a tree of cattrs validation errors) into messages for the model."""
    from cattrs.errors import AttributeValidationNote, BaseValidationError, IterableValidationNote

    where = _format_path(path)
    if isinstance(exc, _Invalid):
        problems.append(f"'{where}' must be {exc.expected} (got {_show(exc.value)})")
    elif isinstance(exc, BaseValidationError):
        for sub in exc.exceptions:
            segment: _Segment | None = None
            for note in getattr(sub, "__notes__", ()):
                if isinstance(note, AttributeValidationNote):
                    segment = ("attr", note.name)
                elif isinstance(note, IterableValidationNote):
                    segment = ("key" if isinstance(note.index, str) else "index", note.index)
            _explain(sub, path if segment is None else [*path, segment], data, problems)
    elif isinstance(exc, KeyError) and _is_missing(data, path):
        problems.append(f"'{where}' is required (got {_show(_lookup(data, path[:-1]))})")
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


_MISSING = object()


def _lookup(data: Any, path: list[_Segment]) -> Any:
    for kind, key in path:
        found = (
            type(data) is list and 0 <= key < len(data)
            if kind == "index"
            else type(data) is dict and key in data
        )
        if not found:
            return _MISSING
        data = data[key]
    return data


def _is_missing(data: Any, path: list[_Segment]) -> bool:
    if not path or path[-1][0] != "attr":
        return False
    parent = _lookup(data, path[:-1])
    return type(parent) is dict and path[-1][1] not in parent


def _show(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _json_kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null"


# --- results ------------------------------------------------------------------------------------


def _to_json(value: Any) -> Any:
    """``json.dumps`` fallback for the result types tools may return besides plain JSON data."""
    if isinstance(value, enum.Enum):
        return value.value
    if attrs.has(type(value)):
        return attrs.asdict(value, recurse=False)
    if isinstance(value, (set, frozenset)):
        return list(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _encode_result(name: str, result: Any) -> str:
    """A tool result as text: a str as it is, an enum as its value, anything else as JSON."""
    if isinstance(result, enum.Enum):
        result = result.value
    if isinstance(result, str):
        return str(result)
    try:
        return json.dumps(result, ensure_ascii=False, default=_to_json)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ToolError(
            f"{name}: the result cannot be encoded as JSON ({exc}); return a str, or data made "
            "of dict, list, tuple, set, str, int, float, bool, None, enums and attrs instances",
            tool_name=name,
        ) from exc
