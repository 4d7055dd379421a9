"""samples/approval_inbox.py: a Flask page of the approvals of two runs, decided over HTTP."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx

from agentkit import ChatModelAgent, Runner
from agentkit.approvals import ApprovalInbox
from agentkit.checkpoint import SQLiteCheckPointStore
from agentkit.models import ScriptedChatModel
from tests.sample_celery import GUARD, serving
from tests.samples_support import run_sample


def test_the_sample_lists_two_runs_and_decides_each_once() -> None:
    done = run_sample("approval_inbox.py")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "alice: pay({'amount': 120, 'payee': 'ACME'}) waits in inv-1",
        "bob: pay({'amount': 80, 'payee': 'Globex'}) waits in inv-2",
        "ops-1 edits and approves: 200 Done: paid 100 EUR to ACME",
        "ops-2 rejects too late: 409 decided by {'action': 'edited', 'by': 'ops-1'}",
        "ops-2 rejects Bob's: 200 Done: The user rejected this call of pay; it was not run. "
        "Reason: duplicate",
        "log: ops-1 edited inv-1 {'amount': 120, 'payee': 'ACME'} -> "
        "{'amount': 100, 'payee': 'ACME'}",
        "log: ops-2 rejected inv-2 {'amount': 80, 'payee': 'Globex'} -> None",
    ]


def test_operators_racing_over_http_get_one_decision(tmp_path: Path) -> None:
    import approval_inbox  # samples/ is on sys.path (tests.sample_celery puts it there)

    store = SQLiteCheckPointStore(tmp_path / "runs.db")
    agent = ChatModelAgent(
        "payer", "pays", ScriptedChatModel(approval_inbox.scripted), tools=[approval_inbox.pay]
    )
    runner = Runner(agent, checkpoint_store=store)
    approval_inbox.start_runs(runner)
    app = approval_inbox.create_app(ApprovalInbox(runner, owner_key="owner"))
    operators = 5
    with serving(app) as url, httpx.Client(base_url=url, timeout=GUARD) as client:
        page = client.get("/approvals", params={"owner": "alice"})
        assert page.status_code == 200 and "inv-1" in page.text and "inv-2" not in page.text
        [waiting] = client.get("/api/approvals", params={"owner": "alice"}).json()
        decide = f"/api/approvals/{waiting['run_id']}/{waiting['interrupt_id']}"
        foreign = client.post(decide, json={"decision": "approve", "by": "x", "owner": "bob"})
        assert foreign.status_code == 404
        barrier = threading.Barrier(operators)
        answers: dict[int, httpx.Response] = {}

        def post(index: int) -> None:
            body: dict[str, Any] = {"decision": "approve", "by": f"ops-{index}", "owner": "alice"}
            barrier.wait(timeout=GUARD)
            answers[index] = client.post(decide, json=body)

        threads = [threading.Thread(target=post, args=(i,)) for i in range(operators)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(GUARD)
            assert not thread.is_alive()
        codes = sorted(answer.status_code for answer in answers.values())
        assert codes == [200] + [409] * (operators - 1)
        [winner] = [i for i, answer in answers.items() if answer.status_code == 200]
        assert answers[winner].json()["answer"] == "Done: paid 120 EUR to ACME"
        for answer in answers.values():
            if answer.status_code == 409:
                assert answer.json()["decided"] == {"by": f"ops-{winner}", "action": "approved"}
        log = client.get("/api/approvals/log").json()
        assert [(entry["run_id"], entry["by"]) for entry in log] == [("inv-1", f"ops-{winner}")]
        assert client.get("/api/approvals", params={"owner": "alice"}).json() == []
        assert len(client.get("/api/approvals", params={"owner": "bob"}).json()) == 1
    store.close()
