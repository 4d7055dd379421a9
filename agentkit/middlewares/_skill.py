"""Skills: instructions in ``SKILL.md`` files, loaded into the conversation when the model asks
for one (Eino's ``skill`` middleware).

The definitions behind :mod:`agentkit.middlewares.skill`, whose docstring documents them.
"""

from __future__ import annotations

import json
import logging
import posixpath
from collections.abc import Mapping
from typing import Any

import attrs

from agentkit import _prompts_zh as zh
from agentkit._agent import AgentRun, BaseAgent
from agentkit._events import Agent, AgentInput
from agentkit._language import resolve
from agentkit._lazy import present
from agentkit._middleware import AgentContext, AgentMiddleware
from agentkit._persist import persisted
from agentkit._runctx import ToolCallFrame, current_frame
from agentkit.agents._agenttool import AgentTool
from agentkit.agents._chatmodel import ChatModelAgent
from agentkit.agents._history import rewrite_message
from agentkit.backends import Backend, BackendError
from agentkit.errors import AgentConfigError, AgentKitError, ToolArgumentsError
from agentkit.middlewares._tool import add_tools, checked_arguments, object_schema
from agentkit.models._base import ChatModel
from agentkit.schema import Message, Role, ToolInfo, user_message

__all__ = [
    "SKILL_FILE",
    "Skill",
    "SkillError",
    "SkillMiddleware",
    "load_skills",
    "skill_content",
    "parse_skill",
]

SKILL_FILE = "SKILL.md"
"""The file that makes a directory a skill."""

_CONTEXT_MODES = ("", "fork", "fork_with_context")
_logger = logging.getLogger("agentkit")


@persisted("agentkit.middlewares.SkillError")  # errors can be kept in checkpoints
class SkillError(AgentKitError, ValueError):
    """A ``SKILL.md`` could not be read as a skill (the message names the file and the fix)."""


@attrs.frozen
class Skill:
    """One skill, as read from its ``SKILL.md``.

    Attributes:
        name: the skill's name (front matter ``name``).
        description: when to use it (front matter ``description``).
        content: the instructions: the file after the front matter, trimmed.
        base_directory: the skill's directory in the backend.
        context: ``""`` (inline), ``"fork"`` or ``"fork_with_context"`` (front matter
            ``context``).
        agent: the agent a fork runs (front matter ``agent``; ``""`` for the default).
        model: the model a fork's agent runs with (front matter ``model``, a name in the
            middleware's ``models``; ``""``: the agent's own; not used by inline skills).
    """

    name: str
    description: str
    content: str
    base_directory: str
    context: str = ""
    agent: str = ""
    model: str = ""


def parse_skill(text: str, path: str) -> Skill:
    """Read the ``SKILL.md`` text of the file ``path``.

    Raises:
        SkillError: no front matter (a first line ``---``, YAML, a line ``---``), front matter
            that is not a YAML mapping or is past the bounds of front matter (see
            :mod:`agentkit.middlewares.skill`), no ``name``, or an unknown ``context``.
    """
    try:
        import yaml  # PyYAML: loaded with the first skill, not with agentkit
    except ImportError as error:  # pragma: no cover - PyYAML is in the test environment
        raise SkillError(
            "reading the front matter of SKILL.md files needs PyYAML: pip install "
            "'agentkit[skills]'"
        ) from error

    from agentkit._yaml import YAMLBoundError, YAMLBounds, load_bounded

    front, body = _split_front_matter(text, path)
    try:
        bounds = YAMLBounds(max_chars=65_536, max_aliases=20, max_depth=20, max_values=10_000)
        fields = load_bounded(front, bounds) if front.strip() else {}
    except YAMLBoundError as error:
        raise SkillError(
            f"skill file {path!r}: its front matter {error}; front matter holds a name, a "
            "description and a few settings"
        ) from None
    except yaml.YAMLError as error:
        raise SkillError(
            f"skill file {path!r}: its front matter is not valid YAML: {error}"
        ) from None
    if not isinstance(fields, dict):
        raise SkillError(
            f"skill file {path!r}: its front matter must be YAML key: value pairs (name, "
            f"description...), not {type(fields).__name__}"
        )
    values = {key: "" if value is None else str(value).strip() for key, value in fields.items()}
    name = values.get("name", "")
    if not name:
        raise SkillError(
            f"skill file {path!r}: its front matter has no 'name'; add 'name: <skill name>'"
        )
    context = values.get("context", "")
    if context not in _CONTEXT_MODES:
        raise SkillError(
            f"skill file {path!r}: context {context!r} is not one of 'fork', "
            "'fork_with_context' (or none, for inline)"
        )
    return Skill(
        name=name,
        description=values.get("description", ""),
        content=body.strip(),
        base_directory=posixpath.dirname(path) or ".",
        context=context,
        agent=values.get("agent", ""),
        model=values.get("model", ""),
    )


def _split_front_matter(text: str, path: str) -> tuple[str, str]:
    data = text.strip()
    if not data.startswith("---"):
        raise SkillError(
            f"skill file {path!r} has no front matter: it must start with a line '---', then "
            "YAML with at least 'name' and 'description', then a line '---', then the "
            "instructions"
        )
    rest = data[3:]
    end = rest.find("\n---")
    if end == -1:
        raise SkillError(
            f"skill file {path!r}: its front matter is not closed; add a line '---' after it"
        )
    body = rest[end + len("\n---"):]
    return rest[:end], body[1:] if body.startswith("\n") else body


def load_skills(backend: Backend, base_dir: str) -> list[Skill]:
    """The skills in the directories right under ``base_dir``, sorted by name.

    A missing ``base_dir`` has no skills. A ``SKILL.md`` that is not a valid skill (or that
    the backend refuses to read: too large, binary) is left out with a warning on the
    ``agentkit`` logger, and so are all the skills that share a name (none of them wins: a
    skill written later must not take over another's name).
    """
    try:
        paths = backend.glob(f"*/{SKILL_FILE}", base_dir)
    except FileNotFoundError:
        return []
    named: dict[str, list[Skill]] = {}
    for path in paths:
        try:
            skill = parse_skill(backend.read(path), path)
        except (SkillError, BackendError, OSError) as error:
            _logger.warning("agentkit: skill left out: %s", _reason(error, path))
            continue
        named.setdefault(skill.name, []).append(skill)
    skills = []
    for name, same in named.items():
        if len(same) > 1:
            where = ", ".join(repr(skill.base_directory) for skill in same)
            _logger.warning(
                "agentkit: skills left out: %d skills are named %r (%s); skill names must be "
                "unique, rename all but one",
                len(same),
                name,
                where,
            )
            continue
        skills.append(same[0])
    return sorted(skills, key=lambda skill: skill.name)


def _reason(error: BaseException, path: str) -> str:
    if isinstance(error, SkillError):
        return str(error)
    return f"skill file {path!r} cannot be read: {error}"


class SkillMiddleware(AgentMiddleware):
    """Gives an agent the skills under ``base_dir`` of ``backend`` through a ``skill`` tool.

    Args:
        backend: where the skills are.
        base_dir: the directory holding one directory per skill (default ``"skills"``).
        tool_name: the tool's name (default ``"skill"``).
        agents: agents for ``context: fork`` skills, by the name their front matter gives in
            ``agent``.
        default_agent: the agent for fork skills whose front matter names none.
        models: chat models for forked skills, by the name their front matter gives in
            ``model`` (the fork's agent, a ``ChatModelAgent``, runs with that model).
        instruction: the section added to the agent's instruction (``{tool_name}`` is
            replaced); default: a short guide to using skills.
        language: the language of the default section and of the tool's description, ``"en"``
            or ``"zh"`` (``None``: the process's, :func:`agentkit.language.set_language`).

    Raises:
        AgentConfigError: ``base_dir`` or ``tool_name`` is empty.
    """

    def __init__(
        self,
        backend: Backend,
        base_dir: str = "skills",
        *,
        tool_name: str = "skill",
        agents: Mapping[str, Agent] | None = None,
        default_agent: Agent | None = None,
        models: Mapping[str, ChatModel] | None = None,
        instruction: str | None = None,
        language: str | None = None,
    ) -> None:
        if not isinstance(base_dir, str) or not base_dir:
            raise AgentConfigError(f"base_dir must name a directory (got {base_dir!r})")
        if not isinstance(tool_name, str) or not tool_name:
            raise AgentConfigError(f"tool_name must be a non-empty string (got {tool_name!r})")
        self._backend = backend
        self._base = base_dir
        self._tool_name = tool_name
        self._agents = dict(agents or {})
        self._default = default_agent
        self._models = dict(models or {})
        # The plain forks' tools, made once (and the agents checked: a name, a description).
        self._tools = {name: AgentTool(agent) for name, agent in self._agents.items()}
        self._default_tool = AgentTool(default_agent) if default_agent is not None else None
        prompt, self._description = _TEXTS[resolve(language)]
        self._instruction = (instruction or prompt).replace("{tool_name}", tool_name)

    def skills(self) -> list[Skill]:
        """The skills as they are now in the backend."""
        return load_skills(self._backend, self._base)

    def before_agent(self, context: AgentContext) -> None:
        """Find the skills; add the ``skill`` tool listing them, and the instruction section.

        A ``SKILL.md`` that is not a valid skill is left out with a warning (see
        :func:`load_skills`).
        """
        skills = {skill.name: skill for skill in self.skills()}
        context.instruction = f"{context.instruction}\n{self._instruction}"
        tool = _SkillTool(self, self._tool_name, skills, self._description)
        add_tools(context, [tool], type(self).__name__)

    def run_fork(self, skill: Skill, tool_options: dict[str, Any]) -> str:
        """Run a ``context: fork`` or ``fork_with_context`` skill on its agent (with its
        model); return the tool's result."""
        agent = self._agents.get(skill.agent) if skill.agent else self._default
        if agent is None:
            wanted = f"agent {skill.agent!r}" if skill.agent else "a default agent"
            configured = (
                "SkillMiddleware(agents={...})" if skill.agent
                else "SkillMiddleware(default_agent=...)"
            )
            raise ToolArgumentsError(
                f"skill {skill.name!r} runs as a sub-agent (context: {skill.context}) and needs "
                f"{wanted}, which was not given ({configured}); use another skill",
                tool_name=self._tool_name,
            )
        tool = self._tools.get(skill.agent) if skill.agent else self._default_tool
        if skill.model:
            agent = self._with_model(skill, agent)
        if skill.context == "fork_with_context":
            frame = current_frame()
            call = frame.tool if frame is not None else None
            agent = _ForkWithContext(agent, _caller_context(call), skill_content(skill))
        if tool is None or skill.model or skill.context == "fork_with_context":
            tool = AgentTool(agent)
        request = json.dumps({"request": skill_content(skill)}, ensure_ascii=False)
        result = tool.invoke(request, **tool_options)
        return f'Skill "{skill.name}" completed (sub-agent execution).\n\nResult:\n{result}'

    def _with_model(self, skill: Skill, agent: Agent) -> Agent:
        model = self._models.get(skill.model)
        if model is None:
            known = ", ".join(repr(name) for name in self._models) or "none"
            raise ToolArgumentsError(
                f"skill {skill.name!r} asks for model {skill.model!r}, which was not given to "
                f"SkillMiddleware(models={{...}}) (the models: {known}); use another skill",
                tool_name=self._tool_name,
            )
        if not isinstance(agent, ChatModelAgent):
            raise ToolArgumentsError(
                f"skill {skill.name!r} asks for model {skill.model!r}, but its agent "
                f"{agent.name!r} is not a ChatModelAgent, whose model could be changed; use "
                "another skill",
                tool_name=self._tool_name,
            )
        return agent.replace(model=model)


def _caller_context(call: ToolCallFrame | None) -> list[Message]:
    """The caller's conversation before the ``skill`` call, as a forked agent sees it: no
    system message, the caller's replies and tool results rewritten as context."""
    if call is None:
        return []
    messages = []
    for message in call.history[:-1]:  # the last one holds the skill call itself
        if message.role is Role.SYSTEM:
            continue
        if message.role in (Role.ASSISTANT, Role.TOOL):
            message = rewrite_message(message, call.agent_name)
        messages.append(message)
    return messages


class _ForkWithContext(BaseAgent):
    """Runs a skill's agent on the caller's conversation followed by the skill's
    instructions (its own input, a request, is not used)."""

    def __init__(self, agent: Agent, context: list[Message], instructions: str) -> None:
        self._agent = agent
        self.name = agent.name
        self.description = agent.description
        self._messages = [*context, user_message(instructions)]

    def execute(self, run: AgentRun) -> None:
        """Run the skill's agent one level below, on the caller's context."""
        given = AgentInput(list(self._messages), run.input.enable_streaming)
        run.run_child(self._agent, given)


def skill_content(skill: Skill) -> str:
    """What an inline skill puts in the conversation after ``Launching skill: <name>``."""
    return f"Base directory for this skill: {skill.base_directory}\n\n{skill.content}"


class _SkillTool:
    """The ``skill`` tool of one run: the skills found when the run started."""

    __slots__ = ("_info", "_middleware", "_skills")

    def __init__(
        self,
        middleware: SkillMiddleware,
        name: str,
        skills: dict[str, Skill],
        description: str,
    ) -> None:
        self._middleware = middleware
        self._skills = skills
        listing = "".join(
            f"<skill>\n<name>\n{skill.name}\n</name>\n<description>\n{skill.description}\n"
            "</description>\n</skill>\n"
            for skill in skills.values()
        )
        self._info = ToolInfo(
            name=name,
            description=f"{description}\n<available_skills>\n{listing}</available_skills>\n",
            parameters=object_schema(
                {
                    "skill": {
                        "type": "string",
                        "description": 'The skill name (no arguments). E.g., "pdf" or "xlsx"',
                    }
                },
                ("skill",),
            ),
        )

    def info(self) -> ToolInfo:
        return self._info

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        name = self._info.name
        wanted = checked_arguments(self._info, arguments)["skill"]
        skill = self._skills.get(wanted)
        if skill is None:
            known = ", ".join(repr(known) for known in self._skills) or "none"
            raise ToolArgumentsError(
                f"{name}: there is no skill named {wanted!r}; the skills are: {known}",
                tool_name=name,
            )
        if skill.context in ("fork", "fork_with_context"):
            return self._middleware.run_fork(skill, tool_options)
        return f"Launching skill: {skill.name}\n{skill_content(skill)}"


_SYSTEM_PROMPT = """
# Skills

Skills are instructions for particular kinds of work. The '{tool_name}' tool lists them by name
and description; a skill's full instructions are loaded only when you call the tool.

- When a task matches a skill's description, call '{tool_name}' with that skill's name first,
  before anything else about the task, and then follow its instructions.
- A skill may refer to files (references, templates, scripts): they are in the skill's base
  directory, given with its instructions; read them with your file tools by that path.
- Only call skills that are listed, and do not load a skill that is already loaded."""

_TOOL_DESCRIPTION = """Loads a skill: instructions for a particular kind of work.

Call it with the exact name of one of the skills below, as soon as a task matches the
skill's description and before you work on the task. The result holds the skill's
instructions and its base directory (paths in the instructions are relative to it).
"""

_TEXTS = {
    "en": (_SYSTEM_PROMPT, _TOOL_DESCRIPTION),
    "zh": (zh.SKILLS_SYSTEM_PROMPT, zh.SKILLS_TOOL_DESCRIPTION),
}

present(
    (
        SkillMiddleware,
    ),
    "agentkit.middlewares",
)

present(
    (
        Skill,
        SkillError,
        load_skills,
        parse_skill,
        skill_content,
    ),
    "agentkit.middlewares.skill",
)
