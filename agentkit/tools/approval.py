"""Declarative approval: tool calls that wait for a human's yes, no, or edited arguments.

``@tool(needs_approval=True)`` (or a function of the call's arguments that says whether this
call needs approval), or :func:`with_approval` around any tool (an MCP tool, an agent tool):
before the call runs, the run interrupts with an :class:`ApprovalRequest` as the interrupt
info. Resume the run with the decision as the resume data of that interrupt::

    result = runner.invoke("pay ACME 120 EUR", with_checkpoint_id("pay-1"))
    [point] = result.interrupt.contexts          # point.info is an ApprovalRequest
    runner.resume("pay-1", targets={point.id: Approve()}).result()
    # or True, False, Reject(reason="too much"), Approve(arguments={"amount": 100})

* ``True`` or ``Approve()``: the call runs as the model made it.
* ``Approve(arguments={...})``: the call runs with these arguments instead.
* ``False`` or ``Reject(reason="...")``: the call does not run; the model gets a tool message
  saying the user rejected it (and why).

Each request is bound to exactly one call: when a model gives two calls of one reply the same
id, the later one gets a derived id (``<id>#2``) in the reply, its events and its result, so
approving one request never runs another call.

Approval is built on :func:`~agentkit.interrupt`, so the decision can come from another process
with any checkpoint store. The three types are saved in checkpoints under stable names.

The same decisions answer an :class:`UnfinishedToolCall`: the interrupt of a run recovered
after its process died while a call of a tool that is not idempotent ran (``True`` /
``Approve()`` run it again, ``False`` / ``Reject()`` do not; a ``str`` is used as its
result).
"""

from __future__ import annotations

from agentkit.tools._approval import (
    ApprovalPolicy,
    ApprovalRequest,
    Approve,
    Reject,
    with_approval,
)
from agentkit.tools._unfinished import UnfinishedToolCall

__all__ = [
    "Approve",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Reject",
    "UnfinishedToolCall",
    "with_approval",
]
