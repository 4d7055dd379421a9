"""Per-run options: :class:`~agentkit.AgentRunOption` and the ``with_*`` functions that make them.

They are imported from the top level (``from agentkit import with_checkpoint_id``); this
module holds :class:`AgentOptions`, what ``AgentRun.options`` is. Their spellings here
(``agentkit.options.with_cancel``) go in agentkit 0.4.

An option targets one options type and holds a function that updates an instance of it.
Each component reads the options made for its own type with
:func:`~agentkit.get_impl_specific_options` and ignores the rest, so custom agents can define
options the same way the built-in ones do::

    @attrs.define
    class SearchOptions:
        depth: int = 1

    def with_depth(depth: int) -> AgentRunOption:
        return wrap_impl_specific_opt_fn(SearchOptions, lambda o: setattr(o, "depth", depth))

    # inside the custom agent's run():
    opts = get_impl_specific_options(SearchOptions(), *options)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach, present
from agentkit._options import AgentOptions, with_agent_tool_run_options

__all__ = ["AgentOptions", "with_agent_tool_run_options"]

# Defined in a private module, documented here: what ``AgentRun.options`` is, and the
# option only this module exports.
present((AgentOptions, with_agent_tool_run_options), __name__)

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "custom_option": "agentkit.wrap_impl_specific_opt_fn",
            "custom_options": "agentkit.get_impl_specific_options",
            **{
                name: f"agentkit.{name}"
                for name in (
                    "AgentRunOption",
                    "wrap_impl_specific_opt_fn",
                    "get_impl_specific_options",
                    "with_cancel",
                    "with_chat_model_options",
                    "with_checkpoint_id",
                    "with_conversation_id",
                    "with_limits",
                    "with_session_values",
                    "with_skip_transfer_messages",
                    "with_tool_options",
                )
            },
        },
    )
