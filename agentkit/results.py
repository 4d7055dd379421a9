"""Run results: :class:`~agentkit.RunResult`, and :class:`RunIterator`, the event iterator that
makes one.

Every iterator a :class:`~agentkit.Runner` returns (``run``, ``query``, ``resume``), and the one
:func:`~agentkit.run_in_worker` returns, is a :class:`RunIterator`: iterate it for the events as
they come, or call :meth:`RunIterator.result` to wait for the end and get everything at once::

    result = runner.query("What is 2 + 2?").result()
    print(result.text)

    result = runner.invoke("What is 2 + 2?")      # the same, in one call

A failed run raises its error from ``result()`` (unless ``raise_errors=False``), with a note
naming the agent and the run path where it failed (:meth:`BaseException.add_note`, Python
3.11+: the error keeps its type and is the very object the run raised, so ``except ToolError``
still works; ``RunResult.error`` is the same object). An interrupted run is not a failure: its
result carries the interrupt and the checkpoint id to resume with.

``RunResult`` moved to :mod:`agentkit`; their spellings here still work until agentkit 0.4,
with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit._results import (
    RunIterator,
    RunOutcome,
    cost_of,
    usage_of,
)

__all__ = [
    "RunIterator",
    "RunOutcome",
    "cost_of",
    "usage_of",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "RunResult": "agentkit.RunResult",
        },
    )
