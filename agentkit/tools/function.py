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
attrs class, dataclass, ``TypedDict``       object with the class's fields (defaults kept)
``Annotated[X, "text"]``                    as ``X``, described by ``"text"``
``NewType("N", X)``                         as ``X``
==========================================  =============================================
"""

from __future__ import annotations

import copy
import enum
import functools
import inspect
import json
import re
import sys
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, ParamSpec, TypeVar, overload

import attrs

from agentkit.errors import AgentConfigError, ToolArgumentsError, ToolError
from agentkit.schema import ToolInfo
from agentkit.streams import StreamReader, stream_from_iterator
from agentkit.tools._convert import (
    Hook,
    explain,
    get_converter,
    json_kind,
    scalar_hook,
    show,
)
from agentkit.tools._schema import (
    Unsupported,
    describe_property,
    parse_docstring,
    record_default,
    schema_of,
    strip_annotated,
    to_json,
    type_name,
)
from agentkit.tools.approval import (
    ApprovalPolicy,
    Decision,
    ask_approval,
    check_policy,
    parse_object,
    running,
)

__all__ = ["FunctionTool", "StreamingFunctionTool", "tool"]

P = ParamSpec("P")
R = TypeVar("R")
I = TypeVar("I", bound=Iterator[Any])  # noqa: E741 - the conventional name for an iterator type

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SUPPORTED = (
    "str, int, float, bool, None, Any, list/Sequence, tuple, set/frozenset, dict[str, ...], "
    "Optional/Union, Literal, Enum, attrs classes, dataclasses, TypedDicts, Annotated and NewType"
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
    needs_approval: ApprovalPolicy = False,
    timeout: float | None = None,
) -> StreamingFunctionTool[P, I]: ...


@overload
def tool(
    fn: Callable[P, R],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
    needs_approval: ApprovalPolicy = False,
    timeout: float | None = None,
) -> FunctionTool[P, R]: ...


@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
    needs_approval: ApprovalPolicy = False,
    timeout: float | None = None,
) -> _Decorator: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
    needs_approval: ApprovalPolicy = False,
    timeout: float | None = None,
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
        needs_approval: ``True``, or ``fn(arguments: dict) -> bool`` deciding per call: a call
            that needs approval interrupts the run with an
            :class:`~agentkit.ApprovalRequest` before the function runs (after its arguments
            were checked); see :mod:`agentkit.tools.approval` for the resume data.
        timeout: the most seconds a call of the tool may take when an agent runs it (it then
            fails with :class:`~agentkit.ToolTimeoutError`; see ``ChatModelAgent(tool_timeout=)``
            for what happens to the abandoned call). ``None``: the agent's ``tool_timeout``.

    Raises:
        TypeError: ``fn`` is not a function, is ``async``, has ``*args``, or a parameter has an
            annotation that cannot be expressed in JSON (the message names the parameter and type).
        AgentConfigError: the name is not a valid tool name (a lambda needs ``name=``).
    """
    check_policy(needs_approval, "tool()")
    timeout = checked_timeout(timeout)
    if fn is None:
        return _Decorator(name, description, strict, needs_approval, timeout)
    if isinstance(fn, str):
        raise TypeError(
            f"tool() takes the function first; to name the tool write @tool(name={fn!r})"
        )
    return _make_tool(
        fn, name, description, strict, sys._getframe(1).f_locals, needs_approval, timeout
    )


def checked_timeout(timeout: object) -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise AgentConfigError(
            f"timeout must be a number of seconds > 0, or None for no limit (got {timeout!r})"
        )
    return float(timeout)


@attrs.frozen
class _Decorator:
    """What ``tool()`` and ``tool(name=..., description=...)`` return."""

    name: str | None
    description: str | None
    strict: bool
    needs_approval: ApprovalPolicy = False
    timeout: float | None = None

    @overload
    def __call__(self, fn: Callable[P, I], /) -> StreamingFunctionTool[P, I]: ...

    @overload
    def __call__(self, fn: Callable[P, R], /) -> FunctionTool[P, R]: ...

    def __call__(self, fn: Callable[..., Any], /) -> FunctionTool[Any, Any]:
        return _make_tool(
            fn,
            self.name,
            self.description,
            self.strict,
            sys._getframe(1).f_locals,
            self.needs_approval,
            self.timeout,
        )


def _make_tool(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    strict: bool,
    localns: Mapping[str, Any] | None,
    needs_approval: ApprovalPolicy = False,
    timeout: float | None = None,
) -> FunctionTool[Any, Any]:
    if isinstance(fn, FunctionTool):
        fn = fn.__wrapped__
    cls = StreamingFunctionTool if inspect.isgeneratorfunction(fn) else FunctionTool
    return cls(
        fn,
        name=name,
        description=description,
        strict=strict,
        localns=localns,
        needs_approval=needs_approval,
        timeout=timeout,
    )


_NOT_ASKED = Decision("", resumes_tool=True)  # no approval needed: the call runs as it is

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
      ``get_weather: 'days' must be an integer (got 'three')``. A
      :class:`~agentkit.ChatModelAgent` sends it back to the model by default
      (``recover_tool_errors``).
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
        needs_approval: ApprovalPolicy = False,
        timeout: float | None = None,
    ) -> None:
        """Build the tool; prefer :func:`tool`, which picks the class for generator functions.

        ``localns`` is a namespace tried when an annotation names something that is not a
        global of the function's module (a class defined inside a function, for example);
        :func:`tool` passes the namespace it is called from. ``strict``, ``needs_approval``
        and ``timeout`` are as for :func:`tool`.
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
        self._needs_approval = check_policy(needs_approval, self._name)
        self._timeout = checked_timeout(timeout)

    @property
    def name(self) -> str:
        """The tool name the model calls."""
        return self._name

    @property
    def timeout(self) -> float | None:
        """The most seconds a call may take when an agent runs it (``None``: no limit of its own).

        The agent's ``tool_timeout`` applies to tools without one. See
        :class:`~agentkit.ChatModelAgent` for what happens to a call that takes longer.
        """
        return self._timeout

    def info(self) -> ToolInfo:
        """Return the name, description and JSON Schema parameters (a fresh copy each time)."""
        return ToolInfo(self._name, self._description, copy.deepcopy(self._parameters))

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Run the function with the model's JSON arguments and return its result as text.

        Raises:
            ToolArgumentsError: the arguments are not valid JSON or do not match the parameters.
            ToolError: the result cannot be encoded as JSON.
        """
        approved = self._approved(arguments)
        if isinstance(approved, str):
            return approved
        args, kwargs, decision = approved
        with running(decision):
            result = self._fn(*args, **kwargs)
        return _encode_result(self._name, result)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r})"

    def _approved(self, arguments: str) -> tuple[list[Any], dict[str, Any], Decision] | str:
        """Check the arguments, then ask for approval if needed.

        Returns the converted arguments to call the function with (the edited ones of an
        ``Approve(arguments=...)``) and the decision, or the tool message of a rejected call.
        """
        args, kwargs = self._convert(arguments)
        if self._needs_approval is False:
            return args, kwargs, _NOT_ASKED
        parsed = parse_object(self._name, arguments)
        decision = ask_approval(self._name, self._needs_approval, arguments, parsed)
        if decision.arguments is None:
            return decision.rejection
        if decision.arguments != arguments:
            args, kwargs = self._convert(decision.arguments)
        return args, kwargs, decision

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
                    f"{self._name}: arguments are not valid JSON: {exc} (got {show(arguments)})",
                    tool_name=self._name,
                ) from exc
            if type(data) is not dict:
                raise ToolArgumentsError(
                    f"{self._name}: arguments must be a JSON object, not {json_kind(data)} "
                    f"(got {show(arguments)})",
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
                        explain(exc, [("attr", name)], data, problems)
                        continue
            elif param.required:
                problems.append(f"'{name}' is required (got {show(data)})")
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
        approved = self._approved(arguments)
        if isinstance(approved, str):
            return stream_from_iterator(iter([approved]))
        args, kwargs, decision = approved
        with running(decision):
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
    hook: Hook | None  # None: the JSON value is passed as it is
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
    summary, param_docs = parse_docstring(inspect.getdoc(fn))
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
            schema = schema_of(annotation, localns, ())
        except Unsupported as exc:
            raise TypeError(
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


def _qualname(fn: object) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))


# --- results ------------------------------------------------------------------------------------


def _encode_result(name: str, result: Any) -> str:
    """A tool result as text: a str as it is, an enum as its value, anything else as JSON."""
    if isinstance(result, enum.Enum):
        result = result.value
    if isinstance(result, str):
        return str(result)
    try:
        return json.dumps(result, ensure_ascii=False, default=to_json)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ToolError(
            f"{name}: the result cannot be encoded as JSON ({exc}); return a str, or data made "
            "of dict, list, tuple, set, str, int, float, bool, None, enums and attrs instances",
            tool_name=name,
        ) from exc
