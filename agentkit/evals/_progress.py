"""Progress of an evaluation: a one-line bar in terminals, an updating HTML bar in notebooks.

No dependency: the terminal bar rewrites one line with ``\\r``; the notebook bar is an HTML
``<progress>`` element updated in place through IPython's display handles (only when
running inside a Jupyter kernel, where IPython is loaded already).
"""

from __future__ import annotations

import html
import sys
import time
from typing import IO, Any, Protocol

import attrs

from agentkit.errors import AgentKitTypeError

_REDRAW = 0.1  # seconds between redraws when only the clock changed
_BAR = 24


class Progress(Protocol):
    """Shows how far an evaluation got; called from the thread that waits for the cases."""

    def update(self, done: int, passed: int, failed: int) -> None:
        """Show ``done`` cases of the total finished, so many passed and failed."""

    def close(self) -> None:
        """Show the final state and stop."""


def make_progress(setting: bool | IO[str] | None, total: int, name: str | None) -> Progress | None:
    """The progress display ``setting`` asks for.

    ``None``: a notebook bar inside Jupyter, a terminal bar when stderr is a terminal, else
    nothing; ``True``: the same, with a terminal bar on stderr even when it is not a
    terminal; ``False``: nothing; a text stream: a terminal bar written to it.
    """
    if setting is False:
        return None
    if setting is None or setting is True:
        if _notebook_shell() is not None:
            return NotebookProgress(total, name)
        if setting is None and not _is_terminal(sys.stderr):
            return None
        return TerminalProgress(sys.stderr, total, name)
    if not hasattr(setting, "write"):
        raise AgentKitTypeError(
            f"progress must be True, False, None or a text stream (got {setting!r})"
        )
    return TerminalProgress(setting, total, name)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def _notebook_shell() -> Any:
    """The running Jupyter kernel's IPython shell, or ``None`` (IPython is not imported here)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return None
    shell = ipython.get_ipython()
    if shell is None or not shell.has_trait("kernel"):
        return None
    return shell


def _label(name: str | None) -> str:
    return f"eval {name!r}" if name else "eval"


class TerminalProgress:
    """``eval 'name' [#######.........] 7/20  6 passed  1 failed  3.2 s`` on one line."""

    def __init__(self, stream: IO[str], total: int, name: str | None) -> None:
        self._stream = stream
        self._total = total
        self._name = name
        self._start = time.monotonic()
        self._drawn = ""
        self._last = 0.0
        self._counts = (0, 0, 0)

    def update(self, done: int, passed: int, failed: int) -> None:
        now = time.monotonic()
        counts = (done, passed, failed)
        if counts == self._counts and now - self._last < _REDRAW:
            return
        self._counts = counts
        self._last = now
        self._draw(now)

    def _draw(self, now: float) -> None:
        done, passed, failed = self._counts
        filled = _BAR * done // self._total if self._total else _BAR
        line = (
            f"{_label(self._name)} [{'#' * filled}{'.' * (_BAR - filled)}] {done}/{self._total}"
            f"  {passed} passed  {failed} failed  {now - self._start:.1f} s"
        )
        padding = " " * max(0, len(self._drawn) - len(line))
        self._stream.write(f"\r{line}{padding}")
        self._stream.flush()
        self._drawn = line

    def close(self) -> None:
        self._draw(time.monotonic())
        self._stream.write("\n")
        self._stream.flush()


@attrs.frozen
class _Bar:
    """One state of the notebook bar: HTML for the notebook, text for other front ends."""

    name: str | None
    total: int
    counts: tuple[int, int, int]
    elapsed: float

    def _repr_html_(self) -> str:
        done, passed, failed = self.counts
        return (
            "<div class='agentkit-eval-progress'>"
            f"{html.escape(_label(self.name))} "
            f"<progress value='{done}' max='{self.total}' style='width:16em'></progress> "
            f"{done}/{self.total} &middot; {passed} passed &middot; {failed} failed "
            f"&middot; {self.elapsed:.1f} s</div>"
        )

    def __repr__(self) -> str:
        done, passed, failed = self.counts
        return (
            f"{_label(self.name)}: {done}/{self.total}, {passed} passed, {failed} failed, "
            f"{self.elapsed:.1f} s"
        )


class NotebookProgress:
    """An HTML progress bar in the notebook cell's output, updated in place."""

    def __init__(self, total: int, name: str | None) -> None:
        import importlib

        display: Any = importlib.import_module("IPython.display").display
        self._total = total
        self._name = name
        self._start = time.monotonic()
        self._last = 0.0
        self._counts = (0, 0, 0)
        self._handle: Any = display(self._bar(), display_id=True)

    def _bar(self) -> _Bar:
        return _Bar(self._name, self._total, self._counts, time.monotonic() - self._start)

    def update(self, done: int, passed: int, failed: int) -> None:
        now = time.monotonic()
        counts = (done, passed, failed)
        if counts == self._counts and now - self._last < _REDRAW * 5:
            return
        self._counts = counts
        self._last = now
        self._handle.update(self._bar())

    def close(self) -> None:
        self._handle.update(self._bar())
