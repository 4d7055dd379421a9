"""The run log's JSON Schema: shipped, versioned, and true of real entries of real runs.

Every entry that real runs write is validated: LocalRuns (completed, streamed, interrupted and
resumed, cancelled, failed, trimmed into a gap, structured output and actions), the SSE frames
of Flask responses, and a Celery worker's Redis stream read from another process.
"""

from __future__ import annotations

import enum
import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import attrs
import pytest
from flask import Flask

from agentkit import (
    ChatModelAgent,
    ExitTool,
    LoopAgent,
    Runner,
    interrupt,
    new_break_loop_action,
    send_tool_gen_action,
    tool,
)
from agentkit.checkpoint import InMemoryCheckPointStore
from agentkit.integrations.flask import sse_response
from agentkit.integrations.runs import (
    RUN_LOG_SCHEMA_VERSION,
    LocalRuns,
    RunEvent,
    run_log_schema,
)
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message

jsonschema = pytest.importorskip("jsonschema")

GUARD = 30.0  # a failure guard for waits, never a pace
ROOT = Path(__file__).resolve().parent.parent
VALIDATOR = jsonschema.Draft202012Validator(run_log_schema())


def check(entries: Iterable[dict[str, Any]]) -> list[str]:
    """Validate every entry; return their kinds."""
    kinds = []
    for entry in entries:
        errors = sorted(VALIDATOR.iter_errors(entry), key=lambda e: list(e.absolute_path))
        assert not errors, (
            f"entry {json.dumps(entry)[:400]} does not match the schema: "
            + "; ".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:3])
        )
        kinds.append(entry["kind"])
    return kinds


def as_dicts(entries: Iterable[RunEvent]) -> list[dict[str, Any]]:
    # What a reader sends on (JSON), read back: the schema describes JSON, not Python objects.
    return [json.loads(json.dumps(attrs.asdict(entry))) for entry in entries]


# --- the schema itself ------------------------------------------------------------------------


def test_the_schema_is_a_valid_versioned_draft_2020_12_schema_in_the_package() -> None:
    schema = run_log_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"urn:agentkit:run-log-entry:{RUN_LOG_SCHEMA_VERSION}"
    assert RUN_LOG_SCHEMA_VERSION == 1
    shipped = ROOT / "agentkit" / "integrations" / "runlog.schema.json"
    assert json.loads(shipped.read_text("utf-8")) == schema
    assert "runlog.schema.json" in (ROOT / "setup.cfg").read_text("utf-8")  # package data
    schema["title"] = "changed"
    assert run_log_schema()["title"] != "changed"  # a fresh copy each time
    assert set(schema["properties"]["kind"]["enum"]) == {
        "run", "status", "token", "agent", "end", "gap", "done"
    }


@pytest.mark.parametrize(
    "entry",
    [
        {"id": "1", "kind": "token", "data": {"agent_name": "a"}},  # no content
        {"id": "1", "kind": "token", "data": {"agent_name": "a", "content": "x", "more": 1}},
        {"id": "1", "kind": "story", "data": {}},
        {"id": "one", "kind": "done", "data": {}},
        {"id": "2", "kind": "end", "data": {"status": "finished", "answer": None,
                                            "interrupts": [], "prompts": [], "error": None}},
        {"id": "3", "kind": "agent", "data": {"agent_name": "a", "run_path": ["a"],
                                              "output": {"message": {"role": "robot", "content": ""}}}},
        {"id": "4", "kind": "gap", "data": {"lost": 0, "reason": "trimmed"}},
    ],
)
def test_the_schema_refuses_entries_of_another_shape(entry: dict[str, Any]) -> None:
    assert not VALIDATOR.is_valid(entry)


# --- LocalRuns --------------------------------------------------------------------------------


class Sky(enum.Enum):
    CLEAR = "clear"


@attrs.define
class Forecast:
    city: str
    sky: Sky


def weather_agent() -> ChatModelAgent:
    @tool
    def get_weather(city: str) -> str:
        """Weather of a city."""
        return f"sunny in {city}"

    model = ScriptedChatModel(
        [calls_message(call("get_weather", {"city": "Rome"}), content="Checking."), "Sunny."]
    )
    return ChatModelAgent("weather", "d", model, tools=[get_weather])


def payer_agent() -> ChatModelAgent:
    @tool
    def pay(payee: str) -> str:
        """Pay after approval."""
        return "paid" if interrupt({"question": f"Pay {payee}?", "amount": 12.5}) else "declined"

    model = ScriptedChatModel([calls_message(call("pay", {"payee": "ACME"})), "Done."])
    return ChatModelAgent("payer", "d", model, tools=[pay])


def failing_agent() -> ChatModelAgent:
    @tool
    def explode() -> str:
        """Fail."""
        raise LookupError("nothing here")

    return ChatModelAgent(
        "failing", "d", ScriptedChatModel([calls_message(call("explode")), "unused"]), tools=[explode]
    )


def structured_agent() -> ChatModelAgent:
    model = ScriptedChatModel(['{"city": "Oslo", "sky": "clear"}'])
    return ChatModelAgent("typed", "d", model, output_type=Forecast)


def actions_agent() -> Any:
    @tool
    def stop_loop() -> str:
        """Break the loop."""
        send_tool_gen_action(new_break_loop_action("looper"))
        return "breaking"

    looper = ChatModelAgent(
        "looper", "d",
        ScriptedChatModel([calls_message(call("stop_loop")), "after the break"]),
        tools=[stop_loop],
    )
    return LoopAgent("loop", "d", [looper], max_iterations=3)


def runner(agent: Any, *, streaming: bool = True) -> Runner:
    return Runner(agent, enable_streaming=streaming, checkpoint_store=InMemoryCheckPointStore())


def read_all(runs: LocalRuns, run_id: str, after: str | None = None) -> list[RunEvent]:
    with runs.events(run_id, after, owner=None, idle_timeout=GUARD) as stream:
        return list(stream)


def test_entries_of_real_local_runs_match_the_schema() -> None:
    gate, entered = threading.Event(), threading.Event()

    @tool
    def wait_here() -> str:
        """Blocks until released."""
        entered.set()
        gate.wait(GUARD)
        return "released"

    slow = ChatModelAgent(
        "slow", "d", ScriptedChatModel([calls_message(call("wait_here")), "late"]), tools=[wait_here]
    )
    runners = {
        "weather": runner(weather_agent()),
        "payer": runner(payer_agent()),
        "failing": runner(failing_agent(), streaming=False),
        "typed": runner(structured_agent()),
        "loop": runner(actions_agent()),
        "slow": runner(slow),
    }
    seen: set[str] = set()
    with LocalRuns(runners) as runs:
        weather = runs.submit("weather", "weather?", owner=None)
        kinds = check(as_dicts(read_all(runs, weather)))
        assert kinds[:2] == ["run", "status"] and kinds[-1] == "end" and "token" in kinds
        seen.update(kinds)

        payer = runs.submit("payer", "pay", owner=None)
        first = as_dicts(read_all(runs, payer))
        check(first)
        assert first[-1]["data"]["status"] == "interrupted"
        after = runs.resume(payer, {first[-1]["data"]["interrupts"][0]: True}, owner=None)
        second = as_dicts(read_all(runs, payer, after))
        check(second)
        assert second[-1]["data"]["status"] == "completed"

        failing = runs.submit("failing", "go", owner=None)
        failed = as_dicts(read_all(runs, failing))
        check(failed)
        assert failed[-1]["data"]["status"] == "failed"
        assert failed[-1]["data"]["error"]["type"] == "ToolError"

        typed = as_dicts(read_all(runs, runs.submit("typed", "?", owner=None)))
        check(typed)
        outputs = [e["data"]["output"].get("customized_output") for e in typed if e["kind"] == "agent"]
        assert {"city": "Oslo", "sky": "clear"} in outputs

        looped = as_dicts(read_all(runs, runs.submit("loop", "go", owner=None)))
        check(looped)
        assert any("break_loop" in e["data"].get("action", {}) for e in looped if e["kind"] == "agent")

        slow_id = runs.submit("slow", "go", owner=None)
        assert entered.wait(GUARD)
        runs.cancel(slow_id, owner=None)
        gate.set()
        cancelled = as_dicts(read_all(runs, slow_id))
        check(cancelled)
        assert cancelled[-1]["data"]["status"] == "cancelled"
    seen.update(e["kind"] for e in first + failed + cancelled)
    assert seen >= {"run", "status", "token", "agent", "end"}


def test_every_action_kind_matches() -> None:
    exiter = ChatModelAgent(
        "exiter", "d",
        ScriptedChatModel([calls_message(call("exit", {"final_result": "bye"}))]),
        exit_tool=ExitTool(),
    )
    events = [e.to_dict() for e in Runner(exiter).query("go")]
    check({"id": str(i), "kind": "agent", "data": data} for i, data in enumerate(events, 1))
    assert events[-1]["action"] == {"exit": True}


def test_a_gap_entry_of_a_capped_local_log_matches() -> None:
    class Chunky:
        def generate(self, messages: Any, options: Any = None) -> Any:
            raise NotImplementedError

        def stream(self, messages: Any, options: Any = None) -> Any:
            from agentkit import assistant_message, stream_from_list

            return stream_from_list([assistant_message(f"{i} ") for i in range(50)])

    with LocalRuns({"chatty": Runner(ChatModelAgent("chatty", "d", Chunky()), enable_streaming=True)},
                   max_entries=10) as runs:
        run_id = runs.submit("chatty", "talk", owner=None)
        read_all(runs, run_id)  # to its end, keeping up: nothing is lost to this reader
        entries = as_dicts(read_all(runs, run_id))  # from the start again, once trimmed
    kinds = check(entries)
    assert kinds[0] == "gap" and kinds[-1] == "end"


def sse_entries(body: str) -> list[dict[str, Any]]:
    """SSE frames as entries: ``id:``, ``event:`` and ``data:`` lines."""
    entries = []
    for block in body.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        entry: dict[str, Any] = {"kind": lines["event"], "data": json.loads(lines["data"])}
        if "id" in lines:
            entry["id"] = lines["id"]
        entries.append(entry)
    return entries


def test_sse_frames_of_live_runs_and_of_logs_match() -> None:
    app = Flask(__name__)
    with LocalRuns({"weather": runner(weather_agent())}) as runs:

        @app.get("/live")
        def live() -> Any:
            return sse_response(runner(weather_agent()).query("weather?"), stream_tokens=True)

        @app.get("/log/<run_id>")
        def log(run_id: str) -> Any:
            return sse_response(runs.events(run_id, owner=None))

        client = app.test_client()
        live_kinds = check(sse_entries(client.get("/live").get_data(as_text=True)))
        assert live_kinds[-1] == "done" and "token" in live_kinds
        run_id = runs.submit("weather", "weather?", owner=None)
        log_kinds = check(sse_entries(client.get(f"/log/{run_id}").get_data(as_text=True)))
        assert log_kinds[0] == "run" and log_kinds[-1] == "end"
