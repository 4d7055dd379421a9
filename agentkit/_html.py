"""HTML for notebooks: the building blocks of transcripts (framework-internal).

A transcript is a list of ``(kind, text)`` lines; :func:`render` turns it into HTML. The
lines of a message, an event or an interrupt are made next to their types
(``schema._message_html_lines``, ``events._event_html_lines``, ``events._interrupt_html_lines``),
so this module imports nothing of agentkit and sits below them all. Used by the
``_repr_html_`` methods of :class:`~agentkit.Message`, :class:`~agentkit.AgentEvent` and
:class:`~agentkit.InterruptInfo`, and by :func:`agentkit.display.live`. Every text is escaped;
styles are inline so the output looks the same in Jupyter, VS Code and exported HTML.
"""

from __future__ import annotations

import html
import json
from typing import Any

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
    "media": LINE + "; font-style: italic",
}
IMAGE = "max-width: 480px; max-height: 480px; margin: 4px 0; display: block"


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


def image(src: str) -> str:
    """An inline image from ``src`` (a ``data:`` URL or an ``http(s)`` URL)."""
    return f'<img src="{html.escape(src, quote=True)}" style="{IMAGE}">'


def audio(src: str) -> str:
    """An audio player for ``src`` (a ``data:`` URL)."""
    return f'<audio controls src="{html.escape(src, quote=True)}" style="margin: 4px 0"></audio>'


def media(kind: str, text: str) -> str:
    """The HTML of an ``image`` or ``audio`` line (the URL it holds shown as media)."""
    return image(text) if kind == "image" else audio(text)


def render(lines: list[tuple[str, str]], who: str) -> str:
    """HTML of (kind, text) lines; ``speech`` lines are said by ``who``, ``image`` and
    ``audio`` lines show the media at the URL they hold."""
    return "".join(
        speech(who, text)
        if kind == "speech"
        else media(kind, text)
        if kind in ("image", "audio")
        else line(kind, text)
        for kind, text in lines
    )


def plain(value: Any) -> str:
    """``value`` as text: strings as they are, anything else as JSON or its repr."""
    return value if isinstance(value, str) else escape_json(value)


def escape_json(value: Any) -> str:
    """``value`` as JSON text when it can be, else its repr (not escaped)."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
