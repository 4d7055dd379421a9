"""The exceptions of :mod:`agentkit.testing`: failed checks, and cassettes that cannot replay.

The check errors (:class:`StoreConformanceError`, :class:`ThreadLeakError`) are
:class:`AssertionError` subclasses, so pytest reports them as failed checks and existing
``except AssertionError`` clauses keep working, and :class:`~agentkit.AgentKitError`
subclasses, like every error agentkit raises. They are raised explicitly, never with a bare
``assert``, so a broken store or a leaked thread is not waved through when assertions are
stripped. The cassette errors (:class:`CassetteError`, :class:`CassetteMismatchError`) are
plain :class:`~agentkit.AgentKitError` subclasses, except :class:`CassetteUnplayedError`,
the failed check of :meth:`~agentkit.testing.Cassette.assert_all_played`, which is an
:class:`AssertionError` too.
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


class CassetteError(AgentKitError):
    """A cassette cannot be used: its file is missing, damaged or from a later agentkit, or
    it has no recorded reply for a call (see :func:`~agentkit.testing.cassette`)."""


class CassetteMismatchError(CassetteError):
    """A call made while replaying a cassette is not one it recorded.

    The message shows a diff between the closest recorded request and this one, and how to
    record again.

    Attributes:
        path: the cassette file.
        diff: the unified diff (recorded request first), ``""`` when no recorded call was left
            to compare with.
    """

    def __init__(self, message: str, *, path: str = "", diff: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.diff = diff


class CassetteUnplayedError(CassetteError, AssertionError):
    """Calls recorded in a cassette were never replayed (the agent made fewer or other calls).

    Raised by :meth:`~agentkit.testing.Cassette.assert_all_played`: a failed check, so it is
    an :class:`AssertionError` (pytest reports it as one, ``pytest.raises(AssertionError)``
    catches it) as well as a :class:`CassetteError`.
    """
