"""The deep agent's own tools: ``write_todos`` (the todo list) and ``task`` (sub-agents)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

import attrs

from agentkit._events import Agent
from agentkit._middleware import AgentContext, AgentMiddleware
from agentkit._persist import persisted
from agentkit._runctx import add_session_value
from agentkit.agents._agenttool import AgentTool
from agentkit.errors import AgentConfigError, ToolArgumentsError
from agentkit.middlewares._tool import SchemaTool, add_tools, checked_arguments, object_schema
from agentkit.prebuilt._deep_prompts import TASK_TOOL_DESCRIPTION, WRITE_TODOS_DESCRIPTION
from agentkit.schema import ContentPart, ToolInfo
from agentkit.tools._function_tool import content_text

__all__ = [
    "SESSION_KEY_TODOS",
    "TASK_TOOL_NAME",
    "WRITE_TODOS_TOOL_NAME",
    "TaskTool",
    "Todo",
    "ToolAdder",
    "write_todos_tool",
]

SESSION_KEY_TODOS = "deep_agent_session_key_todos"
"""The session key ``write_todos`` keeps the todo list under (a list of :class:`Todo`)."""

TASK_TOOL_NAME = "task"
"""The name of the tool a deep agent hands a task to a sub-agent with."""
WRITE_TODOS_TOOL_NAME = "write_todos"
"""The name of the tool a deep agent keeps its todo list with."""

TodoStatus = Literal["pending", "in_progress", "completed"]
_STATUSES = ("pending", "in_progress", "completed")


@persisted("agentkit.deep.Todo")
@attrs.frozen
class Todo:
    """One item of a deep agent's todo list (kept in the session under
    :data:`SESSION_KEY_TODOS`).

    Attributes:
        content: the step, in the imperative ("Run the tests").
        active_form: the step while it is in progress ("Running the tests").
        status: ``"pending"``, ``"in_progress"`` or ``"completed"``.
    """

    content: str
    active_form: str = ""
    status: TodoStatus = "pending"

    def to_dict(self) -> dict[str, str]:
        """The item as the model writes it: ``{"content", "activeForm", "status"}``."""
        return {"content": self.content, "activeForm": self.active_form, "status": self.status}


_WRITE_TODOS_SCHEMA = object_schema(
    {
        "todos": {
            "type": "array",
            "description": "The whole todo list, in order.",
            "items": {
                "type": "object",
                "properties": {
                    "content": {"type": "string", "description": "The step, e.g. 'Run tests'"},
                    "activeForm": {
                        "type": "string",
                        "description": "The step in progress, e.g. 'Running tests'",
                    },
                    "status": {"type": "string", "enum": list(_STATUSES)},
                },
                "required": ["content", "status"],
            },
        }
    },
    ("todos",),
)


def write_todos_tool(description: str = WRITE_TODOS_DESCRIPTION) -> SchemaTool:
    """The ``write_todos`` tool: keeps the list in the session, answers
    ``Updated todo list to <the list as JSON>``."""

    def write_todos(arguments: dict[str, Any]) -> str:
        todos = [
            Todo(item["content"], item.get("activeForm") or "", item["status"])
            for item in arguments["todos"]
        ]
        add_session_value(SESSION_KEY_TODOS, todos)
        listed = json.dumps(
            [todo.to_dict() for todo in todos], ensure_ascii=False, separators=(",", ":")
        )
        return f"Updated todo list to {listed}"

    return SchemaTool(
        WRITE_TODOS_TOOL_NAME, description, _WRITE_TODOS_SCHEMA, write_todos
    )


class TaskTool:
    """The ``task`` tool: runs the sub-agent named by ``subagent_type`` on ``description``.

    Each sub-agent runs as an :class:`~agentkit.AgentTool` (a fresh run sharing the session
    values, streaming when the caller streams; its interrupts surface through the call and
    resume through it) with ``{"request": description}``; the tool's result is the sub-agent's
    final message. An unknown ``subagent_type`` is a :class:`~agentkit.ToolArgumentsError`:
    the model is told which types exist, and the run goes on.
    """

    __slots__ = ("_agents", "_info")

    def __init__(
        self,
        agents: Sequence[Agent],
        description: str | None = None,
        template: str = TASK_TOOL_DESCRIPTION,
    ) -> None:
        tools: dict[str, AgentTool] = {}
        for agent in agents:
            if agent.name in tools:
                raise AgentConfigError(
                    f"two sub-agents are named {agent.name!r}; the task tool picks sub-agents "
                    "by name, so names must be unique"
                )
            tools[agent.name] = AgentTool(agent)
        self._agents = tools
        listing = "".join(f"- {agent.name}: {agent.description}\n" for agent in agents)
        self._info = ToolInfo(
            name=TASK_TOOL_NAME,
            description=description or template.format(other_agents=listing),
            parameters=object_schema(
                {
                    "subagent_type": {
                        "type": "string",
                        "description": "The sub-agent to start: "
                        + ", ".join(repr(name) for name in tools),
                    },
                    "description": {
                        "type": "string",
                        "description": "The work to do, complete and self-contained: the "
                        "sub-agent sees only this",
                    },
                },
                ("subagent_type", "description"),
            ),
        )

    @property
    def agent_names(self) -> list[str]:
        """The sub-agents' names, in order."""
        return list(self._agents)

    def info(self) -> ToolInfo:
        """The tool's name (``task``), description (listing the sub-agents) and parameters."""
        return self._info

    def __repr__(self) -> str:
        return f"TaskTool({self.agent_names!r})"

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Run the chosen sub-agent on the description; return its final message's text."""
        return content_text(self.invoke_content(arguments, **tool_options))

    def invoke_content(self, arguments: str, **tool_options: Any) -> str | tuple[ContentPart, ...]:
        """Run the chosen sub-agent on the description; return its final message's text, or
        its parts when it has images, files or sounds."""
        given = checked_arguments(self._info, arguments)
        kind = given["subagent_type"]
        tool = self._agents.get(kind)
        if tool is None:
            known = ", ".join(repr(name) for name in self._agents)
            raise ToolArgumentsError(
                f"subagent type {kind} not found; the sub-agent types are: {known}",
                tool_name=TASK_TOOL_NAME,
            )
        request = json.dumps({"request": given["description"]}, ensure_ascii=False)
        return tool.invoke_content(request, **tool_options)


class ToolAdder(AgentMiddleware):
    """Adds one tool to every run, and appends ``prompt`` to the instruction (as Eino's deep
    agent does with ``write_todos`` and ``task``: the prompt is appended without separator)."""

    def __init__(self, tool: SchemaTool | TaskTool, prompt: str = "") -> None:
        self._tool = tool
        self._prompt = prompt

    @property
    def tool(self) -> SchemaTool | TaskTool:
        """The tool it adds."""
        return self._tool

    def before_agent(self, context: AgentContext) -> None:
        """Append the prompt to the instruction and the tool to the tools."""
        context.instruction += self._prompt
        add_tools(context, [self._tool], "the deep agent")
