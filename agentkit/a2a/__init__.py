"""A2A (Agent2Agent): serve an agentkit agent to other agents, and call remote A2A agents.

Needs the ``a2a`` extra (``pip install 'agentkit[a2a]'``)::

    from agentkit.a2a import to_a2a

    app = to_a2a(agent)          # a WSGI application: the agent card and JSON-RPC at /

:func:`to_a2a` speaks A2A protocol 0.3 over JSON-RPC 2.0 (``message/send``,
``message/stream``, ``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``), with the
``a2a-sdk`` package's types on the wire. It needs no ASGI server: serve it with any WSGI
server, or mount it in a Flask app. :class:`RemoteA2AAgent` is the other direction: a remote
A2A agent as an agentkit agent::

    from agentkit.a2a import RemoteA2AAgent

    travel = RemoteA2AAgent("https://travel.example.com/a2a")
    supervisor = ChatModelAgent("boss", "plans trips", model, tools=[AgentTool(travel)])
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach

__all__ = ["A2AApplication", "A2AError", "A2AInputRequired", "RemoteA2AAgent", "to_a2a"]

if TYPE_CHECKING:
    from agentkit.a2a._client import A2AError, A2AInputRequired, RemoteA2AAgent
    from agentkit.a2a._server import A2AApplication, to_a2a
else:
    __getattr__, __dir__ = attach(
        __name__,
        {
            "A2AApplication": "agentkit.a2a._server",
            "to_a2a": "agentkit.a2a._server",
            "A2AError": "agentkit.a2a._client",
            "A2AInputRequired": "agentkit.a2a._client",
            "RemoteA2AAgent": "agentkit.a2a._client",
        },
    )
