"""Ready-made multi-agent patterns built from agentkit's agents.

- :mod:`agentkit.prebuilt.supervisor`: a supervisor hands tasks to workers, which report back.
- :mod:`agentkit.prebuilt.planexecute`: plan, then execute and re-plan step by step.
- :mod:`agentkit.prebuilt.deep`: a deep agent that plans with a todo list, hands work to
  sub-agents, and works with files and a shell.

Import the pattern you need explicitly; this package imports nothing itself, so importing
it costs nothing::

    from agentkit.prebuilt import supervisor

    team = supervisor.new(boss, [researcher, writer])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach

__all__ = ["deep", "planexecute", "supervisor"]

if TYPE_CHECKING:
    from agentkit.prebuilt import deep, planexecute, supervisor
else:
    __getattr__, __dir__ = attach(__name__, submodules=__all__)
