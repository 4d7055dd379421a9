"""Tools kept hidden until the model finds them (Eino's ``dynamictool/toolsearch``).

An agent with many tools sends every schema with every model call. With
:class:`~agentkit.middlewares.ToolSearchMiddleware` the "dynamic" tools are left out of what
the model is offered until it looks for them with the ``tool_search`` tool:

1. The agent gets ``tool_search`` and the dynamic tools; before every model call the dynamic
   tools the model has not found yet are taken out of the tools it is offered.
2. A user message listing the dynamic tools' names (``<available-deferred-tools>``) is put in
   the conversation once, after the system messages.
3. ``tool_search`` takes ``{"query": ..., "max_results": 5}``: keywords ranked against the
   tools' names and descriptions (``+word`` makes a word required), or
   ``select:name1,name2`` for tools the model knows by name. It answers
   ``{"matches": ["name", ...]}``, and from the next model call on those tools are offered.

A dynamic tool the model calls before finding it still runs (as in Eino): hiding saves
context, it is not a permission.

With ``use_model_tool_search=True`` (Eino's ``UseModelToolSearch``) the model searches
itself: there is no ``tool_search`` tool and nothing is hidden by the middleware; the
dynamic tools are offered to the model as deferred (``deferred=True`` in their
:class:`~agentkit.ToolInfo`, Eino's ``DeferredToolInfos``) from the first model call on,
and a model with a server-side tool search (:class:`~agentkit.models.AnthropicChatModel`,
:class:`~agentkit.models.OpenAIResponsesModel`) sends them with ``defer_loading`` and its
search tool. Its tool list stays the same for the whole run, so the provider's prompt
cache holds. A model without one raises
:class:`~agentkit.models.ToolSearchUnsupportedError` at the first model call. The reminder
message is put in the conversation in both modes, as in Eino.

``ToolSearchMiddleware`` moved to :mod:`agentkit.middlewares`; their spellings here still work
until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.middlewares._tool_search import (
    DEFAULT_MAX_RESULTS,
    TOOL_SEARCH,
    search_tools,
    split_tool_name,
)

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "TOOL_SEARCH",
    "search_tools",
    "split_tool_name",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "ToolSearchMiddleware": "agentkit.middlewares.ToolSearchMiddleware",
        },
    )
