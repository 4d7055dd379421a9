"""Middleware: add behaviour around a ChatModelAgent's run, model calls and tool calls.

Subclass :class:`~agentkit.AgentMiddleware`, override the methods you need (the others do
nothing), and pass instances in ``ChatModelAgent(..., middlewares=[...])``. The list is an
onion: the first middleware is the outermost. ``before_*`` hooks run in list order,
``after_model`` and ``after_agent`` in reverse order (the outermost sees the final message, and
ends last), and ``wrap_*`` layers nest with the first one outermost.

Example, a middleware that logs every tool call and refuses one tool::

    class Guard(AgentMiddleware):
        def wrap_tool_call(self, call, invoke):
            if call.name == "delete_everything":
                return "Error: this tool is disabled."     # short-circuit: the tool never runs
            started = time.perf_counter()
            try:
                return invoke(call)
            finally:
                log.info("%s took %.3f s", call.name, time.perf_counter() - started)

    agent = ChatModelAgent("helper", "helps", model, tools=[...], middlewares=[Guard()])

Inside any hook (and inside tools) :func:`~agentkit.set_run_local_value` /
:func:`~agentkit.get_run_local_value` / :func:`~agentkit.delete_run_local_value` keep values
for the current agent run only (saved with it when it stops, so a resumed run sees them), and
:func:`~agentkit.send_event` adds a custom event to the run's event stream.

Streaming: ``wrap_model`` wraps a call that returns a whole message. In a streamed run the
model's chunks are sent to the consumer as they arrive (one event per model call the chain
makes), and the innermost call returns their concatenation; what a ``wrap_model`` layer returns
is what the agent keeps and acts on (history, tool calls), not what was streamed. In a
non-streamed run the event is sent once the whole chain returned, so it shows the message
``wrap_model`` layers returned; ``after_model`` changes are never shown in the event, only in
what the agent does next (as in Eino).

``AgentContext``, ``AgentMiddleware``, ``ModelState``, ``delete_run_local_value``,
``get_run_local_value``, ``send_event``, ``set_run_local_value`` moved to :mod:`agentkit`;
their spellings here still work until agentkit 0.4, with a :class:`DeprecationWarning`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit._middleware import (
    ContentToolInvoke,
    ModelCallable,
    ModelEventSender,
    StreamContentToolInvoke,
    StreamToolInvoke,
    ToolEventSender,
    ToolInvoke,
)

__all__ = [
    "ContentToolInvoke",
    "ModelCallable",
    "ModelEventSender",
    "StreamContentToolInvoke",
    "StreamToolInvoke",
    "ToolEventSender",
    "ToolInvoke",
]

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "AgentContext": "agentkit.AgentContext",
            "AgentMiddleware": "agentkit.AgentMiddleware",
            "ModelState": "agentkit.ModelState",
            "delete_run_local_value": "agentkit.delete_run_local_value",
            "get_run_local_value": "agentkit.get_run_local_value",
            "send_event": "agentkit.send_event",
            "set_run_local_value": "agentkit.set_run_local_value",
        },
    )
