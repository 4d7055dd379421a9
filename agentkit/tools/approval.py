"""Declarative approval: tool calls that wait for a human's yes, no, or edited arguments.

The names are at the top level (``from agentkit import Approve, Reject, with_approval``);
this module documents them and holds :data:`ApprovalPolicy`.

``@tool(needs_approval=True)`` (or a function of the call's arguments that says whether this
call needs approval), or :func:`~agentkit.with_approval` around any tool (an MCP tool, an
agent tool): before the call runs, the run interrupts with an
:class:`~agentkit.ApprovalRequest` as the interrupt info. Resume the run with the decision as
the resume data of that interrupt::

    result = runner.invoke("pay ACME 120 EUR", with_checkpoint_id("pay-1"))
    [point] = result.interrupt.contexts          # point.info is an ApprovalRequest
    runner.resume("pay-1", targets={point.id: Approve()}).result()
    # or True, False, Reject(reason="too much"), Approve(arguments={"amount": 100})

* ``True`` or ``Approve()``: the call runs as the model made it.
* ``Approve(arguments={...})``: the call runs with these arguments instead.
* ``False`` or ``Reject(reason="...")``: the call does not run; the model gets a tool message
  saying the user rejected it (and why).
* As JSON (resume data that travels to a Celery worker must be JSON), in the shape the AG-UI,
  A2A and MCP approvals take: ``{"decision": "approve"}``, ``{"decision": "edit",
  "arguments": {...}}``, ``{"decision": "reject", "reason": "..."}`` (``reason`` optional).

Each request is bound to exactly one call: when a model gives two calls of one reply the same
id, the later one gets a derived id (``<id>#2``) in the reply, its events and its result, so
approving one request never runs another call.

Approval is built on :func:`~agentkit.interrupt`, so the decision can come from another process
with any checkpoint store. The three types are saved in checkpoints under stable names.

The same decisions answer an :class:`~agentkit.UnfinishedToolCall`: the interrupt of a run recovered
after its process died while a call of a tool that is not idempotent ran (``True`` /
``Approve()`` run it again, ``False`` / ``Reject()`` do not; a ``str`` is used as its
result).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach
from agentkit.tools._approval import ApprovalPolicy

__all__ = ["ApprovalPolicy"]

if not TYPE_CHECKING:
    # The decisions and requests are imported from the top level (``from agentkit import
    # Approve``); their spellings here go in agentkit 0.4.
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            name: f"agentkit.{name}"
            for name in (
                "ApprovalRequest",
                "Approve",
                "Reject",
                "UnfinishedToolCall",
                "with_approval",
            )
        },
    )
