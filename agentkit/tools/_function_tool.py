"""The function tool classes: :class:`FunctionTool`, :class:`StreamingFunctionTool` and
:class:`StreamingContentFunctionTool`.

Framework-internal; the public module is :mod:`agentkit.tools.function`, which also has the
:func:`~agentkit.tool` decorator that makes them.
"""

from __future__ import annotations

import copy
import enum
import functools
import inspect
import json
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Generic, ParamSpec, TypeVar

from agentkit._jsonable import dumps as json_dumps
from agentkit._jsonable import unencodable_part
from agentkit._throttle import ConcurrencyLimiter, Slot
from agentkit._waiting import CallSite, admitted
from agentkit.errors import (
    AgentConfigError,
    AgentKitTypeError,
    ContentPartError,
    ToolArgumentsError,
    ToolError,
)
from agentkit.schema import (
    AudioPart,
    ContentPart,
    FilePart,
    ImagePart,
    Message,
    Role,
    TextPart,
    ToolInfo,
    describe_part,
)
from agentkit.streams import StreamReader, stream_from_iterator
from agentkit.tools._approval import (
    ApprovalPolicy,
    Decision,
    ask_approval,
    check_policy,
    parse_object,
    running,
)
from agentkit.tools._async import AsyncItems, await_in_loop
from agentkit.tools._convert import explain, json_kind, show
from agentkit.tools._signature import check_function, plan_signature, qualname

__all__ = [
    "FunctionTool",
    "StreamingContentFunctionTool",
    "StreamingFunctionTool",
    "checked_concurrency",
    "checked_idempotent",
    "checked_timeout",
    "is_generator_function",
]

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def checked_idempotent(idempotent: object) -> bool | None:
    """Return ``idempotent`` if it is ``True``, ``False`` or ``None``; else raise TypeError."""
    if idempotent is None or isinstance(idempotent, bool):
        return idempotent
    raise AgentKitTypeError(
        f"idempotent must be True, False or None (None: True unless the tool needs approval), "
        f"got {idempotent!r}"
    )


def checked_timeout(timeout: object) -> float | None:
    """A tool time limit as seconds (``None``: no limit); ``AgentConfigError`` when invalid."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise AgentConfigError(
            f"timeout must be a number of seconds > 0, or None for no limit (got {timeout!r})"
        )
    return float(timeout)


def checked_concurrency(concurrency: object) -> ConcurrencyLimiter | None:
    """A tool's ``concurrency`` limit; ``TypeError`` when it is not a ``ConcurrencyLimiter``."""
    if concurrency is None or isinstance(concurrency, ConcurrencyLimiter):
        return concurrency
    raise AgentKitTypeError(
        "concurrency= takes a ConcurrencyLimit, a RedisConcurrencyLimit or another "
        f"ConcurrencyLimiter, shared by the tools given the same one (got {concurrency!r})"
    )

def is_generator_function(fn: object) -> bool:
    """Whether calling ``fn`` makes a generator or an async generator (a streaming tool)."""
    return inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)


_NOT_ASKED = Decision("", resumes_tool=True)  # no approval needed: the call runs as it is

# --- the tools ----------------------------------------------------------------------------------


class FunctionTool(Generic[P, R]):
    """A Python function as an :class:`~agentkit.InvokableTool`; made by :func:`tool`.

    ``invoke`` parses the JSON arguments, checks and converts them to the annotated types
    (unknown arguments are ignored; parameters that were not sent get their defaults), calls the
    function and returns its result: a ``str`` as it is, an enum as its value, anything else as
    JSON: attrs and dataclass instances and pydantic models as objects, sets and tuples as
    arrays, ``datetime``/``date``/``time`` as ISO 8601 strings, ``timedelta`` as an ISO 8601
    duration, ``Decimal``, ``UUID`` and paths as strings.

    Errors:

    * Arguments that do not match the parameters raise
      :class:`~agentkit.errors.ToolArgumentsError` before the function runs, with a message
      for the model that names the tool, the argument and what was expected, e.g.
      ``get_weather: 'days' must be an integer (got 'three')``. A
      :class:`~agentkit.ChatModelAgent` sends it back to the model by default
      (``recover_tool_errors``).
    * A result that cannot be JSON-encoded raises :class:`~agentkit.errors.ToolError` naming
      the tool, the part of the result and its type, e.g. ``when: the result cannot be
      encoded as JSON: result['at'] is of type Clock, which has no JSON form; return ...``.
    * Exceptions raised by the function propagate unchanged (the agent running the tool adds
      the tool-call id). Only ``Exception`` subclasses are ever caught by the tool, so
      ``BaseException``-based signals such as interrupts pass through untouched.

    ``**tool_options`` passed to ``invoke`` are ignored: a function tool reads whatever it
    needs from the run context.

    An ``async def`` function runs as a task on agentkit's event loop (one per process, in
    its own thread, started on first use; never the caller's loop), in the caller's context:
    session values, tool options and :func:`~agentkit.interrupt` work as in a plain tool.
    ``invoke`` waits for the task. A time limit of the call or an immediate cancel of the run
    cancels the task (``asyncio.CancelledError`` at its ``await``) and ``invoke`` raises
    :class:`~agentkit.AgentCancelledError` once the coroutine ended; its exceptions propagate
    as they are. Awaiting the tool object itself (``await my_tool(...)``) calls the function.
    ``invoke`` called on the loop's own thread (from inside another async tool) raises
    ``RuntimeError``: await the function there instead.

    The object is still the function: calling it calls the function directly, and
    ``__wrapped__``, ``__name__``, ``__doc__`` and ``__module__`` are the function's.
    Nothing in a tool changes after it is made: invoke it from as many threads as you like.
    """

    __wrapped__: Callable[P, R]
    __name__: str
    __qualname__: str

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
        idempotent: bool | None = None,
        concurrency: ConcurrencyLimiter | None = None,
    ) -> None:
        """Build the tool; prefer :func:`tool`, which picks the class for generator functions.

        ``localns`` is a namespace tried when an annotation names something that is not a
        global of the function's module (a class defined inside a function, for example);
        :func:`tool` passes the namespace it is called from. ``strict``, ``needs_approval``,
        ``timeout``, ``idempotent`` and ``concurrency`` are as for :func:`tool`.
        """
        check_function(fn)
        if is_generator_function(fn) and not isinstance(self, StreamingFunctionTool):
            raise AgentKitTypeError(
                f"{qualname(fn)} is a generator function: make it a StreamingFunctionTool "
                "(tool() does this)"
            )
        functools.update_wrapper(self, fn)
        tool_name = fn.__name__ if name is None else name
        if not isinstance(tool_name, str) or _TOOL_NAME.fullmatch(tool_name) is None:
            raise AgentConfigError(
                f"{tool_name!r} is not a valid tool name for {qualname(fn)}: use 1-64 letters, "
                "digits, '_' or '-' (pass name=...)"
            )
        plan = plan_signature(fn, localns, strict)
        self._fn = fn
        self._name = tool_name
        self._description = plan.description if description is None else description
        self._parameters = plan.schema
        self._params = plan.params
        self._needs_approval = check_policy(needs_approval, self._name)
        self._timeout = checked_timeout(timeout)
        given = checked_idempotent(idempotent)
        self._idempotent = (self._needs_approval is False) if given is None else given
        self._concurrency = checked_concurrency(concurrency)
        self._site = CallSite("Tool", tool_name, type(self).__name__)
        self._is_async = inspect.iscoroutinefunction(fn)

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

    @property
    def idempotent(self) -> bool:
        """Whether a call may run again after a crash cut it short (see :func:`tool`).

        ``idempotent=None`` made it ``True``, unless the tool needs approval.
        """
        return self._idempotent

    @property
    def concurrency(self) -> ConcurrencyLimiter | None:
        """The concurrency limit each call takes a slot of while the function runs (or ``None``)."""
        return self._concurrency

    def info(self) -> ToolInfo:
        """Return the name, description and JSON Schema parameters (a fresh copy each time)."""
        return ToolInfo(self._name, self._description, copy.deepcopy(self._parameters))

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Run the function with the model's JSON arguments and return its result as text
        (a result holding images, files or sounds: its text, then a placeholder line per
        medium, such as ``[image image/png, 70 bytes]``; agents use :meth:`invoke_content`).

        Raises:
            ToolArgumentsError: the arguments are not valid JSON or do not match the parameters.
            ToolError: the result cannot be encoded as JSON.
        """
        return content_text(self.invoke_content(arguments, **tool_options))

    def invoke_content(self, arguments: str, **tool_options: Any) -> str | tuple[ContentPart, ...]:
        """Run the function with the model's JSON arguments and return its result as text,
        or as parts when it returned a part or a list holding parts (a ``str`` in that list
        is a :class:`~agentkit.TextPart`, any other item its JSON text).

        Raises:
            ToolArgumentsError: the arguments are not valid JSON or do not match the parameters.
            ToolError: the result cannot be encoded as JSON, or holds a part that is refused
                (the part's error is the cause).
        """
        approved = self._approved(arguments)
        if isinstance(approved, str):
            return approved
        args, kwargs, decision = approved
        limit = self._concurrency
        if limit is None:
            with running(decision):
                result = self._call(args, kwargs)
        else:
            with self._slot(limit), running(decision):
                result = self._call(args, kwargs)
        if isinstance(result, _PART_TYPES) or (
            isinstance(result, (list, tuple)) and any(isinstance(i, _PART_TYPES) for i in result)
        ):
            return _encode_parts(self._name, result)
        return _encode_result(self._name, result)

    def _call(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Call the function: a coroutine function as a task on agentkit's asyncio loop."""
        if not self._is_async:
            return self._fn(*args, **kwargs)
        coroutine_function: Callable[..., Awaitable[Any]] = self._fn  # type: ignore[assignment]
        return await_in_loop(functools.partial(coroutine_function, *args, **kwargs), self._name)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self._fn(*args, **kwargs)

    def _slot(self, limit: ConcurrencyLimiter) -> Slot:
        """Wait for a slot of the tool's ``concurrency`` limit, at most its ``timeout``."""
        timeout = self._timeout
        return admitted(lambda: limit.acquire(timeout), limit, "concurrency", self._site)

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
            raise AgentKitTypeError(
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
    """A generator function as a :class:`~agentkit.StreamableTool`; made by :func:`tool`.

    ``stream`` checks and converts the arguments at once (raising
    :class:`~agentkit.errors.ToolArgumentsError` before anything runs), then returns a reader
    that runs the generator lazily, in the thread that reads: each yielded item is one chunk,
    a ``str`` as it is, anything else JSON-encoded as for :class:`FunctionTool`. An exception
    raised by the generator is the stream's error. Closing the reader closes the generator.
    An async generator (``async def`` with ``yield``) runs on agentkit's event loop, one item
    per step, with the cancel rules of async :class:`FunctionTool` calls.

    ``invoke`` returns the chunks joined with no separator, which is what Eino does when a
    streaming tool is called by an agent that does not stream; an agent that streams calls
    ``stream``.
    """

    def stream(self, arguments: str, **tool_options: Any) -> StreamReader[str]:
        """Run the generator with the model's JSON arguments; its items are the chunks.

        Raises:
            ToolArgumentsError: the arguments are not valid JSON or do not match the parameters.
        """
        return self._run(arguments, _encode_chunks, str)

    def _run(
        self,
        arguments: str,
        encode: Callable[[str, Iterator[Any]], Iterator[T]],
        refused: Callable[[str], T],
    ) -> StreamReader[T]:
        """The generator's items, each made a chunk by ``encode``; a refused approval's text
        as the one chunk ``refused`` makes of it."""
        approved = self._approved(arguments)
        if isinstance(approved, str):
            return stream_from_iterator(iter([refused(approved)]))
        args, kwargs, decision = approved
        limit = self._concurrency
        if limit is None:
            with running(decision):
                produced: Any = self._fn(*args, **kwargs)
            return stream_from_iterator(encode(self._name, self._items(produced)))
        # The slot is held while the generator runs: until the stream ends or is closed.
        slot = self._slot(limit)
        try:
            with running(decision):
                produced = self._fn(*args, **kwargs)
        except BaseException:
            slot.release()
            raise
        return stream_from_iterator(
            encode(self._name, self._items(produced)), on_close=slot.release
        )

    def _items(self, produced: Any) -> Iterator[Any]:
        """The generator's items; an async generator's are read on agentkit's asyncio loop."""
        return AsyncItems(produced, self._name) if inspect.isasyncgen(produced) else produced

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Run the generator to its end and return all chunks joined."""
        return "".join(self.stream(arguments))

    def invoke_content(
        self, arguments: str, **tool_options: Any
    ) -> str | tuple[ContentPart, ...]:
        """As :meth:`invoke`: this tool's chunks are text (a
        :class:`StreamingContentFunctionTool`'s are parts)."""
        return "".join(self.stream(arguments))


class StreamingContentFunctionTool(StreamingFunctionTool[P, R]):
    """A generator function that yields content parts, as a
    :class:`~agentkit.tools.StreamableContentTool`; made by :func:`tool` for a generator whose
    return annotation names a part type among what it yields (``Iterator[str | ImagePart]``,
    ``Iterator[TextPart | ImagePart]``, ``AsyncIterator[ImagePart]``...).

    :meth:`stream_content` streams the items as parts: a part as it is (not copied), a
    ``str`` as a :class:`~agentkit.TextPart`, anything else as the
    :class:`~agentkit.TextPart` of its JSON. :meth:`invoke_content` returns them joined (the
    text when there is no image, file or sound); :meth:`stream` and :meth:`invoke` are the
    text forms, with a placeholder line for each image, file or sound.
    """

    def stream_content(self, arguments: str, **tool_options: Any) -> StreamReader[ContentPart]:
        """Run the generator with the model's JSON arguments; its items are the chunks.

        Raises:
            ToolArgumentsError: the arguments are not valid JSON or do not match the parameters.
        """
        return self._run(arguments, _part_chunks, TextPart)

    def stream(self, arguments: str, **tool_options: Any) -> StreamReader[str]:
        """The text form of :meth:`stream_content`: each part's text, or a placeholder line
        for an image, file or sound."""
        parts = self.stream_content(arguments, **tool_options)
        return stream_from_iterator(
            (content_text((part,)) for part in parts), on_close=parts.close
        )

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Run the generator to its end; the text form of all its parts."""
        return content_text(self.invoke_content(arguments, **tool_options))

    def invoke_content(
        self, arguments: str, **tool_options: Any
    ) -> str | tuple[ContentPart, ...]:
        """Run the generator to its end; all its parts joined (adjacent texts merged), or
        the text when there is no image, file or sound."""
        joined: list[ContentPart] = []
        for part in self.stream_content(arguments, **tool_options):
            last = joined[-1] if joined else None
            if type(part) is TextPart and type(last) is TextPart:
                joined[-1] = TextPart(last.text + part.text)
            else:
                joined.append(part)
        if all(type(part) is TextPart for part in joined):
            return "".join(part.text for part in joined if type(part) is TextPart)
        return tuple(joined)


def _part_chunks(name: str, items: Iterator[Any]) -> Iterator[ContentPart]:
    try:
        for item in items:
            if isinstance(item, _PART_TYPES):
                yield item
            else:
                yield TextPart(_encode_result(name, item))
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()


def _encode_chunks(name: str, items: Iterator[Any]) -> Iterator[str]:
    try:
        for item in items:
            yield _encode_result(name, item)
    finally:
        close = getattr(items, "close", None)
        if close is not None:
            close()


# --- results ------------------------------------------------------------------------------------


_ENCODABLE = (
    "dict (str keys), list, tuple, set, str, int, float, bool, None, enums, datetime, date, "
    "time, timedelta, Decimal, UUID, pathlib paths, attrs and dataclass instances and pydantic "
    "models"
)


_PART_TYPES = (TextPart, ImagePart, FilePart, AudioPart)


def content_text(content: str | tuple[ContentPart, ...]) -> str:
    """The text form of a tool's content: its text parts, then a placeholder line per
    image, file or sound."""
    if isinstance(content, str):
        return content
    text = "".join(part.text for part in content if isinstance(part, TextPart))
    media = [describe_part(part) for part in content if not isinstance(part, TextPart)]
    return "\n".join([text, *media] if text else media)


def _encode_parts(name: str, result: Any) -> tuple[ContentPart, ...]:
    """A result holding parts as the tool message's parts (other items as their text)."""
    items = [result] if isinstance(result, _PART_TYPES) else list(result)
    parts = [
        item if isinstance(item, (*_PART_TYPES, str)) else _encode_result(name, item)
        for item in items
    ]
    try:
        return Message(Role.TOOL, parts=parts).parts
    except ContentPartError as error:
        raise ToolError(f"{name}: the result cannot be sent: {error}", tool_name=name) from error


def _encode_result(name: str, result: Any) -> str:
    """A tool result as text: a str as it is, an enum as its value, anything else as JSON.

    Raises:
        ToolError: a part of the result has no JSON form; the message names the tool, the
            part and its type.
    """
    if isinstance(result, enum.Enum):
        result = result.value
    if isinstance(result, str):
        return str(result)
    try:
        return json_dumps(result, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError) as exc:
        part = None if isinstance(exc, (ValueError, RecursionError)) else unencodable_part(result)
        if part is not None:
            what = f"{part}, which has no JSON form"
        elif isinstance(exc, ValueError):
            what = "the result contains itself"
        else:
            what = str(exc)
        raise ToolError(
            f"{name}: the result cannot be encoded as JSON: {what}; return a str, or data "
            f"made of {_ENCODABLE}",
            tool_name=name,
        ) from exc
