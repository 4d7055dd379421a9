"""Tools kept hidden until the model finds them (Eino's ``dynamictool/toolsearch``).

The definitions behind :mod:`agentkit.middlewares.tool_search`, whose docstring documents them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from agentkit._lazy import present
from agentkit._middleware import AgentContext, AgentMiddleware, ModelState
from agentkit.errors import AgentConfigError, ToolArgumentsError
from agentkit.middlewares._tool import SchemaTool, add_tools, object_schema
from agentkit.schema import Message, Role, ToolInfo
from agentkit.tools._base import BaseTool
from agentkit.tools._function import as_tool

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "TOOL_SEARCH",
    "ToolSearchMiddleware",
    "search_tools",
    "split_tool_name",
]

TOOL_SEARCH = "tool_search"
"""The name of the search tool."""

DEFAULT_MAX_RESULTS = 5
"""How many tools a keyword search returns when the model does not say."""
_REMINDER_KEY = "__toolsearch_reminder__"

_DESCRIPTION = """Finds deferred tools and makes them available to call.

Some tools are deferred: they are listed by name in an <available-deferred-tools> message, and
you cannot call them until this tool returns them. Every tool it returns can be called right
away, from your next step on.

Query modes:
1. Keywords, when you do not know the exact tool: "send message", "calendar event". Returns up
   to max_results tools (default 5), best first.
2. select:<name>, when you know the name: "select:get_weather", or several at once:
   "select:get_weather,search_flights".
3. A word with a leading + must match: "+slack send" returns only Slack tools, ranked by
   "send".

A keyword search loads its results already: do not select them again."""

_SCHEMA = object_schema(
    {
        "query": {
            "type": "string",
            "description": 'Query to find deferred tools. Use "select:<tool_name>" for direct '
            "selection, or keywords to search.",
        },
        "max_results": {
            "type": "integer",
            "description": "Maximum number of results to return (default: 5)",
        },
    },
    ("query",),
)


class ToolSearchMiddleware(AgentMiddleware):
    """Keeps ``tools`` out of what the model is offered until ``tool_search`` finds them.

    Args:
        tools: the dynamic tools (tools or plain functions); the agent's own tools stay
            visible.
        use_model_tool_search: hand the dynamic tools to the model as deferred tools for
            its own server-side search (see the module documentation) instead of adding
            ``tool_search``. Needs a model that has one
            (:class:`~agentkit.models.AnthropicChatModel`,
            :class:`~agentkit.models.OpenAIResponsesModel`); others raise
            :class:`~agentkit.models.ToolSearchUnsupportedError` at the first model call.

    Raises:
        AgentConfigError: no tools, or two with one name.

    Example::

        search = ToolSearchMiddleware([send_email, create_event], use_model_tool_search=True)
        agent = ChatModelAgent("assistant", "Helps.", AnthropicChatModel("claude-sonnet-4-5"),
                               middlewares=[search])
    """

    def __init__(
        self, tools: Iterable[BaseTool | Any], *, use_model_tool_search: bool = False
    ) -> None:
        dynamic = [as_tool(item) for item in tools]
        if not dynamic:
            raise AgentConfigError("ToolSearchMiddleware needs at least one dynamic tool")
        infos: dict[str, ToolInfo] = {}
        for item in dynamic:
            info = item.info()
            if info.name in infos:
                raise AgentConfigError(f"two dynamic tools are named {info.name!r}")
            infos[info.name] = info
        self._tools = tuple(dynamic)
        self._infos = infos
        self._native = bool(use_model_tool_search)
        names = "\n".join(infos)
        self._reminder = f"<available-deferred-tools>\n{names}\n</available-deferred-tools>"
        self._search = SchemaTool(TOOL_SEARCH, _DESCRIPTION, _SCHEMA, self._run_search)

    @property
    def reminder(self) -> str:
        """The message listing the dynamic tools' names."""
        return self._reminder

    @property
    def use_model_tool_search(self) -> bool:
        """Whether the model's own tool search finds the dynamic tools (no ``tool_search``)."""
        return self._native

    def before_agent(self, context: AgentContext) -> None:
        """Add the dynamic tools to the run, and ``tool_search`` unless the model searches."""
        added = self._tools if self._native else (self._search, *self._tools)
        add_tools(context, list(added), type(self).__name__)

    def before_model(self, state: ModelState) -> None:
        """Put the reminder in the conversation; offer only the dynamic tools found so far
        (or, when the model searches, every dynamic tool as deferred)."""
        if not any(message.extra.get(_REMINDER_KEY) for message in state.messages):
            state.messages = _with_reminder(state.messages, self._reminder)
        if self._native:
            self._defer(state)
            return
        found = self._found(state.messages)
        visible = [info for info in state.tools if info.name not in self._infos]
        visible.extend(self._infos[name] for name in found)
        if [info.name for info in visible] != [info.name for info in state.tools]:
            state.tools = visible

    def _defer(self, state: ModelState) -> None:
        """Offer the dynamic tools as deferred (Eino's ``DeferredToolInfos``).

        The first call of a run changes the list; later calls find it deferred already and
        leave it as it is (the agent keeps a changed list for the run).
        """
        dynamic = self._infos
        tools = state.tools
        if all(info.deferred or info.name not in dynamic for info in tools):
            return
        state.tools = [
            attrs.evolve(info, deferred=True)
            if info.name in dynamic and not info.deferred
            else info
            for info in tools
        ]

    def _found(self, messages: Sequence[Message]) -> list[str]:
        """The dynamic tools ``tool_search`` returned in ``messages``, in the order found."""
        found: dict[str, None] = {}
        for message in messages:
            if message.role is not Role.TOOL or message.tool_name != TOOL_SEARCH:
                continue
            try:
                result = json.loads(message.content)
            except ValueError:
                continue
            matches = result.get("matches") if isinstance(result, dict) else None
            for name in matches if isinstance(matches, list) else ():
                if isinstance(name, str) and name in self._infos:
                    found[name] = None
        return list(found)

    def _run_search(self, arguments: dict[str, Any]) -> str:
        query = arguments["query"].strip()
        if not query:
            raise ToolArgumentsError(f"{TOOL_SEARCH}: the query is empty", tool_name=TOOL_SEARCH)
        limit = arguments.get("max_results") or DEFAULT_MAX_RESULTS
        matches = search_tools(query, self._infos, limit if limit > 0 else DEFAULT_MAX_RESULTS)
        return json.dumps({"matches": matches}, separators=(",", ":"))


def _with_reminder(messages: list[Message], reminder: str) -> list[Message]:
    """``messages`` with the reminder after the leading system messages."""
    note = Message(Role.USER, reminder, extra={_REMINDER_KEY: True})
    position = 0
    while position < len(messages) and messages[position].role is Role.SYSTEM:
        position += 1
    return [*messages[:position], note, *messages[position:]]


def search_tools(query: str, tools: dict[str, ToolInfo], max_results: int) -> list[str]:
    """The names of the tools that ``query`` finds, best first (Eino's scoring).

    ``select:a,b`` picks tools by name (all that exist, ``max_results`` not applied).
    Otherwise each keyword scores a tool by its best hit: 10 for a word of the name, 5 for a
    word of the name containing it, 3 for the name containing it, 2 for the description; a
    ``+keyword`` must hit. Ties go by name.
    """
    if query.startswith("select:"):
        wanted = (name.strip() for name in query[len("select:"):].split(","))
        return [name for name in dict.fromkeys(wanted) if name and name in tools]
    keywords = [
        (word.lstrip("+").lower(), word.startswith("+"))
        for word in query.split()
        if word.lstrip("+")
    ]
    if not keywords:
        return []
    scored: list[tuple[int, str]] = []
    for name, info in tools.items():
        score = _score(name, info.description, keywords)
        if score > 0:
            scored.append((-score, name))
    return [name for _, name in sorted(scored)[:max_results]]


def _score(name: str, description: str, keywords: list[tuple[str, bool]]) -> int:
    parts = [part.lower() for part in split_tool_name(name)]
    lowered, text = name.lower(), description.lower()
    total = 0
    for word, required in keywords:
        score = 0
        for part in parts:
            if part == word:
                score = max(score, 10)
            elif word in part:
                score = max(score, 5)
        if word in lowered:
            score = max(score, 3)
        if text and word in text:
            score = max(score, 2)
        if required and score == 0:
            return 0
        total += score
    return total


def split_tool_name(name: str) -> list[str]:
    """The words of a tool name: split at ``__``, ``_`` and camelCase (``getURL`` -> get, URL)."""
    words: list[str] = []
    for segment in name.split("__"):
        for piece in segment.split("_"):
            if piece:
                words.extend(_split_camel_case(piece))
    return words


def _split_camel_case(text: str) -> list[str]:
    words: list[str] = []
    start = 0
    for index in range(1, len(text)):
        if text[index].isupper() and (
            text[index - 1].islower()
            or (index + 1 < len(text) and text[index + 1].islower())
        ):
            words.append(text[start:index])
            start = index
    words.append(text[start:])
    return words

present(
    (
        ToolSearchMiddleware,
    ),
    "agentkit.middlewares",
)

present(
    (
        search_tools,
        split_tool_name,
    ),
    "agentkit.middlewares.tool_search",
)
