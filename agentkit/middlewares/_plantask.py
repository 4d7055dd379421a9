"""A task list kept in files, with ``TaskCreate``, ``TaskGet``, ``TaskUpdate`` and ``TaskList``
(Eino's ``plantask``).

The definitions behind :mod:`agentkit.middlewares.plantask`, whose docstring documents them.
"""

from __future__ import annotations

import json
import posixpath
import re
import threading
from collections.abc import Callable
from typing import Any

from agentkit._lazy import present
from agentkit._middleware import AgentContext, AgentMiddleware
from agentkit.backends import DeletingBackend
from agentkit.errors import AgentConfigError, ToolArgumentsError
from agentkit.middlewares._tool import SchemaTool, add_tools, object_schema
from agentkit.tools._base import BaseTool

__all__ = ["PlanTaskMiddleware", "TASK_TOOLS"]

TASK_TOOLS = ("TaskCreate", "TaskGet", "TaskUpdate", "TaskList")
"""The names of the tools, in the order they are added."""

_ID = re.compile(r"\d+")
_HIGH_WATERMARK = ".highwatermark"
_STATUSES = ("pending", "in_progress", "completed", "deleted")

_Task = dict[str, Any]


class PlanTaskMiddleware(AgentMiddleware):
    """Gives an agent the task tools over the task files in ``base_dir``.

    Calls of the tools are serialized per middleware object (one task list, many threads).

    Args:
        backend: a backend that can delete files (both agentkit backends can).
        base_dir: the directory of the task files (default ``"tasks"``).

    Raises:
        AgentConfigError: the backend cannot delete files, or ``base_dir`` is empty.
    """

    def __init__(self, backend: DeletingBackend, base_dir: str = "tasks") -> None:
        if not isinstance(backend, DeletingBackend):
            raise AgentConfigError(
                f"PlanTaskMiddleware needs a backend that can also delete files (a "
                f"DeletingBackend, like InMemoryBackend and LocalBackend); got {backend!r}"
            )
        if not isinstance(base_dir, str) or not base_dir.strip("/ "):
            raise AgentConfigError(f"base_dir must name a directory (got {base_dir!r})")
        self._store = _TaskStore(backend, base_dir)
        self._lock = threading.Lock()
        specs: list[tuple[str, str, dict[str, Any], Callable[[dict[str, Any]], str]]] = [
            ("TaskCreate", _CREATE_DESCRIPTION, _CREATE_SCHEMA, self._store.create),
            ("TaskGet", _GET_DESCRIPTION, _GET_SCHEMA, self._store.get),
            ("TaskUpdate", _UPDATE_DESCRIPTION, _UPDATE_SCHEMA, self._store.update),
            ("TaskList", _LIST_DESCRIPTION, object_schema({}), self._store.list_tasks),
        ]
        self._tools = tuple(
            SchemaTool(name, text, schema, self._serialized(handler))
            for name, text, schema, handler in specs
        )

    @property
    def tools(self) -> list[BaseTool]:
        """The four task tools (a copy)."""
        return list(self._tools)

    def before_agent(self, context: AgentContext) -> None:
        """Add the task tools to the run."""
        add_tools(context, self._tools, type(self).__name__)

    def _serialized(
        self, handler: Callable[[dict[str, Any]], str]
    ) -> Callable[[dict[str, Any]], str]:
        def run(arguments: dict[str, Any]) -> str:
            with self._lock:
                text = handler(arguments)
            return json.dumps({"result": text}, ensure_ascii=False, separators=(",", ":"))

        return run


class _TaskStore:
    """The task files of one directory."""

    def __init__(self, backend: DeletingBackend, base_dir: str) -> None:
        self.backend = backend
        self.base = base_dir

    def path(self, task_id: str) -> str:
        return posixpath.join(self.base, f"{task_id}.json")

    # --- files ---

    def names(self) -> list[str]:
        try:
            return self.backend.ls(self.base)
        except FileNotFoundError:
            return []

    def load(self, task_id: str, tool: str) -> _Task:
        try:
            text = self.backend.read(self.path(task_id))
        except FileNotFoundError:
            raise ToolArgumentsError(
                f"{tool}: there is no task #{task_id}; TaskList lists the tasks", tool_name=tool
            ) from None
        return _normalized(json.loads(text))

    def save(self, task: _Task) -> None:
        self.backend.write(self.path(task["id"]), _dumps(task))

    def all(self) -> list[_Task]:
        tasks = []
        for name in self.names():
            stem, extension = posixpath.splitext(name)
            if extension == ".json" and _ID.fullmatch(stem):
                text = self.backend.read(posixpath.join(self.base, name))
                tasks.append(_normalized(json.loads(text)))
        return sorted(tasks, key=lambda task: int(task["id"]))

    # --- the tools ---

    def create(self, arguments: dict[str, Any]) -> str:
        names = self.names()
        high = 0
        if _HIGH_WATERMARK in names:
            text = self.backend.read(posixpath.join(self.base, _HIGH_WATERMARK)).strip()
            high = int(text) if text.isdigit() else 0
        task_id = str(high + 1)
        if f"{task_id}.json" in names:
            raise ToolArgumentsError(
                f"TaskCreate: task #{task_id} already exists", tool_name="TaskCreate"
            )
        task: _Task = {
            "id": task_id,
            "subject": arguments["subject"],
            "description": arguments["description"],
            "status": "pending",
            "blocks": [],
            "blockedBy": [],
        }
        if arguments.get("activeForm"):
            task["activeForm"] = arguments["activeForm"]
        if arguments.get("metadata"):
            task["metadata"] = arguments["metadata"]
        self.backend.write(posixpath.join(self.base, _HIGH_WATERMARK), task_id)
        self.save(task)
        return f"Task #{task_id} created successfully: {arguments['subject']}"

    def get(self, arguments: dict[str, Any]) -> str:
        task_id = _checked_id(arguments["taskId"], "TaskGet")
        task = self.load(task_id, "TaskGet")
        lines = [
            f"Task #{task['id']}: {task['subject']}",
            f"Status: {task['status']}",
            f"Description: {task['description']}",
        ]
        if task.get("blockedBy"):
            lines.append("Blocked by: " + ", ".join(f"#{other}" for other in task["blockedBy"]))
        if task.get("blocks"):
            lines.append("Blocks: " + ", ".join(f"#{other}" for other in task["blocks"]))
        if task.get("owner"):
            lines.append(f"Owner: {task['owner']}")
        return "".join(f"{line}\n" for line in lines)

    def list_tasks(self, arguments: dict[str, Any]) -> str:
        tasks = self.all()
        if not tasks:
            return "No tasks found."
        rows = []
        for task in tasks:
            row = f"#{task['id']} [{task['status']}] {task['subject']}"
            if task.get("owner"):
                row += f" [owner: {task['owner']}]"
            if task.get("blockedBy"):
                row += " [blocked by " + ", ".join(f"#{other}" for other in task["blockedBy"]) + "]"
            rows.append(row)
        return "\n".join(rows)

    def update(self, arguments: dict[str, Any]) -> str:
        tool = "TaskUpdate"
        task_id = _checked_id(arguments["taskId"], tool)
        status = arguments.get("status")
        if status == "deleted":
            self.load(task_id, tool)
            self.unlink(task_id)
            return f"Updated task #{task_id} deleted"
        task = self.load(task_id, tool)
        updated: list[str] = []
        for key in ("subject", "description", "activeForm", "status"):
            if arguments.get(key):
                task[key] = arguments[key]
                updated.append(key)
        blocks = [_checked_id(other, tool) for other in arguments.get("addBlocks", ())]
        blocked_by = [_checked_id(other, tool) for other in arguments.get("addBlockedBy", ())]
        if blocks or blocked_by:
            self.link(task, blocks, blocked_by)
            updated.extend(
                name for name, ids in (("blocks", blocks), ("blockedBy", blocked_by)) if ids
            )
        if arguments.get("owner"):
            task["owner"] = arguments["owner"]
            updated.append("owner")
        if arguments.get("metadata") is not None:
            merged = dict(task.get("metadata") or {})
            for key, value in arguments["metadata"].items():
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
            task["metadata"] = merged
            updated.append("metadata")
        self.save(task)
        if status == "completed":
            self.clear_when_all_completed()
        return f"Updated task #{task_id} {', '.join(updated)}"

    def link(self, task: _Task, blocks: list[str], blocked_by: list[str]) -> None:
        """Record that ``task`` blocks ``blocks`` and is blocked by ``blocked_by``, both sides."""
        tool = "TaskUpdate"
        graph = {other["id"]: other for other in self.all()}
        graph[task["id"]] = task
        for other in (*blocks, *blocked_by):
            if other not in graph:
                raise ToolArgumentsError(f"{tool}: there is no task #{other}", tool_name=tool)
        for other in blocks:
            if _reaches(graph, other, task["id"]):
                raise ToolArgumentsError(
                    f"{tool}: adding task #{other} to the tasks task #{task['id']} blocks would "
                    "create a cyclic dependency",
                    tool_name=tool,
                )
        for other in blocked_by:
            if _reaches(graph, task["id"], other):
                raise ToolArgumentsError(
                    f"{tool}: adding task #{other} to the tasks that block task #{task['id']} "
                    "would create a cyclic dependency",
                    tool_name=tool,
                )
        for other in blocks:
            target = graph[other]
            target["blockedBy"] = _unique([*target.get("blockedBy", []), task["id"]])
            self.save(target)
        for other in blocked_by:
            target = graph[other]
            target["blocks"] = _unique([*target.get("blocks", []), task["id"]])
            self.save(target)
        task["blocks"] = _unique([*task.get("blocks", []), *blocks])
        task["blockedBy"] = _unique([*task.get("blockedBy", []), *blocked_by])

    def unlink(self, task_id: str) -> None:
        """Delete task ``task_id`` and every dependency on it."""
        for other in self.all():
            if other["id"] == task_id:
                continue
            blocks = [item for item in other.get("blocks", []) if item != task_id]
            blocked_by = [item for item in other.get("blockedBy", []) if item != task_id]
            if blocks != other.get("blocks", []) or blocked_by != other.get("blockedBy", []):
                other["blocks"], other["blockedBy"] = blocks, blocked_by
                self.save(other)
        self.backend.delete(self.path(task_id))

    def clear_when_all_completed(self) -> None:
        tasks = self.all()
        if all(task["status"] == "completed" for task in tasks):
            for task in tasks:
                self.backend.delete(self.path(task["id"]))


def _normalized(task: _Task) -> _Task:
    """A task read from its file, with the fields every task has (older files may lack some)."""
    for key, default in (("subject", ""), ("description", ""), ("status", "pending")):
        task.setdefault(key, default)
    task["id"] = str(task.get("id", ""))
    task["blocks"] = list(task.get("blocks") or [])
    task["blockedBy"] = list(task.get("blockedBy") or [])
    return task


def _checked_id(value: object, tool: str) -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise ToolArgumentsError(
            f"{tool}: invalid task ID {value!r}: task IDs are numbers, like \"1\"", tool_name=tool
        )
    return value


def _reaches(graph: dict[str, _Task], start: str, goal: str) -> bool:
    """Whether ``goal`` is ``start`` or a task ``start`` blocks, directly or not."""
    stack, seen = [start], set()
    while stack:
        current = stack.pop()
        if current == goal:
            return True
        if current in seen:
            continue
        seen.add(current)
        stack.extend(graph.get(current, {}).get("blocks", []))
    return False


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _dumps(task: _Task) -> str:
    return json.dumps(task, ensure_ascii=False, separators=(",", ":"))


_CREATE_SCHEMA = object_schema(
    {
        "subject": {"type": "string", "description": "A brief title for the task"},
        "description": {
            "type": "string",
            "description": "A detailed description of what needs to be done",
        },
        "activeForm": {
            "type": "string",
            "description": 'The task while in progress, shown to the user (e.g. "Running tests")',
        },
        "metadata": {"type": "object", "description": "Arbitrary metadata to attach to the task"},
    },
    ("subject", "description"),
)
_GET_SCHEMA = object_schema(
    {"taskId": {"type": "string", "description": "The ID of the task to retrieve"}}, ("taskId",)
)
_UPDATE_SCHEMA = object_schema(
    {
        "taskId": {"type": "string", "description": "The ID of the task to update"},
        "subject": {"type": "string", "description": "New subject for the task"},
        "description": {"type": "string", "description": "New description for the task"},
        "activeForm": {
            "type": "string",
            "description": 'The task while in progress, shown to the user (e.g. "Running tests")',
        },
        "status": {
            "type": "string",
            "enum": list(_STATUSES),
            "description": "New status: 'pending', 'in_progress', 'completed', or 'deleted'",
        },
        "addBlocks": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Task IDs that this task blocks",
        },
        "addBlockedBy": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Task IDs that block this task",
        },
        "owner": {"type": "string", "description": "New owner for the task"},
        "metadata": {
            "type": "object",
            "description": "Metadata keys to merge into the task; a key set to null is removed",
        },
    },
    ("taskId",),
)

_CREATE_DESCRIPTION = """Creates a task in the task list of this session (status pending).

Use the task list for work with three or more steps, when the user gives several things to
do, or to plan: create a task per step as soon as you know it. Skip it for a single simple
step or a plain question.

- subject: a short title in the imperative ("Fix the login bug").
- description: what has to be done, with enough context for someone else to do it.
- activeForm: the task while in progress ("Fixing the login bug"), shown to the user.

Check TaskList first to avoid duplicates; set dependencies afterwards with TaskUpdate."""

_GET_DESCRIPTION = """Returns one task by its ID: subject, status, description, the tasks it blocks
and the tasks that block it, and its owner.

Fetch a task before you start it, and check that nothing still blocks it."""

_UPDATE_DESCRIPTION = """Updates a task of the task list.

- status: set in_progress when you start a task and completed only when it is fully done
  (tests pass, nothing left unresolved); set deleted to remove a task that is no longer
  needed. Status goes pending -> in_progress -> completed.
- subject, description, activeForm, owner: replace those fields.
- metadata: keys to merge in; a key set to null is removed.
- addBlocks / addBlockedBy: tasks that cannot start before this one / tasks that must finish
  before this one.

Read a task's current state with TaskGet before updating it. After completing a task, call
TaskList to find the next one."""

_LIST_DESCRIPTION = """Lists every task: ID, status, subject, owner, and the tasks that block it.

Use it to find the next task to work on (pending, nothing blocking it) and to check progress."""

present(
    (
        PlanTaskMiddleware,
    ),
    "agentkit.middlewares",
)
