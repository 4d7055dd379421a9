"""``AGENTS.md`` content in every model call (Eino's ``agentsmd``).

:class:`~agentkit.middlewares.AgentsMdMiddleware` reads instruction files (``AGENTS.md`` by
default) from a :class:`~agentkit.backends.Backend` and puts their content, as a user message
wrapped in ``<system-reminder>``, before the first user message of what each model call is
sent. It is added to the call only, never to the conversation: the history, the checkpoints and
the summaries stay without it. The files are read once per run, on the first model call.

A file may include others with ``@path`` (``@docs/style.md``, relative to the including
file's directory): a reference counts when it holds a ``/`` or ends in ``.md``, ``.mdx``,
``.txt``, ``.yaml``, ``.yml``, ``.json`` or ``.toml`` (so ``@someone`` and ``@example.com``
do not). Each included file appears once, after the file that includes it, up to 5 levels
deep; cycles are cut. The files may have been written by the model (a deep agent writes its
workspace), so what they include is bounded: an include stays inside the backend's root (an
absolute path, or one whose ``..`` climbs above the root, is skipped), and all the files
together hold at most ``max_bytes`` (256 KiB by default). A file that is missing, a
directory, binary, too large or refused by the backend is skipped with a warning; other read
errors (the backend failed) end the run.

``AgentsMdMiddleware`` moved to :mod:`agentkit.middlewares`; their spellings here still work
until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.middlewares._agents_md import (
    MAX_IMPORT_DEPTH,
    format_instructions,
)

__all__ = [
    "MAX_IMPORT_DEPTH",
    "format_instructions",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "AgentsMdMiddleware": "agentkit.middlewares.AgentsMdMiddleware",
        },
    )
