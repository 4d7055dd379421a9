"""File tools over a backend, ``execute`` over a shell, and offloading of large tool results.

Eino's filesystem middleware, on agentkit's :class:`~agentkit.AgentMiddleware`:

- :class:`~agentkit.middlewares.FilesystemMiddleware` gives an agent the tools ``ls``,
  ``read_file``, ``write_file``, ``edit_file``, ``glob`` and ``grep`` over a
  :class:`~agentkit.backends.Backend`, and ``execute`` over a
  :class:`~agentkit.backends.Shell`. Tool names, arguments and result texts are Eino's
  (``Updated file notes.md``, ``No files found``, ``Found 2 files``, ``[Command failed with
  exit code 1]``...).
- :class:`~agentkit.middlewares.OffloadLargeResults` keeps large tool results out of the
  conversation: a result of more than ``token_limit * 4`` characters (20,000 tokens, so 80,000
  characters, by default) is written to the backend at ``large_tool_result/<call id>``, and the
  model gets where it is and its first 10 lines instead.

What the backend refuses (a missing file, a path outside its root, a binary or too large
file, an edit whose text is not found) reaches the model as the tool's result,
``Error: <what was wrong>``, and the run goes on; arguments that do not fit the schema are a
:class:`~agentkit.ToolArgumentsError` (the agent's tool-error policy tells the model)::

    from agentkit.backends import LocalBackend, LocalShell
    from agentkit.middlewares import FilesystemMiddleware, OffloadLargeResults

    backend = LocalBackend("workspace")
    agent = ChatModelAgent(
        "coder", "edits files", model,
        middlewares=[FilesystemMiddleware(backend, shell=LocalShell("workspace")),
                     OffloadLargeResults(backend)],
    )

``FilesystemMiddleware``, ``OffloadLargeResults`` moved to :mod:`agentkit.middlewares`; their
spellings here still work until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.middlewares._filesystem import (
    EXECUTE,
    FILE_TOOLS,
    default_offload_path,
    file_tools,
)

__all__ = [
    "EXECUTE",
    "FILE_TOOLS",
    "default_offload_path",
    "file_tools",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "FilesystemMiddleware": "agentkit.middlewares.FilesystemMiddleware",
            "OffloadLargeResults": "agentkit.middlewares.OffloadLargeResults",
        },
    )
