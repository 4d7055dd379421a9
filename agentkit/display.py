"""Printing runs readably in a terminal or notebook: :func:`print_events`."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import TextIO

from agentkit.events import AgentEvent, MessageVariant
from agentkit.schema import Message, Role

__all__ = ["print_events"]


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
        speaker = event.agent_name or "agent"
        if show_run_path and event.run_path:
            speaker = " > ".join(str(step) for step in event.run_path)
        if speaker != last_speaker:
            out.write(f"\n== {speaker} ==\n")
            last_speaker = speaker
        variant = event.output.message_output if event.output is not None else None
        if variant is not None:
            _print_output(variant, out)
        if event.output is not None and event.output.customized_output is not None:
            out.write(f"   output: {event.output.customized_output!r}\n")
        action = event.action
        if action is not None:
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
        if event.err is not None:
            out.write(f"!! error: {type(event.err).__name__}: {event.err}\n")
        out.flush()
    if raise_errors:
        for event in reversed(seen):
            if event.err is not None:
                raise event.err
    return seen


def _print_output(variant: MessageVariant, out: TextIO) -> None:
    if variant.is_streaming and variant.message_stream is not None:
        keep, read = variant.message_stream.copy(2)
        variant.message_stream = keep
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
            _print_calls(message, out)
        return
    message = variant.get_message()
    if message.content or variant.role is Role.TOOL:
        out.write(f"{_label(variant)}{message.content}\n")
    _print_calls(message, out)


def _label(variant: MessageVariant) -> str:
    if variant.role is Role.TOOL:
        return f"   {variant.tool_name} returned: "
    return ""


def _print_calls(message: Message, out: TextIO) -> None:
    for call in message.tool_calls:
        out.write(f"-> calls {call.function.name}({call.function.arguments})\n")
