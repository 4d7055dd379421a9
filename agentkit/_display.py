"""Showing runs readably: :func:`print_events` (a terminal) and :func:`live` (a notebook).

The definitions behind :mod:`agentkit.display`, whose docstring documents them.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import Any, Protocol, TextIO

from agentkit import _html
from agentkit._events import AgentAction, AgentEvent, MessageVariant, _event_html_lines
from agentkit._lazy import present
from agentkit.schema import Message, Role, TextPart, describe_part

__all__ = [
    "live",
    "print_events",
    "UPDATE_INTERVAL",
]


def print_events(
    events: Iterable[AgentEvent],
    *,
    file: TextIO | None = None,
    show_run_path: bool = False,
    raise_errors: bool = True,
) -> list[AgentEvent]:
    """Consume a run, print it as it happens, and return its events.

    Streamed output is printed token by token as it arrives; tool calls, tool results,
    transfers, exits, interrupts and errors get a line each. The returned events stay
    usable: streams are copied, not consumed (``event.get_message()`` still works).

    A run that failed raises its error once everything is printed (the error of the last
    event that has one), so code after the call only runs for a run that finished (or
    was interrupted). With ``raise_errors=False`` the events are returned instead, the error
    on its event's ``err``.

    Example::

        events = print_events(runner.query("What's the weather in Paris?"))
        answer = events[-1].get_message()
    """
    out = file if file is not None else sys.stdout
    seen: list[AgentEvent] = []
    last_speaker = ""
    for event in events:
        seen.append(event)
        speaker = _speaker_of(event, show_run_path)
        if speaker != last_speaker:
            out.write(f"\n== {speaker} ==\n")
            last_speaker = speaker
        _print_event(event, out)
        out.flush()
    if raise_errors:
        for event in reversed(seen):
            if event.err is not None:
                raise event.err
    return seen


def _speaker_of(event: AgentEvent, show_run_path: bool) -> str:
    """The heading an event is printed under: its agent, or its run path when asked for."""
    if show_run_path and event.run_path:
        return " > ".join(str(step) for step in event.run_path)
    return event.agent_name or "agent"


def _print_event(event: AgentEvent, out: TextIO) -> None:
    """Print one event's output, action and error (the heading is printed by the caller)."""
    if event.output is not None:
        if event.output.message_output is not None:
            _print_output(event.output.message_output, out)
        if event.output.customized_output is not None:
            out.write(f"   output: {event.output.customized_output!r}\n")
    if event.action is not None:
        _print_action(event.action, out)
    if event.err is not None:
        out.write(f"!! error: {type(event.err).__name__}: {event.err}\n")


def _print_action(action: AgentAction, out: TextIO) -> None:
    """Print a line for each thing an action does: transfer, exit, break loop, interrupt."""
    if action.transfer_to_agent is not None:
        out.write(f"-> transfer to {action.transfer_to_agent.dest_agent_name}\n")
    if action.exit:
        out.write("-> exit\n")
    if action.break_loop is not None:
        out.write(f"-> break loop (from {action.break_loop.from_agent})\n")
    if action.interrupted is not None:
        out.write("-> interrupted, waiting for input:\n")
        for context in action.interrupted.contexts:
            out.write(f"   [{context.id}] {context.info}\n")


def _print_output(variant: MessageVariant, out: TextIO) -> None:
    if variant.is_streaming and variant.message_stream is not None:
        read = variant.open_stream()  # a reader of its own: the event's stream stays unread
        label = _label(variant)
        wrote = bool(label)
        out.write(label)
        chunks: list[Message] = []
        try:
            for chunk in read:
                chunks.append(chunk)
                if chunk.content:
                    out.write(chunk.content)
                    out.flush()
                    wrote = True
        except Exception as error:
            out.write(f"\n!! stream error: {type(error).__name__}: {error}\n")
            return
        if wrote:
            out.write("\n")
        message = variant.get_message() if chunks else None
        if message is not None:
            _print_media(message, out)
            _print_calls(message, out)
        return
    message = variant.get_message()
    if message.content or variant.role is Role.TOOL:
        out.write(f"{_label(variant)}{message.content}\n")
    _print_media(message, out)
    _print_calls(message, out)


def _print_media(message: Message, out: TextIO) -> None:
    """A placeholder line per image, file or sound: its kind, type and size, never bytes."""
    for part in message.parts:
        if type(part) is not TextPart:
            out.write(f"   {describe_part(part)}\n")


def _label(variant: MessageVariant) -> str:
    if variant.role is Role.TOOL:
        return f"   {variant.tool_name} returned: "
    return ""


def _print_calls(message: Message, out: TextIO) -> None:
    for call in message.tool_calls:
        out.write(f"-> calls {call.function.name}({call.function.arguments})\n")


# --- live display in notebooks ---------------------------------------------------------------

UPDATE_INTERVAL = 0.05
"""Seconds between two updates of a live display while tokens stream (events always update)."""


class _Handle(Protocol):
    def update(self, obj: Any) -> None: ...


def live(
    events: Iterable[AgentEvent],
    *,
    file: TextIO | None = None,
    show_run_path: bool = False,
    raise_errors: bool = True,
) -> list[AgentEvent]:
    """Consume a run and show it live; return its events (like :func:`print_events`).

    In a Jupyter notebook the run is one cell output, updated in place as tokens stream in and
    tool calls, tool results, transfers, interrupts and errors arrive; it renders as HTML, with
    a plain-text fallback for front ends without HTML. Anywhere else (a terminal, a script)
    this is :func:`print_events`, which prints plain text to ``file``.

    A run that failed raises its error at the end unless ``raise_errors=False``; the returned
    events stay usable (streams are copied, not consumed).

    Example::

        events = live(runner.query("What's the weather in Paris?"))
    """
    handle = _open_display()
    if handle is None:
        return print_events(
            events, file=file, show_run_path=show_run_path, raise_errors=raise_errors
        )
    transcript = _Transcript()
    handle.update(transcript)
    seen: list[AgentEvent] = []
    for event in events:
        seen.append(event)
        who = event.agent_name or "agent"
        if show_run_path and event.run_path:
            who = " > ".join(str(step) for step in event.run_path)
        variant = event.output.message_output if event.output is not None else None
        streamed = False
        if variant is not None and variant.is_streaming and variant.message_stream is not None:
            read = variant.open_stream()  # a reader of its own: the event's stream stays unread
            streamed = True
            shown = time.monotonic()
            try:
                for chunk in read:
                    if chunk.content:
                        transcript.token(who, chunk.content)
                        if time.monotonic() - shown >= UPDATE_INTERVAL:
                            handle.update(transcript)
                            shown = time.monotonic()
            except Exception:
                read.close()  # the event's own lines report the stream's error
        transcript.event(event, who, streamed=streamed)
        handle.update(transcript)
    transcript.done = True
    handle.update(transcript)
    if raise_errors:
        for event in reversed(seen):
            if event.err is not None:
                raise event.err
    return seen


class _Transcript:
    """A run as it grows: said text and event lines; HTML in notebooks, text elsewhere.

    :func:`live` fills one and redisplays it after each change.
    """

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, str]] = []  # (kind, who, text)
        self._open = False  # the last line is a speech still receiving tokens
        self.done = False

    def token(self, who: str, text: str) -> None:
        """Add streamed text said by ``who``."""
        if self._open and self.lines[-1][1] == who:
            kind, speaker, said = self.lines[-1]
            self.lines[-1] = (kind, speaker, said + text)
        else:
            self.lines.append(("speech", who, text))
            self._open = True

    def event(self, event: AgentEvent, who: str, *, streamed: bool) -> None:
        """Add the lines of ``event`` (its text too, unless it arrived as tokens)."""
        self._open = False
        for kind, text in _event_html_lines(event):
            if kind == "speech" and streamed:
                continue
            self.lines.append((kind, who, text))

    def _repr_html_(self) -> str:
        body = "".join(
            _html.speech(who, text)
            if kind == "speech"
            else _html.media(kind, text)
            if kind in ("image", "audio")
            else _html.line(kind, text)
            for kind, who, text in self.lines
        )
        state = "" if self.done else f'<div style="{_html.LINE}">running\u2026</div>'
        return f'<div class="agentkit-live">{body}{state}</div>'

    def __repr__(self) -> str:
        rows = [
            f"{who}: {text}" if kind == "speech" else f"  {text}"
            for kind, who, text in self.lines
            if kind not in ("image", "audio")  # the "media" line before says what it is
        ]
        if not self.done:
            rows.append("  running...")
        return "\n".join(rows)


def _open_display() -> _Handle | None:
    """A display handle in a Jupyter kernel (one output, updated in place), else ``None``."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    shell = ipython.get_ipython()
    if shell is None or not shell.has_trait("kernel"):
        return None
    import importlib

    display: Any = importlib.import_module("IPython.display").display
    handle: _Handle = display(_Transcript(), display_id=True)
    return handle

present(
    (
        print_events,
    ),
    "agentkit",
)

present(
    (
        live,
    ),
    "agentkit.display",
)
