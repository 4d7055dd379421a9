"""Skills: instructions in ``SKILL.md`` files, loaded into the conversation when the model asks
for one (Eino's ``skill`` middleware).

A skill is a directory under a base directory of a :class:`~agentkit.backends.Backend`, with
a ``SKILL.md`` that starts with YAML front matter::

    skills/
      web-research/
        SKILL.md          ---
        sources.md        name: web-research
                          description: How to research a topic and cite sources.
                          ---
                          1. List the questions to answer. ...

:class:`~agentkit.middlewares.SkillMiddleware` finds the skills at the start of every run
(``*/SKILL.md`` directly under the base directory; deeper files are ignored), lists their names
and descriptions in the description of a ``skill`` tool, and adds a short section on using
skills to the instruction. When the model calls ``skill`` with ``{"skill": "<name>"}``:

- **inline** (the default, Eino's inline mode): the tool's result is
  ``Launching skill: <name>`` followed by the skill's base directory and its instructions, so
  they enter the conversation only when needed. Files the skill mentions are read with the
  file tools, under its base directory.
- **fork** (front matter ``context: fork``): the instructions are given as the user message to
  an agent of your own (``agents[<front matter agent>]``, or ``default_agent`` when the front
  matter names none), which runs as an :class:`~agentkit.AgentTool` (a fresh context); the
  result is ``Skill "<name>" completed (sub-agent execution).`` and that agent's final answer.
- **fork with context** (front matter ``context: fork_with_context``): the same, but the agent
  first sees the caller's conversation up to the ``skill`` call (system messages left out,
  the caller's replies and tool results as context, as a transfer shows them), then the
  instructions as the last user message.

A forked skill's front matter ``model`` names one of the ``models`` given to the middleware
(Eino's model hub): its agent, a :class:`~agentkit.ChatModelAgent`, runs with that model. An
inline skill's ``model`` is not used (the running agent keeps its model).

A ``SKILL.md`` that is not a valid skill (no front matter, front matter that is not YAML with
a ``name``, or past the bounds below) and skills that share a name are left out, each with a
warning on the ``agentkit`` logger naming the file and what to fix: the model itself can write
files in the backend, and one bad file must not end every later run. :func:`parse_skill`
raises :class:`SkillError` for them. Front matter is YAML parsed within bounds: at most 65,536
characters, 20 aliases and 20 levels of nesting, and 10,000 values once its aliases are
expanded (a YAML alias bomb of 500 bytes stands for billions). A call of an unknown skill is
told to the model, with the names of the skills there are.

``SkillMiddleware`` moved to :mod:`agentkit.middlewares`; their spellings here still work until
agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.middlewares._skill import (
    SKILL_FILE,
    Skill,
    SkillError,
    load_skills,
    parse_skill,
    skill_content,
)

__all__ = [
    "SKILL_FILE",
    "Skill",
    "SkillError",
    "load_skills",
    "parse_skill",
    "skill_content",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "SkillMiddleware": "agentkit.middlewares.SkillMiddleware",
        },
    )
