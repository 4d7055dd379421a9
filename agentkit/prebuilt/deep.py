"""Deep agents: a ChatModelAgent that plans with a todo list, hands work to sub-agents, and works
with files and a shell (Eino's ``prebuilt/deep``).

:func:`new` builds it::

    from agentkit.backends import LocalBackend, LocalShell
    from agentkit.prebuilt import deep

    agent = deep.new(
        model,
        sub_agents=[researcher],               # started with the task tool
        backend=LocalBackend("workspace"),     # ls, read_file, write_file, edit_file, glob, grep
        shell=LocalShell("workspace"),         # execute
    )
    Runner(agent).invoke("Survey the sources in workspace/ and write report.md")

What the agent has, in this order (Eino's):

- ``write_todos`` (unless ``without_write_todos``): the model writes its whole todo list; the
  list is kept in the session under :data:`SESSION_KEY_TODOS` (a list of :class:`Todo`) and
  the tool answers ``Updated todo list to [...]``.
- the file tools over ``backend`` and ``execute`` over ``shell``
  (:class:`~agentkit.middlewares.FilesystemMiddleware`); with a backend, tool
  results over 80,000 characters are offloaded to it
  (:class:`~agentkit.middlewares.OffloadLargeResults`, at
  ``large_tool_result/<call id>``).
- ``task``, when there is a sub-agent: ``{"subagent_type", "description"}`` starts that
  sub-agent on the description and answers with its final message. Unless
  ``without_general_sub_agent``, a ``general-purpose`` sub-agent is added: the same model,
  instruction, tools and middlewares (but no ``task``). An unknown ``subagent_type`` is told to
  the model (``subagent type x not found; ...``) and the run goes on.
- with ``background_tasks=True``: ``run_in_background`` on ``task`` and ``execute``, and
  ``task_output`` and ``task_stop`` (:data:`TASK_OUTPUT_TOOL_NAME`,
  :data:`TASK_STOP_TOOL_NAME`): sub-agents and commands that run while the agent goes on, kept
  as :class:`BackgroundTask` records (see :func:`new`).

The instruction is ``instruction`` (or a built-in one when empty) followed by the ``task``
section; it is sent as the system message as it is (never formatted with session values,
so braces are safe).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from agentkit._events import Agent, AgentInput
from agentkit._language import resolve
from agentkit._lazy import present
from agentkit._middleware import AgentMiddleware
from agentkit.agents._chatmodel import ChatModelAgent
from agentkit.agents._model_retry import ModelRetryConfig
from agentkit.backends import Backend, Shell
from agentkit.errors import AgentConfigError
from agentkit.middlewares._filesystem import (
    EXECUTE,
    FILE_TOOLS,
    FilesystemMiddleware,
    OffloadLargeResults,
)
from agentkit.models._base import ChatModel
from agentkit.prebuilt._deep_background import (
    SESSION_KEY_BACKGROUND_TASKS,
    TASK_OUTPUT_TOOL_NAME,
    TASK_STOP_TOOL_NAME,
    BackgroundTask,
    BackgroundTasks,
)
from agentkit.prebuilt._deep_prompts import (
    BASE_INSTRUCTION,
    DEEP_TEXTS,
)
from agentkit.prebuilt._deep_tools import (
    SESSION_KEY_TODOS,
    TASK_TOOL_NAME,
    WRITE_TODOS_TOOL_NAME,
    TaskTool,
    Todo,
    ToolAdder,
    write_todos_tool,
)
from agentkit.schema import Message, system_message
from agentkit.tools._base import BaseTool, InvokableTool
from agentkit.tools._function import as_tool

__all__ = [
    "BASE_INSTRUCTION",
    "GENERAL_AGENT_NAME",
    "SESSION_KEY_BACKGROUND_TASKS",
    "SESSION_KEY_TODOS",
    "TASK_OUTPUT_TOOL_NAME",
    "TASK_STOP_TOOL_NAME",
    "TASK_TOOL_NAME",
    "WRITE_TODOS_TOOL_NAME",
    "BackgroundTask",
    "Todo",
    "model_input",
    "new",
]

GENERAL_AGENT_NAME = "general-purpose"
"""The name of the general-purpose sub-agent."""

present([BackgroundTask, Todo], __name__)


def model_input(instruction: str, input: AgentInput) -> list[Message]:
    """What a deep agent sends the model: the instruction as the system message (when there is
    one, not formatted with session values), then the input messages."""
    messages = [system_message(instruction)] if instruction else []
    messages.extend(input.messages)
    return messages


def new(
    model: ChatModel,
    *,
    name: str = "deep_agent",
    description: str = "plans its work with a todo list, hands parts of it to sub-agents, and "
    "works with files",
    instruction: str = "",
    sub_agents: Sequence[Agent] = (),
    tools: Iterable[BaseTool | Callable[..., Any]] = (),
    backend: Backend | None = None,
    shell: Shell | None = None,
    without_write_todos: bool = False,
    without_general_sub_agent: bool = False,
    max_iterations: int | None = None,
    middlewares: Iterable[AgentMiddleware] = (),
    emit_internal_events: bool = False,
    return_directly: Iterable[str] = (),
    output_key: str | None = None,
    model_retry: ModelRetryConfig | None = None,
    task_tool_description: Callable[[Sequence[Agent]], str] | None = None,
    guardrails: Iterable[object] = (),
    share_guardrails: bool = True,
    language: str | None = None,
    background_tasks: bool = False,
) -> ChatModelAgent:
    """Build a deep agent: a :class:`~agentkit.ChatModelAgent` with ``write_todos``, ``task``,
    and the file tools and ``execute`` when given a backend and a shell (see the module).

    Args:
        model: the chat model (a ``ToolCallingChatModel``), also the general-purpose
            sub-agent's.
        name: the agent's name.
        description: what the agent does.
        instruction: the system prompt; empty for the built-in one
            (:data:`BASE_INSTRUCTION`). The ``task`` section is appended when there are
            sub-agents.
        sub_agents: agents the ``task`` tool can start, by name (each needs a name and a
            description, which the model reads).
        tools: the agent's own tools (the general-purpose sub-agent gets them too).
        backend: a :class:`~agentkit.backends.Backend` for the file tools.
        shell: a :class:`~agentkit.backends.Shell` for ``execute``: a
            :class:`~agentkit.backends.SandboxShell` (or a
            :class:`~agentkit.backends.SandboxBackend` passed as ``backend`` and ``shell``)
            for an agent that reads anything you did not write; a
            :class:`~agentkit.backends.LocalShell` runs the model's commands as you.
        without_write_todos: leave out ``write_todos``.
        without_general_sub_agent: leave out the ``general-purpose`` sub-agent.
        max_iterations: the most model calls per run (``None``: ChatModelAgent's default, 20);
            the general-purpose sub-agent gets the same.
        middlewares: more :class:`~agentkit.AgentMiddleware`, after the built-in ones (the
            general-purpose sub-agent gets them too).
        emit_internal_events: forward the sub-agents' events into the run as they happen.
        return_directly: names of the agent's tools whose result ends the run as its answer
            (Eino's ``ToolsConfig`` return-directly; the agent's own, not its sub-agents').
        output_key: keep the agent's final answer in this session key (Eino's ``OutputKey``).
        model_retry: how the agent and the general-purpose sub-agent retry their model calls
            (a :class:`~agentkit.ModelRetryConfig`; Eino's ``ModelRetryConfig``).
        task_tool_description: ``task_tool_description(sub_agents) -> str``, the ``task``
            tool's description made from the sub-agents it starts (the general-purpose one
            included) instead of the built-in one (Eino's ``TaskToolDescriptionGenerator``).
        guardrails: the deep agent's guardrails (see :mod:`agentkit.guardrails`). With
            ``share_guardrails`` (the default) they also check every sub-agent the ``task``
            tool starts (the general-purpose one included), so a
            :class:`~agentkit.guardrails.ToolAllowList` must name the sub-agents' tools too;
            ``False`` checks the deep agent alone (see :class:`~agentkit.ChatModelAgent`).
        share_guardrails: whether ``guardrails`` also check the sub-agents.
        language: the language of the built-in texts, ``"en"`` or ``"zh"`` (``None``: the
            process's, :func:`agentkit.language.set_language`).
        background_tasks: let the agent run sub-agents and commands in the background
            (Eino's ``backgroundtask``): ``task`` and ``execute`` take ``run_in_background``,
            and ``task_output`` and ``task_stop`` read and stop the tasks. The records are
            session values (:data:`SESSION_KEY_BACKGROUND_TASKS`, saved with the run); the
            agent is told when a task ends, waits for its tasks before it answers, and stops
            them when its run ends. See :class:`BackgroundTask`.

    Raises:
        AgentConfigError: a tool is named like a built-in one, two sub-agents share a name (or a
            sub-agent is named ``general-purpose`` while the general-purpose agent is on), or a
            setting is invalid.
    """
    texts = DEEP_TEXTS[resolve(language)]
    own_tools: list[BaseTool] = [as_tool(item) for item in tools]
    extra = list(middlewares)
    builtin: list[AgentMiddleware] = []
    if not without_write_todos:
        builtin.append(ToolAdder(write_todos_tool(texts.write_todos_description)))
    execute_tool: InvokableTool | None = None
    if backend is not None or shell is not None:
        files = FilesystemMiddleware(backend, shell=shell)
        builtin.append(files)
        execute_tool = next(
            (t for t in files.tools if isinstance(t, InvokableTool) and t.info().name == EXECUTE),
            None,
        )
    if backend is not None:
        builtin.append(OffloadLargeResults(backend))
    _check_tool_names(own_tools, without_write_todos, backend, shell, background_tasks)
    options: dict[str, Any] = {"gen_model_input": model_input, "model_retry": model_retry}
    if max_iterations is not None:
        options["max_iterations"] = max_iterations
    instruction = instruction or texts.instruction
    agents = list(sub_agents)
    if not without_general_sub_agent:
        if any(agent.name == GENERAL_AGENT_NAME for agent in agents):
            raise AgentConfigError(
                f"a sub-agent is named {GENERAL_AGENT_NAME!r}, the name of the general-purpose "
                "sub-agent; rename it, or pass without_general_sub_agent=True"
            )
        agents.append(
            ChatModelAgent(
                GENERAL_AGENT_NAME,
                texts.general_agent_description,
                model,
                instruction=instruction,
                tools=own_tools,
                middlewares=[*builtin, *extra],
                **options,
            )
        )
    own = list(builtin)
    task_tool: TaskTool | None = None
    if agents:
        task_description: str | None = None
        if task_tool_description is not None:
            task_description = task_tool_description(tuple(agents))
            if not isinstance(task_description, str) or not task_description:
                raise AgentConfigError(
                    "task_tool_description must return the task tool's description as a "
                    f"non-empty str (got {task_description!r})"
                )
        task_tool = TaskTool(agents, task_description, texts.task_tool_description)
        own.append(ToolAdder(task_tool, texts.task_prompt))
    if background_tasks:
        if task_tool is None and execute_tool is None:
            raise AgentConfigError(
                "background_tasks=True needs sub-agents (the task tool) or a shell (execute) "
                "to run in the background"
            )
        own.append(BackgroundTasks(task_tool, execute_tool))
    return ChatModelAgent(
        name,
        description,
        model,
        instruction=instruction,
        tools=own_tools,
        middlewares=[*own, *extra],
        emit_internal_events=emit_internal_events,
        return_directly=return_directly,
        output_key=output_key,
        guardrails=guardrails,
        share_guardrails=share_guardrails,
        **options,
    )


def _check_tool_names(
    tools: list[BaseTool],
    without_write_todos: bool,
    backend: object,
    shell: object,
    background_tasks: bool,
) -> None:
    reserved = {TASK_TOOL_NAME}
    if background_tasks:
        reserved.update((TASK_OUTPUT_TOOL_NAME, TASK_STOP_TOOL_NAME))
    if not without_write_todos:
        reserved.add(WRITE_TODOS_TOOL_NAME)
    if backend is not None:
        reserved.update(FILE_TOOLS)
    if shell is not None:
        reserved.add(EXECUTE)
    for tool in tools:
        tool_name = tool.info().name
        if tool_name in reserved:
            raise AgentConfigError(
                f"the deep agent has a built-in tool named {tool_name!r}; rename your tool"
            )
