"""Offloading a tool result: write it to a backend and give the model a pointer to it.

One implementation for :class:`~agentkit.middlewares.OffloadLargeResults` (at the call) and
the ``"offload"`` rule of :class:`~agentkit.compaction.ToolResultReductionMiddleware` (once
newer results followed).
"""

from __future__ import annotations

import posixpath
import re
import uuid

from agentkit.backends._base import Backend

_POINTER = "Tool result too large: the result of tool call "


def offload_path(call_id: str) -> str:
    """``large_tool_result/<call id>`` (characters a file name cannot hold replaced by ``_``)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", call_id).strip(".") or uuid.uuid4().hex
    return posixpath.join("large_tool_result", name)


def offload(backend: Backend, path: str, call_id: str, result: str) -> str:
    """Write ``result`` to ``backend`` at ``path``; return the pointer the model gets instead.

    Raises what ``backend.write`` raises (:class:`OSError`,
    :class:`~agentkit.backends.BackendError`): each caller falls back its own way.
    """
    backend.write(path, result)
    return pointer(path, call_id, result)


def pointer(path: str, call_id: str, result: str) -> str:
    """What the model gets instead of ``result``, written at ``path``."""
    return (
        f"{_POINTER}{call_id} was saved in the filesystem at {path}.\n"
        "Read it with the read_file tool, a part at a time (offset and limit): for "
        "example offset=1 and limit=100 for its first 100 lines.\n\n"
        f"The first 10 lines of the result:\n{sample_lines(result)}"
    )


def is_pointer(text: str) -> bool:
    """Whether ``text`` is a pointer :func:`offload` returned (not to be offloaded again)."""
    return text.startswith(_POINTER)


def sample_lines(text: str, lines: int = 10, width: int = 1000) -> str:
    """The first ``lines`` lines of ``text``, numbered, each cut to ``width`` characters."""
    return "".join(
        f"{number}: {line[:width]}\n"
        for number, line in enumerate(text.splitlines()[:lines], 1)
    )
