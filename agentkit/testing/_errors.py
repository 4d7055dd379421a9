"""The exceptions of :mod:`agentkit.testing`: failed checks, raised even under ``python -O``.

Both are :class:`AssertionError` subclasses, so pytest reports them as failed checks and
existing ``except AssertionError`` clauses keep working, and :class:`~agentkit.AgentKitError`
subclasses, like every error agentkit raises. They are raised explicitly, never with a bare
``assert``, so a broken store or a leaked thread is not waved through when assertions are
stripped.
"""

from __future__ import annotations

from agentkit.errors import AgentKitError


class StoreConformanceError(AgentKitError, AssertionError):
    """A store under test broke its contract; the message names the check and what went wrong.

    Raised by the checkpoint store conformance suite (:func:`check_checkpoint_store`) and the
    conversation store suite (:mod:`agentkit.conversation.conformance`).
    """


class ThreadLeakError(AgentKitError, AssertionError):
    """A thread started inside :func:`no_thread_leak` was still alive after the block."""
