"""The interoperability samples, run as their users run them (offline)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")

from mcp import types  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402

from tests.samples_support import ROOT, clean_env, run_sample  # noqa: E402

GUARD = 60.0


def _text(result: Any) -> str:
    return "".join(part.text for part in result.content if getattr(part, "type", "") == "text")


def test_mcp_server_sample_answers_an_mcp_client_and_asks_before_booking(tmp_path: Path) -> None:
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "approve"})

    async def body() -> None:
        env = {**clean_env(), "PYTHONPATH": str(ROOT)}
        params = StdioServerParameters(
            command=sys.executable,
            args=[str(ROOT / "samples" / "mcp_server.py"), "--store", str(tmp_path)],
            env=env,
        )
        with anyio.fail_after(GUARD):
            async with stdio_client(params) as (read, write), ClientSession(
                read, write, elicitation_callback=elicit
            ) as session:
                await session.initialize()
                names = {tool.name for tool in (await session.list_tools()).tools}
                assert names == {"rooms", "resume_rooms"}
                rooms = await session.call_tool("rooms", {"input": "Which rooms seat 6?"})
                assert _text(rooms) == "Borealis"
                booked = await session.call_tool("rooms", {"input": "Book one at 14:00"})
                assert _text(booked) == "Borealis is booked at 14:00"

    anyio.run(body)
    assert asked == ['Approve book({"room": "Borealis", "hour": 14})?']


@pytest.mark.parametrize(
    ("flags", "answer"),
    [([], "supervisor: Done: paid 120 EUR to ACME"),
     (["--reject"], "supervisor: Done: The user rejected this call of pay; it was not run.")],
)
def test_a2a_pair_sample_carries_the_approval_across_the_boundary(flags: list[str], answer: str) -> None:
    pytest.importorskip("a2a")
    done = run_sample("a2a_pair.py", *flags)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("remote agent: payments at http://127.0.0.1:")
    assert lines[1].startswith('waiting: Approve pay({"payee": "ACME", "amount": 120})?')
    assert lines[-1] == answer
