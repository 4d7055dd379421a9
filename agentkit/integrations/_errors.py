"""The errors of the run backends (re-exported by :mod:`agentkit.integrations.runs`)::

    AgentKitError
    ├── RunNotFoundError (LookupError)
    │   └── RunOwnerError
    ├── RunStateError
    │   └── RunIntegrityError
    ├── RunIdError (ValueError)
    ├── EventIdError (ValueError)
    ├── RedisPrefixError (ValueError)
    └── TaskMessageError
"""

from __future__ import annotations

from agentkit.errors import AgentKitError

__all__ = [
    "EventIdError",
    "RedisPrefixError",
    "RunIdError",
    "RunIntegrityError",
    "RunNotFoundError",
    "RunOwnerError",
    "RunStateError",
    "TaskMessageError",
    "owner_mismatch",
]


class RunNotFoundError(AgentKitError, LookupError):
    """No run has the given id (it never existed, or its log expired or was forgotten)."""


class RunOwnerError(RunNotFoundError):
    """The run belongs to another owner.

    A subclass of :class:`RunNotFoundError`, so code that answers "not found" for unknown ids
    answers the same for another owner's runs and a caller cannot probe which ids exist.
    """


class RunStateError(AgentKitError):
    """The run cannot do that now (resume a run that is not stopped, for example)."""


class RunIntegrityError(RunStateError):
    """A run's record in Redis fails verification (written without the key, or altered).

    Nothing is done with such a record: no resume, no cancel, no worker runs it.
    """


class RunIdError(AgentKitError, ValueError):
    """A run id (``checkpoint_id=``, or one given to a read) is not a valid run id."""


class EventIdError(AgentKitError, ValueError):
    """A ``Last-Event-ID`` is not an id of the run's log."""


class RedisPrefixError(AgentKitError, ValueError):
    """A Redis key prefix overlaps one another deployment uses in the same database.

    With ``agentkit:run:`` and ``agentkit:run:t1-``, the run ``t1-abc`` of the first would be
    the run ``abc`` of the second. The message names both prefixes and how to go on.
    """


class TaskMessageError(AgentKitError):
    """A Celery task message of agentkit failed verification; the worker runs nothing.

    The message was unsigned, altered, expired, replayed, or meant for another run or another
    stop of the run.
    """


def owner_mismatch(run_id: str) -> RunOwnerError:
    """The error for a call by someone who does not own ``run_id``."""
    return RunOwnerError(
        f"run {run_id!r} belongs to another owner; call with the owner= it was submitted "
        "with (a run submitted with owner=None is used with owner=None)"
    )
