"""The ``tool`` decorator and ``as_tool`` (framework-internal; documented in
:mod:`agentkit.tools.function`, imported as ``agentkit.tool`` and ``agentkit.tools.as_tool``).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any, ParamSpec, TypeVar, overload

import attrs

from agentkit._lazy import present
from agentkit._throttle import ConcurrencyLimiter
from agentkit.errors import AgentKitTypeError
from agentkit.tools._approval import ApprovalPolicy, check_policy
from agentkit.tools._base import BaseTool
from agentkit.tools._function_tool import (
    FunctionTool,
    StreamingContentFunctionTool,
    StreamingFunctionTool,
    checked_concurrency,
    checked_idempotent,
    checked_timeout,
    is_generator_function,
)
from agentkit.tools._signature import yields_parts

__all__ = [
    "FunctionTool",
    "StreamingContentFunctionTool",
    "StreamingFunctionTool",
    "as_tool",
    "tool",
]


P = ParamSpec("P")
R = TypeVar("R")
I = TypeVar("I", bound=Iterator[Any])  # noqa: E741 - the conventional name for an iterator type
AI = TypeVar("AI", bound=AsyncIterator[Any])


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
    idempotent: bool | None = None,
    concurrency: ConcurrencyLimiter | None = None,
) -> StreamingFunctionTool[P, I]: ...


@overload
def tool(
    fn: Callable[P, AI],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
    needs_approval: ApprovalPolicy = False,
    timeout: float | None = None,
) -> StreamingFunctionTool[P, AI]: ...


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
    idempotent: bool | None = None,
    concurrency: ConcurrencyLimiter | None = None,
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
    idempotent: bool | None = None,
    concurrency: ConcurrencyLimiter | None = None,
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
    idempotent: bool | None = None,
    concurrency: ConcurrencyLimiter | None = None,
) -> FunctionTool[Any, Any] | _Decorator:
    """Make a tool of a Python function: its schema comes from the type hints and the docstring.

    Use it as ``@tool``, ``@tool()``, ``@tool(name=..., description=...)``, or call it:
    ``tool(fn, name=...)``. A generator function (plain or ``async``) becomes a
    :class:`~agentkit.tools.StreamingFunctionTool` (each yielded item is a chunk), or, when its
    return annotation names a content part among what it yields (``Iterator[str | ImagePart]``), a
    :class:`~agentkit.tools.StreamingContentFunctionTool` (each item is a part); any other
    function (plain or ``async``) a :class:`~agentkit.tools.FunctionTool`. Each stays
    callable like the function itself.

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
        idempotent: whether running a call twice does no harm (reading, computing, or writing
            with an idempotency key: see :func:`~agentkit.tool_call_key`). A call that had
            started but not finished when its process died is run again on recovery when its
            tool is idempotent; otherwise the recovered run interrupts with an
            :class:`~agentkit.UnfinishedToolCall` and a human decides. ``None`` (the default):
            ``True``, except for tools with ``needs_approval``, which default to ``False``.
        concurrency: a :class:`~agentkit.ConcurrencyLimit` (or
            :class:`~agentkit.integrations.redis.RedisConcurrencyLimit`): each call takes a
            slot before the function runs and gives it back when it returns (a generator:
            when its stream ends or is closed), so that no more calls run at once than the
            limit allows, among every tool, thread and run given the same limit. The wait
            for a slot comes after the arguments were checked and any approval was given;
            it is bounded by the tool's own ``timeout`` and, in a run, by the agent's
            ``tool_timeout`` and cancelled with the run (see :mod:`agentkit.throttle`).

    Raises:
        TypeError: ``fn`` is not a function, has ``*args``, or a parameter has an annotation
            that cannot be expressed in JSON (the message names the parameter and type).
        AgentConfigError: the name is not a valid tool name (a lambda needs ``name=``).
    """
    check_policy(needs_approval, "tool()")
    timeout = checked_timeout(timeout)
    checked_idempotent(idempotent)
    concurrency = checked_concurrency(concurrency)
    if fn is None:
        return _Decorator(
            name, description, strict, needs_approval, timeout, idempotent, concurrency
        )
    if isinstance(fn, str):
        raise AgentKitTypeError(
            f"tool() takes the function first; to name the tool write @tool(name={fn!r})"
        )
    return _make_tool(
        fn,
        name,
        description,
        strict,
        sys._getframe(1).f_locals,
        needs_approval,
        timeout,
        idempotent,
        concurrency,
    )


@attrs.frozen
class _Decorator:
    """What ``tool()`` and ``tool(name=..., description=...)`` return."""

    name: str | None
    description: str | None
    strict: bool
    needs_approval: ApprovalPolicy = False
    timeout: float | None = None
    idempotent: bool | None = None
    concurrency: ConcurrencyLimiter | None = None

    @overload
    def __call__(self, fn: Callable[P, I], /) -> StreamingFunctionTool[P, I]: ...

    @overload
    def __call__(self, fn: Callable[P, AI], /) -> StreamingFunctionTool[P, AI]: ...

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
            self.idempotent,
            self.concurrency,
        )


def _make_tool(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    strict: bool,
    localns: Mapping[str, Any] | None,
    needs_approval: ApprovalPolicy = False,
    timeout: float | None = None,
    idempotent: bool | None = None,
    concurrency: ConcurrencyLimiter | None = None,
) -> FunctionTool[Any, Any]:
    if isinstance(fn, FunctionTool):
        fn = fn.__wrapped__
    cls: type[FunctionTool[Any, Any]] = FunctionTool
    if is_generator_function(fn):
        # A generator annotated to yield parts streams them (a StreamableContentTool).
        content = yields_parts(fn, localns)
        cls = StreamingContentFunctionTool if content else StreamingFunctionTool
    return cls(
        fn,
        name=name,
        description=description,
        strict=strict,
        localns=localns,
        needs_approval=needs_approval,
        timeout=timeout,
        idempotent=idempotent,
        concurrency=concurrency,
    )


def as_tool(obj: BaseTool | Callable[..., Any]) -> BaseTool:
    """Return ``obj`` if it is a tool; make a plain function (or bound method) a tool with ``tool``.

    Agents call this on every entry of their tool list, so users may mix tool objects and
    functions::

        ChatModelAgent(..., tools=[search_tool, get_weather])

    Raises:
        TypeError: ``obj`` is neither a tool instance nor a function (a tool *class* is refused
            too: pass an instance).
    """
    if isinstance(obj, type):
        raise AgentKitTypeError(
            f"as_tool() got the class {obj.__qualname__}, not a tool: pass an instance "
            f"({obj.__qualname__}(...)) or a function"
        )
    if isinstance(obj, BaseTool):
        return obj
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        return tool(obj)
    raise AgentKitTypeError(
        f"as_tool() cannot make a tool of {obj!r} ({type(obj).__name__}): pass an object with an "
        "info() method and invoke() or stream() (an InvokableTool or StreamableTool), or a Python "
        "function or bound method to be wrapped with @tool"
    )


# Defined here (the classes in _function_tool); documented and imported as agentkit.tool and
# agentkit.tools.X.
present(
    (FunctionTool, StreamingContentFunctionTool, StreamingFunctionTool, as_tool), "agentkit.tools"
)
