"""A task list kept in files, with ``TaskCreate``, ``TaskGet``, ``TaskUpdate`` and ``TaskList``
(Eino's ``plantask``).

:class:`~agentkit.middlewares.PlanTaskMiddleware` keeps each task as ``<base_dir>/<id>.json``
in a backend that can delete files (:class:`~agentkit.backends.DeletingBackend`), ids counting
up from 1 (the last one given is kept in ``<base_dir>/.highwatermark``, so ids are never
reused). A task has a subject, a description, a status (``pending``, ``in_progress``,
``completed``), an optional ``activeForm``, owner and metadata, and dependencies: the tasks it
``blocks`` and the tasks it is ``blockedBy`` (kept on both sides, cycles refused). Setting the
status ``deleted`` removes a task and its dependencies; once every task is completed, the task
files are removed.

The tools answer ``{"result": "<text>"}``: ``Task #1 created successfully: <subject>``,
``Updated task #1 status``, ``#1 [pending] <subject> [blocked by #2]``, ``No tasks found.``.
An id that is not a number, a task that does not exist, or a dependency that would make a
cycle is a :class:`~agentkit.ToolArgumentsError`: the model is told, and the run goes on.
Tasks are listed by id, in numeric order (Eino sorts the ids as text).

``PlanTaskMiddleware`` moved to :mod:`agentkit.middlewares`; their spellings here still work
until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.middlewares._plantask import (
    TASK_TOOLS,
)

__all__ = [
    "TASK_TOOLS",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "PlanTaskMiddleware": "agentkit.middlewares.PlanTaskMiddleware",
        },
    )
