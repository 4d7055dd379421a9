"""An A2A pair: a payments agent served over A2A, and a supervisor that calls it as a tool.

The payments agent is a WSGI app (``to_a2a``) on a loopback port; the supervisor uses it
through ``RemoteA2AAgent`` inside an ``AgentTool``. The remote payment needs approval: the
remote task goes to ``input-required``, the supervisor's run interrupts with an
``A2AInputRequired``, and the approval given here crosses the boundary as the next message on
the remote task. Needs ``pip install 'agentkit[a2a,flask]'``.

    python samples/a2a_pair.py               # approves the payment
    python samples/a2a_pair.py --reject      # rejects it

Offline by default (scripted models play the LLMs); live with ``OPENAI_API_KEY`` (see
samples/quickstart.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import make_model
from werkzeug.serving import make_server

from agentkit import AgentTool, ChatModelAgent, Message, Role, Runner, tool, with_checkpoint_id
from agentkit.a2a import A2AInputRequired, RemoteA2AAgent, to_a2a
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.testing import call, calls_message


@tool(needs_approval=True)
def pay(payee: str, amount: int) -> str:
    """Pay a supplier (needs approval)."""
    return f"paid {amount} EUR to {payee}"


def payments_script(messages: list[Message]) -> Message | str:
    """The offline payments model: pays what it is asked, then reports."""
    last = messages[-1]
    if last.role == Role.TOOL:
        return last.content
    return calls_message(call("pay", {"payee": "ACME", "amount": 120}))


def supervisor_script(messages: list[Message]) -> Message | str:
    """The offline supervisor model: hands the payment to the payments agent."""
    last = messages[-1]
    if last.role == Role.TOOL:
        return f"Done: {last.content}"
    return calls_message(call("payments", {"request": "Pay ACME 120 EUR"}))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reject", action="store_true", help="reject the payment")
    args = parser.parse_args(argv)

    payments = ChatModelAgent(
        "payments", "Pays suppliers.", make_model(payments_script), tools=[pay]
    )
    app = to_a2a(payments)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    serving = threading.Thread(target=server.serve_forever, name="a2a-server", daemon=True)
    serving.start()
    url = f"http://127.0.0.1:{server.server_port}"
    try:
        remote = RemoteA2AAgent(url)
        print(f"remote agent: {remote.name} at {url}")
        boss = ChatModelAgent(
            "supervisor", "Runs the office.", make_model(supervisor_script),
            tools=[AgentTool(remote)],
        )
        runner = Runner(boss, checkpoint_store=InMemoryCheckPointStore())
        result = runner.invoke("Please pay ACME 120 EUR", with_checkpoint_id("office-1"))
        assert result.interrupt is not None, "the remote payment should wait for approval"
        [point] = result.interrupt.contexts
        assert isinstance(point.info, A2AInputRequired)
        print(f"waiting: {point.info.question}")
        decision = "reject" if args.reject else "approve"
        print(f"answer: {decision}")
        done = runner.resume("office-1", targets={point.id: decision}).result()
        print(f"supervisor: {done.text}")
    finally:
        server.shutdown()
        serving.join(30)
        app.close()


if __name__ == "__main__":
    main()
