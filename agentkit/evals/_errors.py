"""The errors of :mod:`agentkit.evals`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit.errors import AgentKitError

if TYPE_CHECKING:
    from agentkit.evals._report import EvalReport


class DatasetError(AgentKitError, ValueError):
    """A dataset (or its file) is not valid: the message names the case and what is wrong."""


class EvalCancelledError(AgentKitError):
    """An evaluation was cancelled before every case ran.

    Attributes:
        report: the report of the cases that finished before the cancel (the others are
            left out of it).
    """

    def __init__(self, message: str, report: EvalReport) -> None:
        super().__init__(message)
        self.report = report
