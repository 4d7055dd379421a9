"""Per-run options: :class:`AgentRunOption` and the ``with_*`` functions that make them.

An option targets one options type and holds a function that updates an instance of it.
Each component reads the options made for its own type with :func:`custom_options` and
ignores the rest, so custom agents can define options the same way the built-in ones do::

    @attrs.define
    class SearchOptions:
        depth: int = 1

    def with_depth(depth: int) -> AgentRunOption:
        return custom_option(SearchOptions, lambda o: setattr(o, "depth", depth))

    # inside the custom agent's run():
    opts = custom_options(SearchOptions(), *options)

``wrap_impl_specific_opt_fn`` and ``get_impl_specific_options`` are Eino's names for
:func:`custom_option` and :func:`custom_options` (the same functions).
"""

from __future__ import annotations

from agentkit._lazy import present
from agentkit._options import (
    AgentOptions,
    AgentRunOption,
    custom_option,
    custom_options,
    get_impl_specific_options,
    with_agent_tool_run_options,
    with_cancel,
    with_chat_model_options,
    with_checkpoint_id,
    with_conversation_id,
    with_limits,
    with_session_values,
    with_skip_transfer_messages,
    with_tool_options,
    wrap_impl_specific_opt_fn,
)

__all__ = [
    "AgentOptions",
    "AgentRunOption",
    "custom_option",
    "custom_options",
    "get_impl_specific_options",
    "with_agent_tool_run_options",
    "with_cancel",
    "with_chat_model_options",
    "with_checkpoint_id",
    "with_conversation_id",
    "with_limits",
    "with_session_values",
    "with_skip_transfer_messages",
    "with_tool_options",
    "wrap_impl_specific_opt_fn",
]

# Defined in a private module, documented here: what ``AgentRun.options`` is, and the
# option only this module exports.
present((AgentOptions, with_agent_tool_run_options), __name__)
