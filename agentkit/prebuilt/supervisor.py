"""The supervisor pattern: one agent hands tasks to workers, and every worker reports back.

:func:`new` registers the workers as the supervisor's sub-agents (so the supervisor gets the
``transfer_to_agent`` tool and an instruction listing them) and wraps each worker with
:func:`~agentkit.agent_with_deterministic_transfer_to`, so that when a
worker's turn ends the conversation goes back to the supervisor, which decides what is next.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentkit._events import Agent
from agentkit.agents._deterministic import agent_with_deterministic_transfer_to
from agentkit.agents._flow import _with_type, agent_with_options, set_sub_agents
from agentkit.errors import AgentConfigError

__all__ = ["new"]


def new(supervisor: Agent, sub_agents: Sequence[Agent]) -> Agent:
    """Return a supervisor system: ``supervisor`` delegates to ``sub_agents``, which report back.

    The supervisor (typically a :class:`~agentkit.ChatModelAgent`) may transfer to any
    worker. A worker is offered no transfer tool; when its turn ends, it transfers back to
    the supervisor deterministically, unless it exited (an Exit action, e.g. from
    :class:`~agentkit.ExitTool`, ends the whole run) or was interrupted. The supervisor
    sees each worker's messages as ``For context: [Worker] said: ...`` and answers when done.

    Run paths grow with every hand-over: ``[Sup]``, ``[Sup, Worker]``, ``[Sup, Worker, Sup]``.
    A worker may itself be a supervisor system (or any flow made with
    :func:`~agentkit.set_sub_agents`): it runs with its own history and reports back when
    its flow ends.

    Example::

        from agentkit.prebuilt import supervisor

        team = supervisor.new(boss, [researcher, writer])
        events = list(Runner(team).query("Write a short report on solar power."))

    Raises:
        AgentConfigError: a worker is named like the supervisor, or two workers share a
            name (transfers are by name).
        AgentFrozenError: the supervisor or a worker has already run.
    """
    sub_agents = list(sub_agents)
    names = [str(agent.name) for agent in sub_agents]
    if supervisor.name in names:
        raise AgentConfigError(
            f"worker {supervisor.name!r} is named like the supervisor; transfers are by name, "
            "so give it another name"
        )
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise AgentConfigError(
            f"two workers are named {duplicates[0]!r}; transfers are by name, so worker "
            "names must be unique"
        )
    workers = [
        # Transfer back is deterministic, so the worker is offered no transfer tool of its
        # own for it (its own sub-agents, if any, stay reachable).
        agent_with_options(
            agent_with_deterministic_transfer_to(agent, [supervisor.name]),
            disallow_transfer_to_parent=True,
        )
        for agent in sub_agents
    ]
    return _with_type(set_sub_agents(supervisor, workers), "Supervisor")
