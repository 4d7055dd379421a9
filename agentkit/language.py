"""The language of agentkit's built-in prompts: English (the default) or Chinese.

Eino's ``adk.SetLanguage``. The prompts agentkit writes for a model (the deep agent's
instruction and tools, the plan-execute prompts, the transfer instruction, the summarization
instruction, the skills section) exist in English and Chinese::

    from agentkit.language import set_language

    set_language("zh")   # the built-in prompts made from now on are in Chinese

The setting is process-wide and read when a component makes its prompts: a deep agent, a
plan-execute agent or a middleware when it is built (an agent built before keeps its
language), the transfer instruction when an agent that can transfer runs. Each of those
builders also takes ``language="zh"`` for one agent. Prompts you give yourself are used as
they are.
"""

from __future__ import annotations

from agentkit._language import LANGUAGES, get_language, set_language
from agentkit._lazy import present

__all__ = ["LANGUAGES", "get_language", "set_language"]

present((get_language, set_language), __name__)
