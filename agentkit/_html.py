"""HTML for notebooks: messages, events, interrupts and live run transcripts (framework-internal).

Used by the ``_repr_html_`` methods of :class:`~agentkit.Message`, :class:`~agentkit.AgentEvent`
and :class:`~agentkit.InterruptInfo`, and by :func:`agentkit.display.live`. Every text is
escaped; styles are inline so the output looks the same in Jupyter, VS Code and exported HTML.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentkit.events import AgentEvent, InterruptInfo
    from agentkit.schema import Message

BOX = (
    "font-family: system-ui, sans-serif; font-size: 13px; line-height: 1.45; "
    "border-left: 3px solid #8aa4c8; padding: 4px 10px; margin: 4px 0"
)
WHO = "color: #666; font-size: 11px; text-transform: uppercase; letter-spacing: .04em"
LINE = "font-family: ui-monospace, monospace; font-size: 12px; color: #555; margin: 2px 0"
STYLES = {
    "call": LINE,
    "result": LINE,
    "transfer": LINE + "; color: #7a4b00",
    "exit": LINE,
    "interrupt": (
        "border: 2px solid #e0a000; background: #fff8e6; border-radius: 6px; padding: 6px 10px; "
        "margin: 4px 0"
    ),
    "error": LINE + "; color: #b00020",
}


def escape(value: Any) -> str:
    """``value`` as escaped HTML text (non-strings as JSON when possible)."""
    if not isinstance(value, str):
        try:
            value = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            value = repr(value)
    return html.escape(value)


def speech(who: str, text: str) -> str:
    """A block of text said by ``who``."""
    return (
        f'<div style="{BOX}"><div style="{WHO}">{escape(who)}</div>'
        f'<div style="white-space: pre-wrap">{escape(text)}</div></div>'
    )


def line(kind: str, text: str) -> str:
    """One line of a kind in :data:`STYLES` (tool call, result, transfer, ...)."""
    return f'<div class="agentkit-{kind}" style="{STYLES[kind]}">{escape(text)}</div>'


def message_lines(message: Message, who: str) -> list[tuple[str, str]]:
    """The (kind, text) lines of a whole message: its content, then its tool calls."""
    lines: list[tuple[str, str]] = []
    if message.role.value == "tool":
        lines.append(("result", f"{message.tool_name or 'tool'} returned: {message.content}"))
        return lines
    if message.content:
        lines.append(("speech", message.content))
    for call in message.tool_calls:
        lines.append(("call", f"{who} calls {call.function.name}({call.function.arguments})"))
    return lines


def interrupt_lines(info: InterruptInfo) -> list[tuple[str, str]]:
    """The lines of an interrupt: one per root-cause point, with its id."""
    contexts = [context for context in info.contexts if context.is_root_cause] or info.contexts
    if not contexts:
        return [("interrupt", f"interrupted: {info.data!r}")]
    return [
        ("interrupt", f"waiting for input: {_plain(context.info)}  [id {context.id}]")
        for context in contexts
    ]


def event_lines(event: AgentEvent, *, with_message: bool = True) -> list[tuple[str, str]]:
    """The (kind, text) lines of an event (its message unless ``with_message`` is false)."""
    who = event.agent_name or "agent"
    lines: list[tuple[str, str]] = []
    if with_message and event.output is not None and event.output.message_output is not None:
        try:
            lines.extend(message_lines(event.output.message_output.get_message(), who))
        except Exception as error:
            lines.append(("error", f"stream error: {type(error).__name__}: {error}"))
    elif with_message and event.output is not None:
        lines.extend(
            [("result", f"output: {_plain(event.output.customized_output)}")]
            if event.output.customized_output is not None
            else []
        )
    action = event.action
    if action is not None:
        if action.transfer_to_agent is not None:
            lines.append(
                ("transfer", f"{who} transfers to {action.transfer_to_agent.dest_agent_name}")
            )
        if action.exit:
            lines.append(("exit", f"{who} exits"))
        if action.break_loop is not None:
            lines.append(("exit", f"{who} breaks the loop"))
        if action.interrupted is not None:
            lines.extend(interrupt_lines(action.interrupted))
    if event.err is not None:
        lines.append(("error", f"error: {type(event.err).__name__}: {event.err}"))
    return lines


def render(lines: list[tuple[str, str]], who: str) -> str:
    """HTML of (kind, text) lines; ``speech`` lines are said by ``who``."""
    return "".join(
        speech(who, text) if kind == "speech" else line(kind, text) for kind, text in lines
    )


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else escape_json(value)


def escape_json(value: Any) -> str:
    """``value`` as JSON text when it can be, else its repr (not escaped)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
