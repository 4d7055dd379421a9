"""Which language the built-in prompts are in (framework-internal; see :mod:`agentkit.language`).

The setting is process-wide, read when a built-in component makes its prompts (a deep agent,
a plan-execute agent, a middleware: when it is built; the transfer instruction: when an agent
with transfer targets runs). A component given ``language=`` uses that one instead.
"""

from __future__ import annotations

import threading

from agentkit.errors import AgentKitValueError

__all__ = ["LANGUAGES", "checked", "get_language", "resolve", "set_language"]

LANGUAGES = ("en", "zh")
"""The languages the built-in prompts are written in: English and Chinese."""

_lock = threading.Lock()
_current = "en"


def checked(language: object) -> str:
    """``language`` if it is one of :data:`LANGUAGES`; an error saying which are otherwise."""
    if language not in LANGUAGES:
        raise AgentKitValueError(
            f"unknown language {language!r}: the built-in prompts are in "
            f"{' and '.join(map(repr, LANGUAGES))} (English, Chinese)"
        )
    assert isinstance(language, str)
    return language


def set_language(language: str) -> None:
    """Make ``language`` the language of the built-in prompts, for this process."""
    global _current
    language = checked(language)
    with _lock:
        _current = language


def get_language() -> str:
    """The language of the built-in prompts (``"en"`` unless :func:`set_language` changed it)."""
    return _current


def resolve(language: str | None) -> str:
    """``language``, or the process's when it is ``None``."""
    return _current if language is None else checked(language)
