"""A tool whose children interrupt: :class:`CompositeInterrupt` (Eino's ``CompositeInterrupt``).

A tool that calls other tools (or agents, through :class:`~agentkit.AgentTool`) runs each of
them as a child call one level below its own (``tool:<name>:<id>``, as a ChatModelAgent's
calls are below it). A child that interrupts does not stop the tool: the tool goes on with its
other children, then pauses once for all of them, keeping its own state. Each child's
interrupt is its own root cause, with the tool's interrupt as its parent, and each is resumed
by its own id.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from agentkit._interrupt import InterruptSignal
from agentkit._points import PointResume
from agentkit._progress import save_point
from agentkit._runctx import RunFrame, RunKey, ToolCallFrame, current_frame, use_frame
from agentkit.errors import AgentKitRuntimeError, AgentKitTypeError, AgentKitValueError
from agentkit.schema import ContentPart
from agentkit.tools._function import as_tool

__all__ = ["CompositeInterrupt"]


class CompositeInterrupt:
    """Inside a tool: call child tools, and pause once for all the children that interrupted.

    Eino's ``tool.CompositeInterrupt``. Each :meth:`call` runs a child tool (a tool object, an
    :class:`~agentkit.AgentTool`, or a function, made a tool with ``as_tool``) at the address
    ``<this call>;tool:<name>:<call id>``. A child that calls :func:`~agentkit.interrupt`
    returns ``None`` here and the tool goes on; :meth:`raise_if_interrupted` then pauses the
    run for all of them at once, with ``info`` shown on the tool's own interrupt context (the
    parent of each child's) and ``state`` saved for the tool.

    Resumed, the tool runs again: each :meth:`call` of a child that interrupted resumes that
    child (``interrupt()`` returns its resume data when the resume targets it, and asks again
    when not). Children that had finished run again too: keep their results in ``state`` and
    read them back with :func:`~agentkit.get_interrupt_state`::

        @tool
        def book_trip(city: str) -> str:
            done = get_interrupt_state() or {}
            group = CompositeInterrupt("the trip needs approvals")
            for part in ("flight", "hotel"):
                if part not in done:
                    result = group.call(book[part], {"city": city})
                    if result is not None:
                        done[part] = result
            group.raise_if_interrupted(state=done)
            return f"{done['flight']}; {done['hotel']}"

    Args:
        info: shown on the tool's interrupt context (``InterruptContext.info``).

    Raises:
        RuntimeError: (from :meth:`call`) used outside a tool call of an agent run.
    """

    __slots__ = ("_calls", "_frame", "_info", "_interrupted")

    def __init__(self, info: Any = None) -> None:
        frame = current_frame()
        if frame is None or frame.tool is None:
            raise AgentKitRuntimeError(
                "CompositeInterrupt works only inside a tool call of an agent run"
            )
        self._frame: RunFrame = frame
        self._info = info
        self._calls: set[str] = set()
        self._interrupted: list[str] = []

    @property
    def interrupted(self) -> tuple[str, ...]:
        """The call ids of the children that interrupted so far, in order."""
        return tuple(self._interrupted)

    def call(
        self,
        tool: Any,
        arguments: str | Mapping[str, Any] = "{}",
        *,
        call_id: str | None = None,
    ) -> str | tuple[ContentPart, ...] | None:
        """Run ``tool`` as a child call; its result, or ``None`` if it interrupted.

        Args:
            tool: a tool object, or a function (made a tool with ``as_tool``).
            arguments: the JSON arguments, or a mapping to encode.
            call_id: the child's call id, unique in this tool call (default: the tool's
                name); a resumed run finds the child by it, so give the same id again.

        Raises:
            ValueError: ``call_id`` was used already by this tool call.
            Exception: whatever the child raised (other than an interrupt).
        """
        if not hasattr(tool, "info"):
            if not callable(tool):
                raise AgentKitTypeError(
                    f"CompositeInterrupt.call() takes a tool or a function (got {tool!r})"
                )
            tool = as_tool(tool)
        name = tool.info().name
        child_id = name if call_id is None else call_id
        if not isinstance(child_id, str) or not child_id or child_id in self._calls:
            raise AgentKitValueError(
                f"CompositeInterrupt.call(): call id {child_id!r} is "
                f"{'used already' if child_id in self._calls else 'not a non-empty string'}; "
                "give each child call its own call_id (a resumed run finds the child by it)"
            )
        self._calls.add(child_id)
        if not isinstance(arguments, str):
            arguments = json.dumps(dict(arguments))
        frame = self._frame
        parent = frame.tool
        assert parent is not None
        child_frame = frame.at_tool(
            ToolCallFrame(
                name=name,
                call_id=child_id,
                options=parent.options,
                resume=self._child_resume(frame, name, child_id),
                agent_name=parent.agent_name,
                history=parent.history,
                streaming=parent.streaming,
                forward=parent.forward,
                emit=parent.emit,
                call_key=RunKey.of_call(
                    parent.call_key, frame.address, name, child_id, frame.run_path, None
                ),
            )
        )
        invoke: Callable[..., Any] = getattr(tool, "invoke_content", None) or tool.invoke
        try:
            with use_frame(child_frame):
                result: str | tuple[ContentPart, ...] = invoke(arguments, **parent.options)
        except InterruptSignal:
            self._interrupted.append(child_id)
            return None
        return result

    def raise_if_interrupted(self, state: Any = None) -> None:
        """Pause the run for the children that interrupted (if any), saving ``state``.

        Returns when no child interrupted. ``state`` comes back in the resumed call through
        :func:`~agentkit.get_interrupt_state`.
        """
        if not self._interrupted:
            return
        frame = self._frame
        save_point(frame, state, info=self._info, flush=False)
        raise InterruptSignal(frame.address)

    @staticmethod
    def _child_resume(frame: RunFrame, name: str, call_id: str) -> PointResume | None:
        parent = frame.tool
        if frame.resume is None or parent is None or parent.resume is None:
            return None
        if not parent.resume.was_interrupted:
            return None
        return frame.resume.at((*frame.address, f"tool:{name}:{call_id}"))
