"""An operations page for the approvals of many runs: list them by owner, decide each once.

Two payment runs (one of Alice's, one of Bob's) stop for approval and are saved in a SQLite
checkpoint store. A small Flask app serves the inbox over them:

* ``GET /approvals?owner=alice``: a page with the owner's pending approvals, oldest first;
  ``GET /api/approvals?owner=alice``: the same as JSON.
* ``POST /api/approvals/<run_id>/<interrupt_id>`` with ``{"decision": "approve" | "edit" |
  "reject", "arguments": {...}, "reason": "...", "by": "...", "owner": "..."}``: decides one
  (409 when someone decided it already, saying who; 410 when it expired; 404 otherwise).
* ``GET /api/approvals/log``: the audit log.

    python samples/approval_inbox.py              # starts two runs, decides them over HTTP
    python samples/approval_inbox.py --serve      # http://127.0.0.1:5001/approvals?owner=alice

Offline by default (a scripted model); live with ``OPENAI_API_KEY``. The app has no login: a
real one takes ``owner`` and ``by`` from the signed-in user, not from the request.
"""

from __future__ import annotations

import argparse
import html
import os
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import make_model
from flask import Flask, Response, jsonify, request

from agentkit import (
    Approve,
    ChatModelAgent,
    Message,
    Reject,
    Role,
    Runner,
    tool,
    with_checkpoint_id,
    with_session_values,
)
from agentkit.approvals import (
    ApprovalDecidedError,
    ApprovalExpiredError,
    ApprovalInbox,
    ApprovalNotFoundError,
    PendingApproval,
)
from agentkit.checkpoint import SQLiteCheckPointStore
from agentkit.integrations.flask import check_same_origin
from agentkit.testing import call, calls_message


@tool(needs_approval=True)
def pay(payee: str, amount: int) -> str:
    """Pay a supplier (a human approves every payment).

    Args:
        payee: who is paid.
        amount: how much, in EUR.
    """
    return f"paid {amount} EUR to {payee}"


def scripted(messages: list[Message]) -> Message | str:
    """Plays the LLM offline: pays what the user asks, then reports what the tool said."""
    last = messages[-1]
    if last.role is Role.USER:
        payee, _, amount = last.content.removeprefix("Pay ").partition(" ")
        return calls_message(call("pay", {"payee": payee, "amount": int(amount or 0)}))
    return f"Done: {last.content}"


def start_runs(runner: Runner) -> None:
    """Alice's and Bob's payments; each stops for approval."""
    for run_id, text, owner in [
        ("inv-1", "Pay ACME 120", "alice"),
        ("inv-2", "Pay Globex 80", "bob"),
    ]:
        result = runner.invoke(
            text, with_checkpoint_id(run_id), with_session_values({"owner": owner})
        )
        assert result.interrupt is not None, "the payment should wait for approval"


def create_app(inbox: ApprovalInbox) -> Flask:
    """The inbox's page and API."""
    app = Flask(__name__)

    @app.before_request
    def refuse_cross_site_posts() -> None:
        if request.method == "POST":
            check_same_origin(request)

    @app.get("/approvals")
    def page() -> Response:
        owner = request.args.get("owner")
        rows = "".join(_row(waiting, inbox.now()) for waiting in inbox.pending(owner=owner))
        body = f"<h1>Pending approvals of {html.escape(str(owner))}</h1><table>{rows}</table>"
        return Response(f"<!doctype html><title>Approvals</title>{body}", mimetype="text/html")

    @app.get("/api/approvals")
    def pending() -> Response:
        owner = request.args.get("owner")
        return jsonify([_as_json(waiting, inbox.now()) for waiting in inbox.pending(owner=owner)])

    @app.post("/api/approvals/<run_id>/<interrupt_id>")
    def decide(run_id: str, interrupt_id: str) -> tuple[Response, int]:
        body = request.get_json(silent=True)
        if not isinstance(body, dict) or not isinstance(body.get("by"), str):
            return jsonify(error='send {"decision": ..., "by": "<your name>"} as JSON'), 400
        decision = _decision(body)
        if decision is None:
            return jsonify(
                error='"decision" is "approve", "edit" (with "arguments") or "reject"'
            ), 400
        try:
            decided = inbox.decide(
                run_id, interrupt_id, decision, by=body["by"], owner=body.get("owner")
            )
        except ApprovalDecidedError as error:
            won = error.record
            who = None if won is None else {"by": won.decided_by, "action": won.action}
            return jsonify(error=str(error), decided=who), 409
        except ApprovalExpiredError as error:
            if error.decided.run is not None:
                error.decided.run.result()  # the run was told; let it answer
            return jsonify(error=str(error)), 410
        except ApprovalNotFoundError as error:
            return jsonify(error=str(error)), 404
        answer = decided.run.result().text if decided.run is not None else None
        return jsonify(action=decided.record.action, answer=answer), 200

    @app.get("/api/approvals/log")
    def log() -> Response:
        return jsonify(
            [
                {
                    "run_id": record.run_id,
                    "tool": record.tool_name,
                    "action": record.action,
                    "by": record.decided_by,
                    "at": record.decided_at,
                    "arguments": record.arguments,
                    "new_arguments": record.new_arguments,
                    "reason": record.reason,
                }
                for record in inbox.records()
            ]
        )

    return app


def _decision(body: dict[str, Any]) -> bool | Approve | Reject | None:
    kind = body.get("decision")
    if kind == "approve":
        return Approve()
    if kind == "edit" and isinstance(body.get("arguments"), dict):
        return Approve(arguments=body["arguments"])
    if kind == "reject":
        return Reject(reason=str(body.get("reason", ""))[:500])
    return None


def _as_json(waiting: PendingApproval, now: float) -> dict[str, Any]:
    return {
        "run_id": waiting.run_id,
        "interrupt_id": waiting.interrupt_id,
        "owner": waiting.owner,
        "tool": waiting.tool_name,
        "arguments": waiting.arguments,
        "waiting_seconds": waiting.age(now),
    }


def _row(waiting: PendingApproval, now: float) -> str:
    cells = [
        waiting.run_id,
        waiting.tool_name,
        str(waiting.arguments),
        f"{waiting.age(now) or 0:.0f} s",
    ]
    return "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in cells) + "</tr>"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--serve", action="store_true", help="serve the app on port 5001")
    parser.add_argument("--store", help="the checkpoint database (default: a temporary one)")
    args = parser.parse_args(argv)
    path = args.store or os.path.join(tempfile.mkdtemp(prefix="agentkit-inbox-"), "runs.db")
    agent = ChatModelAgent("payer", "pays suppliers", make_model(scripted), tools=[pay])
    runner = Runner(agent, checkpoint_store=SQLiteCheckPointStore(path))
    start_runs(runner)
    app = create_app(ApprovalInbox(runner, owner_key="owner", expires_after=24 * 3600))
    if args.serve:
        app.run(port=5001)
        return
    client = app.test_client()
    for owner in ("alice", "bob"):
        [waiting] = client.get(f"/api/approvals?owner={owner}").get_json()
        print(f"{owner}: {waiting['tool']}({waiting['arguments']}) waits in {waiting['run_id']}")
    alice, bob = (client.get(f"/api/approvals?owner={o}").get_json()[0] for o in ("alice", "bob"))
    url = f"/api/approvals/{alice['run_id']}/{alice['interrupt_id']}"
    edit = {"decision": "edit", "arguments": {"payee": "ACME", "amount": 100}}
    answer = client.post(url, json={**edit, "by": "ops-1", "owner": "alice"})
    print(f"ops-1 edits and approves: {answer.status_code} {answer.get_json()['answer']}")
    again = client.post(url, json={"decision": "reject", "by": "ops-2", "owner": "alice"})
    print(f"ops-2 rejects too late: {again.status_code} decided by {again.get_json()['decided']}")
    url = f"/api/approvals/{bob['run_id']}/{bob['interrupt_id']}"
    answer = client.post(
        url, json={"decision": "reject", "reason": "duplicate", "by": "ops-2", "owner": "bob"}
    )
    print(f"ops-2 rejects Bob's: {answer.status_code} {answer.get_json()['answer']}")
    for entry in client.get("/api/approvals/log").get_json():
        shown = f"{entry['arguments']} -> {entry['new_arguments']}"
        print(f"log: {entry['by']} {entry['action']} {entry['run_id']} {shown}")


if __name__ == "__main__":
    main()
