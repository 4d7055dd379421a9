"""``AGENTS.md`` content in every model call (Eino's ``agentsmd``).

The definitions behind :mod:`agentkit.middlewares.agents_md`, whose docstring documents them.
"""

from __future__ import annotations

import logging
import posixpath
import re
from collections.abc import Callable, Sequence

from agentkit._lazy import present
from agentkit._middleware import AgentMiddleware, ModelCallable
from agentkit.backends import Backend, BackendError
from agentkit.errors import AgentConfigError
from agentkit.models._base import ModelOptions
from agentkit.schema import Message, Role

__all__ = ["AgentsMdMiddleware", "MAX_IMPORT_DEPTH", "format_instructions"]

MAX_IMPORT_DEPTH = 5
"""How deep ``@path`` includes are followed."""

_MAX_BYTES = 256 * 1024  # the default budget of all files together
_OUTSIDE = "skipped: an include is a path relative to the including file, inside the root"

_EXTRA_KEY = "__agentsmd_content__"
_IMPORT = re.compile(r"@([a-zA-Z0-9_.~/][a-zA-Z0-9_.~/\-]*)")
_IMPORT_EXTENSIONS = frozenset((".md", ".txt", ".mdx", ".yaml", ".yml", ".json", ".toml"))
_logger = logging.getLogger("agentkit")

_HEADER = """<system-reminder>
Below are instructions for this codebase and from the user. Follow them: they take precedence
over your default behaviour.
"""
_FOOTER = """Use this context where it applies to the task; do not respond to it otherwise.
</system-reminder>"""


def format_instructions(files: Sequence[tuple[str, str]]) -> str:
    """The reminder text for ``files`` (path, content), or ``""`` when there are none."""
    if not files:
        return ""
    sections = "".join(
        f"\nContents of {path} (instructions):\n\n{content}\n" for path, content in files
    )
    return _HEADER + sections + _FOOTER


def _warn(path: str, problem: str) -> None:
    _logger.warning("AGENTS.md file %s: %s", path, problem)


class AgentsMdMiddleware(AgentMiddleware):
    """Adds the content of ``files`` (and what they include) to every model call.

    Args:
        backend: where the files are read.
        files: the files, in order (default ``("AGENTS.md",)``).
        max_bytes: a budget for all files together, in UTF-8 bytes (default 262,144, 256
            KiB): a file or include that would take them past it is skipped; the first file
            is always there, cut to the budget if it alone is larger. ``None``: no limit.
        on_warning: ``on_warning(path, problem)`` for a skipped file (default: a warning on the
            ``agentkit`` logger).

    Raises:
        AgentConfigError: no files, or a limit that is not positive.
    """

    def __init__(
        self,
        backend: Backend,
        files: Sequence[str] = ("AGENTS.md",),
        *,
        max_bytes: int | None = _MAX_BYTES,
        on_warning: Callable[[str, str], object] | None = None,
    ) -> None:
        if isinstance(files, str):
            raise AgentConfigError(f"files takes a list of paths; write files=[{files!r}]")
        if not files:
            raise AgentConfigError("AgentsMdMiddleware needs at least one file path")
        if max_bytes is not None and (
            isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1
        ):
            raise AgentConfigError(f"max_bytes must be a positive int or None (got {max_bytes!r})")
        self._backend = backend
        self._files = tuple(files)
        self._max = max_bytes
        self._warn = on_warning or _warn

    def load(self) -> str:
        """Read the files now and return the reminder text (``""`` when all are missing)."""
        return format_instructions(_Loader(self._backend, self._max, self._warn).load(self._files))

    def wrap_model(self, call: ModelCallable) -> ModelCallable:
        """Add the reminder before the first user message of each call of this run."""
        loaded: list[str] = []  # this run's text, read on its first model call

        def with_instructions(messages: list[Message], options: ModelOptions | None) -> Message:
            if not loaded:
                text = self.load()
                if text:
                    loaded.append(text)
            if loaded and not any(_EXTRA_KEY in message.extra for message in messages):
                messages = _before_first_user(messages, loaded[0])
            return call(messages, options)

        return with_instructions


def _before_first_user(messages: list[Message], text: str) -> list[Message]:
    note = Message(Role.USER, text, extra={_EXTRA_KEY: True})
    for index, message in enumerate(messages):
        if message.role is Role.USER:
            return [*messages[:index], note, *messages[index:]]
    return [*messages, note]


class _Loader:
    """One load: the files read so far and the bytes they took."""

    def __init__(
        self, backend: Backend, max_bytes: int | None, warn: Callable[[str, str], object]
    ) -> None:
        self.backend = backend
        self.max = max_bytes
        self.warn = warn
        self.total = 0
        self.seen: set[str] = set()

    def load(self, files: Sequence[str]) -> list[tuple[str, str]]:
        loaded: list[tuple[str, str]] = []
        for path in files:
            loaded.extend(self.file(path, 0))
        return loaded

    def file(self, path: str, depth: int) -> list[tuple[str, str]]:
        path = posixpath.normpath(path)
        if depth > MAX_IMPORT_DEPTH:
            self.warn(path, f"skipped: included more than {MAX_IMPORT_DEPTH} levels deep")
            return []
        if path in self.seen:
            return []  # included already (this also cuts cycles)
        self.seen.add(path)
        content = self.read(path)
        if not content:
            return []
        content = self.budgeted(path, content)
        if not content:
            return []
        found = [(path, content)]
        for reference in _IMPORT.findall(content):
            if "/" not in reference and posixpath.splitext(reference)[1] not in _IMPORT_EXTENSIONS:
                continue
            if reference.startswith("/"):
                self.warn(reference, _OUTSIDE)
                continue
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), reference))
            if target == ".." or target.startswith("../"):
                self.warn(reference, _OUTSIDE)
                continue
            found.extend(self.file(target, depth + 1))
        return found

    def read(self, path: str) -> str:
        """The file's text; ``""`` (and a warning) for a file that cannot be included."""
        try:
            return self.backend.read(path)
        except FileNotFoundError:
            self.warn(path, "file not found, skipping")
        except (IsADirectoryError, NotADirectoryError) as error:
            if isinstance(error, IsADirectoryError):
                self.warn(path, "skipped: a directory, not a file; include its files one by one")
            else:
                self.warn(path, f"skipped: {error}")
        except (BackendError, PermissionError) as error:
            self.warn(path, f"skipped: the backend refused to read it: {error}")
        return ""

    def budgeted(self, path: str, content: str) -> str:
        """``content`` within what is left of the budget: whole, cut (the first file), or
        ``""`` (a later file that does not fit is skipped)."""
        size = len(content.encode("utf-8"))
        if self.max is None or self.total + size <= self.max:
            self.total += size
            return content
        if self.total > 0:
            self.warn(path, f"skipped: together the files would pass max_bytes={self.max}")
            return ""
        self.warn(path, f"cut to its first {self.max} bytes (max_bytes={self.max})")
        cut = content.encode("utf-8")[: self.max].decode("utf-8", "ignore")
        self.total = len(cut.encode("utf-8"))
        return cut

present(
    (
        AgentsMdMiddleware,
    ),
    "agentkit.middlewares",
)

present(
    (
        format_instructions,
    ),
    "agentkit.middlewares.agents_md",
)
