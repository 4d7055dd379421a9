"""A task list in files (``plantask``): TaskCreate, TaskGet, TaskUpdate, TaskList.

Tests named after Eino's follow ``adk/middlewares/plantask/*_test.go``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from agentkit import AgentContext, ChatModelAgent, Runner, ToolArgumentsError
from agentkit.backends import InMemoryBackend, LocalBackend
from agentkit.errors import AgentConfigError
from agentkit.middlewares import PlanTaskMiddleware
from agentkit.middlewares.plantask import TASK_TOOLS
from agentkit.models import ScriptedChatModel
from agentkit.testing import call, calls_message, run_events, summarize

GUARD = 30.0


class Tasks:
    """The four tools of one middleware, called like the model calls them."""

    def __init__(self, backend: Any, base_dir: str = "tasks") -> None:
        self.middleware = PlanTaskMiddleware(backend, base_dir)
        self.tools = {t.info().name: t for t in self.middleware.tools}

    def __call__(self, name: str, **arguments: Any) -> str:
        answer = json.loads(self.tools[name].invoke(json.dumps(arguments)))  # type: ignore[attr-defined]
        assert set(answer) == {"result"}
        result = answer["result"]
        assert isinstance(result, str)
        return result


def test_new() -> None:
    """Eino's TestNew: a backend that deletes and a base directory are required."""

    class ReadOnly:
        def ls(self, path: str = ".") -> list[str]:
            return []

    with pytest.raises(AgentConfigError, match="can also delete files"):
        PlanTaskMiddleware(ReadOnly())  # type: ignore[arg-type]
    with pytest.raises(AgentConfigError, match="base_dir"):
        PlanTaskMiddleware(InMemoryBackend(), "")


def test_middleware_before_agent() -> None:
    """Eino's TestMiddlewareBeforeAgent: the four tools join the run."""
    context = AgentContext("a", "", [], [])
    PlanTaskMiddleware(InMemoryBackend()).before_agent(context)
    assert [t.info().name for t in context.tools] == list(TASK_TOOLS)


def test_task_create_tool() -> None:
    """Eino's TestTaskCreateTool and TestTaskCreateToolWithMetadata."""
    backend = InMemoryBackend()
    tasks = Tasks(backend)
    assert tasks("TaskCreate", subject="Test Task", description="Do it", activeForm="Doing it") == (
        "Task #1 created successfully: Test Task"
    )
    assert tasks("TaskCreate", subject="Second", description="d", metadata={"priority": "high"}) == (
        "Task #2 created successfully: Second"
    )
    assert json.loads(backend.read("tasks/1.json")) == {
        "id": "1", "subject": "Test Task", "description": "Do it", "status": "pending",
        "blocks": [], "blockedBy": [], "activeForm": "Doing it",
    }
    assert json.loads(backend.read("tasks/2.json"))["metadata"] == {"priority": "high"}
    assert backend.read("tasks/.highwatermark") == "2"


def test_task_get_tool() -> None:
    """Eino's TestTaskGetTool and TestTaskGetToolInvalidTaskID."""
    backend = InMemoryBackend({
        "tasks/1.json": json.dumps({"id": "1", "subject": "Test Task", "description": "Test description",
                                    "status": "pending", "blocks": ["2", "3"], "blockedBy": ["4"]})
    })
    tasks = Tasks(backend)
    assert tasks("TaskGet", taskId="1") == (
        "Task #1: Test Task\nStatus: pending\nDescription: Test description\n"
        "Blocked by: #4\nBlocks: #2, #3\n"
    )
    with pytest.raises(ToolArgumentsError, match="there is no task #999"):
        tasks("TaskGet", taskId="999")
    for bad in ("../../../etc/passwd", "abc"):
        with pytest.raises(ToolArgumentsError, match="invalid task ID"):
            tasks("TaskGet", taskId=bad)


def test_task_list_tool() -> None:
    """Eino's TestTaskListTool."""
    backend = InMemoryBackend()
    tasks = Tasks(backend)
    assert tasks("TaskList") == "No tasks found."
    backend.write("tasks/1.json", json.dumps({"id": "1", "subject": "Task 1", "status": "pending",
                                              "blockedBy": ["2"]}))
    backend.write("tasks/2.json", json.dumps({"id": "2", "subject": "Task 2", "status": "in_progress",
                                              "owner": "agent1"}))
    backend.write("tasks/notes.txt", "not a task")
    assert tasks("TaskList") == (
        "#1 [pending] Task 1 [blocked by #2]\n#2 [in_progress] Task 2 [owner: agent1]"
    )


def test_task_list_orders_ids_as_numbers() -> None:
    tasks = Tasks(InMemoryBackend())
    for n in range(1, 12):
        tasks("TaskCreate", subject=f"t{n}", description="d")
    assert [row.split(" ")[0] for row in tasks("TaskList").split("\n")] == [f"#{n}" for n in range(1, 12)]


def test_task_update_tool() -> None:
    """Eino's TestTaskUpdateTool and TestTaskUpdateToolOwnerAndMetadata."""
    backend = InMemoryBackend()
    tasks = Tasks(backend)
    tasks("TaskCreate", subject="Old", description="d", metadata={"a": 1, "b": 2})
    assert tasks("TaskUpdate", taskId="1", subject="New", status="in_progress", owner="me",
                 metadata={"a": None, "c": 3}) == (
        "Updated task #1 subject, status, owner, metadata"
    )
    saved = json.loads(backend.read("tasks/1.json"))
    assert (saved["subject"], saved["status"], saved["owner"], saved["metadata"]) == (
        "New", "in_progress", "me", {"b": 2, "c": 3}
    )
    with pytest.raises(ToolArgumentsError, match="'status' must be one of"):
        tasks("TaskUpdate", taskId="1", status="done")
    with pytest.raises(ToolArgumentsError, match="invalid task ID"):
        tasks("TaskUpdate", taskId="x1")


def test_task_update_tool_bidirectional_blocks_and_deduplication() -> None:
    """Eino's TestTaskUpdateToolBlocks, BlocksDeduplication, BidirectionalBlocks and
    BidirectionalBlockedBy."""
    backend = InMemoryBackend()
    tasks = Tasks(backend)
    for n in range(1, 4):
        tasks("TaskCreate", subject=f"Task {n}", description="d")
    assert tasks("TaskUpdate", taskId="1", addBlocks=["2", "2"]) == "Updated task #1 blocks"
    tasks("TaskUpdate", taskId="1", addBlocks=["2"])
    assert tasks("TaskUpdate", taskId="3", addBlockedBy=["1"]) == "Updated task #3 blockedBy"

    def saved(n: int) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(backend.read(f"tasks/{n}.json"))
        return data

    assert (saved(1)["blocks"], saved(1)["blockedBy"]) == (["2", "3"], [])
    assert (saved(2)["blocks"], saved(2)["blockedBy"]) == ([], ["1"])
    assert (saved(3)["blocks"], saved(3)["blockedBy"]) == ([], ["1"])


def test_task_update_tool_with_non_existent_task() -> None:
    """Eino's TestTaskUpdateToolBidirectionalWithNonExistentTask."""
    tasks = Tasks(InMemoryBackend())
    tasks("TaskCreate", subject="Task 1", description="d")
    with pytest.raises(ToolArgumentsError, match="there is no task #9"):
        tasks("TaskUpdate", taskId="1", addBlocks=["9"])
    with pytest.raises(ToolArgumentsError, match="there is no task #9"):
        tasks("TaskUpdate", taskId="9", status="completed")


def test_task_update_tool_cyclic_dependency_detection() -> None:
    """Eino's TestTaskUpdateToolCyclicDependencyDetection."""
    tasks = Tasks(InMemoryBackend())
    for n in range(1, 4):
        tasks("TaskCreate", subject=f"Task {n}", description="d")
    tasks("TaskUpdate", taskId="1", addBlocks=["2"])
    tasks("TaskUpdate", taskId="2", addBlocks=["3"])
    with pytest.raises(ToolArgumentsError, match="would create a cyclic dependency"):
        tasks("TaskUpdate", taskId="3", addBlocks=["1"])
    with pytest.raises(ToolArgumentsError, match="would create a cyclic dependency"):
        tasks("TaskUpdate", taskId="1", addBlockedBy=["3"])
    with pytest.raises(ToolArgumentsError, match="would create a cyclic dependency"):
        tasks("TaskUpdate", taskId="1", addBlocks=["1"])


def test_task_update_tool_delete_cleans_dependencies() -> None:
    """Eino's TestTaskUpdateToolDelete and DeleteCleansDependencies."""
    backend = InMemoryBackend()
    tasks = Tasks(backend)
    for n in range(1, 4):
        tasks("TaskCreate", subject=f"Task {n}", description="d")
    tasks("TaskUpdate", taskId="2", addBlockedBy=["1"], addBlocks=["3"])
    assert tasks("TaskUpdate", taskId="2", status="deleted") == "Updated task #2 deleted"
    assert tasks("TaskList") == "#1 [pending] Task 1\n#3 [pending] Task 3"
    assert json.loads(backend.read("tasks/1.json"))["blocks"] == []
    assert json.loads(backend.read("tasks/3.json"))["blockedBy"] == []
    assert tasks("TaskCreate", subject="Task 4", description="d").startswith("Task #4")


def test_task_update_tool_auto_delete_all_tasks_when_all_completed() -> None:
    """Eino's TestTaskUpdateToolAutoDeleteAllTasksWhenAllCompleted and NoDeleteWhenNotAllCompleted."""
    tasks = Tasks(InMemoryBackend())
    tasks("TaskCreate", subject="Task 1", description="d")
    tasks("TaskCreate", subject="Task 2", description="d")
    tasks("TaskUpdate", taskId="1", status="completed")
    assert tasks("TaskList") == "#1 [completed] Task 1\n#2 [pending] Task 2"
    tasks("TaskUpdate", taskId="2", status="completed")
    assert tasks("TaskList") == "No tasks found."
    assert tasks("TaskCreate", subject="Next", description="d") == "Task #3 created successfully: Next"


def test_integration(tmp_path: Path) -> None:
    """Eino's TestIntegration, on a local directory and through a run."""
    backend = LocalBackend(tmp_path)
    model = ScriptedChatModel(
        [
            calls_message(call("TaskCreate", {"subject": "Task 1", "description": "First task"})),
            calls_message(call("TaskCreate", {"subject": "Task 2", "description": "Second task"})),
            calls_message(call("TaskUpdate", {"taskId": "2", "addBlockedBy": ["1"]})),
            calls_message(call("TaskList", {})),
            calls_message(call("TaskUpdate", {"taskId": "1", "status": "in_progress"})),
            calls_message(call("TaskGet", {"taskId": "1"})),
            calls_message(call("TaskGet", {"taskId": "7"})),
            "planned",
        ]
    )
    agent = ChatModelAgent("planner", "plans", model, middlewares=[PlanTaskMiddleware(backend, "plan")])
    events = run_events(lambda: Runner(agent).query("plan the work"))
    results = [summarize(event)[3] for event in events if summarize(event)[2].startswith("tool/")]
    assert results == [
        '{"result":"Task #1 created successfully: Task 1"}',
        '{"result":"Task #2 created successfully: Task 2"}',
        '{"result":"Updated task #2 blockedBy"}',
        '{"result":"#1 [pending] Task 1\\n#2 [pending] Task 2 [blocked by #1]"}',
        '{"result":"Updated task #1 status"}',
        '{"result":"Task #1: Task 1\\nStatus: in_progress\\nDescription: First task\\nBlocks: #2\\n"}',
        "Error: TaskGet: there is no task #7; TaskList lists the tasks. Correct the arguments and "
        "call TaskGet again.",
    ]
    assert summarize(events[-1])[3] == "planned"
    assert sorted(p.name for p in (tmp_path / "plan").iterdir()) == [".highwatermark", "1.json", "2.json"]


def test_creates_from_many_threads_get_distinct_ids() -> None:
    tasks = Tasks(InMemoryBackend())
    start = threading.Barrier(10)
    made: list[str] = []

    def create(n: int) -> None:
        start.wait(GUARD)
        made.append(tasks("TaskCreate", subject=f"t{n}", description="d"))

    threads = [threading.Thread(target=create, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(GUARD)
    assert sorted(int(text.split("#")[1].split(" ")[0]) for text in made) == list(range(1, 11))
