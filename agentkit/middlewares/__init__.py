"""Middlewares that give a ChatModelAgent more to work with (Eino's ``adk/middlewares``).

- :mod:`~agentkit.middlewares.filesystem`: file tools over a backend, ``execute`` over a
  shell (:class:`FilesystemMiddleware`), large tool results offloaded to files
  (:class:`OffloadLargeResults`).
- :mod:`~agentkit.middlewares.skill`: skills (``SKILL.md``) found in a backend directory and
  loaded into the conversation when the model asks for one (:class:`SkillMiddleware`).
- :mod:`~agentkit.middlewares.tool_search`: tools kept hidden until the model finds them with
  ``tool_search`` (:class:`ToolSearchMiddleware`).
- :mod:`~agentkit.middlewares.patch_tool_calls`: placeholder results for tool calls that have
  none (:class:`PatchToolCallsMiddleware`).
- :mod:`~agentkit.middlewares.agents_md`: ``AGENTS.md`` content added to every model call
  (:class:`AgentsMdMiddleware`).
- :mod:`~agentkit.middlewares.plantask`: a task list in files, with ``TaskCreate``,
  ``TaskGet``, ``TaskUpdate`` and ``TaskList`` (:class:`PlanTaskMiddleware`).

Pass them to ``ChatModelAgent(..., middlewares=[...])`` or ``deep.new(..., middlewares=[...])``.
Each module is imported on first use; importing this package costs nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach

__all__ = [
    "AgentsMdMiddleware",
    "FilesystemMiddleware",
    "OffloadLargeResults",
    "PatchToolCallsMiddleware",
    "PlanTaskMiddleware",
    "SkillMiddleware",
    "ToolSearchMiddleware",
]

if TYPE_CHECKING:
    from agentkit.middlewares._agents_md import AgentsMdMiddleware
    from agentkit.middlewares._filesystem import FilesystemMiddleware, OffloadLargeResults
    from agentkit.middlewares._patch_tool_calls import PatchToolCallsMiddleware
    from agentkit.middlewares._plantask import PlanTaskMiddleware
    from agentkit.middlewares._skill import SkillMiddleware
    from agentkit.middlewares._tool_search import ToolSearchMiddleware
else:
    __getattr__, __dir__ = attach(
        __name__,
        {
            "AgentsMdMiddleware": "agentkit.middlewares._agents_md",
            "FilesystemMiddleware": "agentkit.middlewares._filesystem",
            "OffloadLargeResults": "agentkit.middlewares._filesystem",
            "PatchToolCallsMiddleware": "agentkit.middlewares._patch_tool_calls",
            "PlanTaskMiddleware": "agentkit.middlewares._plantask",
            "SkillMiddleware": "agentkit.middlewares._skill",
            "ToolSearchMiddleware": "agentkit.middlewares._tool_search",
        },
        submodules=(
            "agents_md", "filesystem", "patch_tool_calls", "plantask", "skill", "tool_search"
        ),
    )
