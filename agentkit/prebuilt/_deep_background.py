"""Background tasks of a deep agent: sub-agents and shell commands that run while the agent
goes on (Eino's ``adk/backgroundtask``).

With ``deep.new(..., background_tasks=True)`` the ``task`` tool and ``execute`` take
``run_in_background``; the call answers at once with a task id, and the work runs on a thread
of the run (:meth:`RunScope.spawn <agentkit._scope.RunScope.spawn>`), under a cancel scope of
its own. Two tools read and stop the tasks: ``task_output`` and ``task_stop``.

- **Records.** Each task is a :class:`BackgroundTask` value kept in the session under
  :data:`SESSION_KEY_BACKGROUND_TASKS` (a new ``dict`` of id to record on every change), so it
  is saved with the run: in the checkpoint of a stopped run, and in a durable run
  (``durability="step"``) with the agent's next step.
- **The version fence.** A worker completes its task only if the record still has the
  version the worker was started with. Stopping a task and restarting one bump the version,
  so a late worker (one that ignored its stop, or one of an earlier process) cannot complete
  a newer task.
- **Lost workers.** A record that says ``running`` when an agent run starts belongs to a
  worker that ended with an earlier run (the process died, or the run stopped): the task is
  restarted (at most ``max_restarts`` times, then reported ``lost``) and the model is told.
- **Notices.** A task's end is told to the model once, as a user message added before the
  agent's next model call (after a whole tool round, never inside one), unless the model
  read the result with ``task_output`` first. The agent does not answer while its tasks run:
  a reply without tool calls gets ``task_output`` calls that wait for them (shown in the
  conversation, not in the reply's event), then the model answers with their results.
- **The end.** When the agent's run ends (answer, error, interrupt, cancel) every task still
  running is stopped and its thread joined; an immediate cancel of the run stops them at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent import futures
from typing import Any, Literal

import attrs

from agentkit._cancel import CancelMode
from agentkit._interrupt import InterruptSignal
from agentkit._middleware import AgentContext, AgentMiddleware, ModelState, ToolInvoke
from agentkit._persist import persisted
from agentkit._points import Journal
from agentkit._runctx import RunFrame, ToolCallFrame, current_frame, use_frame
from agentkit._runlocals import current_run_locals
from agentkit._scope import RunScope
from agentkit.errors import AgentCancelledError, AgentKitRuntimeError, ToolArgumentsError
from agentkit.middlewares._file_tools import StreamingExecute
from agentkit.middlewares._tool import SchemaTool, add_tools, checked_arguments, object_schema
from agentkit.prebuilt._deep_tools import TaskTool
from agentkit.schema import ContentPart, FunctionCall, Message, ToolCall, ToolInfo, user_message
from agentkit.streams import StreamReader, stream_from_iterator
from agentkit.tools._base import BaseTool, InvokableTool, ToolCallInfo
from agentkit.tools._function_tool import content_text

__all__ = [
    "SESSION_KEY_BACKGROUND_TASKS",
    "TASK_OUTPUT_TOOL_NAME",
    "TASK_STOP_TOOL_NAME",
    "BackgroundTask",
    "BackgroundTasks",
]

SESSION_KEY_BACKGROUND_TASKS = "deep_agent_session_key_background_tasks"
"""The session key a deep agent keeps its background tasks under (a ``dict`` of task id to
:class:`BackgroundTask`)."""

TASK_OUTPUT_TOOL_NAME = "task_output"
"""The name of the tool that reads (and waits for) a background task's result."""
TASK_STOP_TOOL_NAME = "task_stop"
"""The name of the tool that stops a background task."""

TaskKind = Literal["agent", "shell"]
TaskStatus = Literal["running", "completed", "failed", "stopped", "lost"]

_KEY_MANAGER = "agentkit.deep.background_tasks"
_STOP_WAIT = 5.0  # seconds task_stop waits for a stopped worker to end
_END_WAIT = 10.0  # seconds the run's end waits for its stopped workers before joining them
_MAX_WAIT = 600.0  # the longest task_output(block=true) wait the model may ask for
_NOTICE_CHARS = 4000  # how much of a task's output a notice quotes


@persisted("agentkit.deep.BackgroundTask")
@attrs.frozen
class BackgroundTask:
    """One background task of a deep agent, as its record is kept (a value: a change is a
    new record, see :data:`SESSION_KEY_BACKGROUND_TASKS`).

    Attributes:
        id: the task's id in its run (``bg_1``, ``bg_2``...), what the model names it by.
        kind: ``"agent"`` (a sub-agent started with ``task``) or ``"shell"`` (a command
            started with ``execute``).
        request: the sub-agent's task description, or the command.
        subagent_type: the sub-agent's name (``""`` for a command).
        status: ``"running"``, ``"completed"``, ``"failed"`` (its output says why),
            ``"stopped"`` (by ``task_stop`` or the run's end) or ``"lost"`` (its worker ended
            with an earlier run and it was not restarted).
        version: the fence: bumped by every stop and restart; a worker completes the task
            only while the record has the version it was started with.
        output: the final output (the sub-agent's answer, the command's output), capped.
        restarts: how many times it was restarted after its worker was lost.
        reported: the model was told of its end (a notice, or ``task_output``).
    """

    id: str
    kind: TaskKind
    request: str
    subagent_type: str = ""
    status: TaskStatus = "running"
    version: int = 1
    output: str = ""
    restarts: int = 0
    reported: bool = False

    @property
    def running(self) -> bool:
        """Whether the task is still running."""
        return self.status == "running"

    def title(self) -> str:
        """``bg_1 (sub-agent 'researcher': <the task>)`` or ``bg_2 (command: <it>)``."""
        request = self.request if len(self.request) <= 80 else self.request[:77] + "..."
        if self.kind == "agent":
            return f"{self.id} (sub-agent {self.subagent_type!r}: {request})"
        return f"{self.id} (command: {request})"


Work = Callable[[Callable[[str], None]], str]
"""``work(report) -> output``: a task's work; it may ``report`` its output as it comes."""
Launch = Callable[[BackgroundTask], Work]
"""``launch(record) -> work``: the work of a task."""

_PARTIAL_CHARS = 4000  # how much of a running task's latest output is kept to show


class _Wake:
    """Registered with a scope while someone waits: a cancel wakes the wait (or the task)."""

    __slots__ = ("_action", "woken")

    def __init__(self, action: Callable[[], object]) -> None:
        self._action = action
        self.woken = False

    def close(self) -> None:
        self.woken = True
        self._action()


@attrs.define(eq=False)
class _Worker:
    """A running task's worker: its cancel scope, version, future, and the latest output it
    reported (a running command's, from a streaming shell; kept in memory only)."""

    scope: RunScope
    version: int
    ended: threading.Event = attrs.Factory(threading.Event)
    future: futures.Future[None] | None = None
    partial: str = ""
    lock: threading.Lock = attrs.Factory(threading.Lock)

    def report(self, chunk: str) -> None:
        """Keep the latest output (its last characters)."""
        with self.lock:
            self.partial = (self.partial + chunk)[-_PARTIAL_CHARS:]


class TaskManager:
    """The background tasks of one agent run: starts, fences, waits for, stops and reports
    them (framework-internal; made by :class:`BackgroundTasks` on the run's first hook).

    Every record change goes through :meth:`_put` under one condition, which also wakes the
    waits of ``task_output``.
    """

    def __init__(
        self,
        frame: RunFrame,
        launch: Launch,
        *,
        max_running: int,
        max_output_chars: int,
        max_restarts: int,
    ) -> None:
        if frame.session is None:  # pragma: no cover - a ChatModelAgent run has a session
            raise AgentKitRuntimeError("background tasks need a run with session values")
        self._frame = frame
        self._scope = frame.scope
        self._session = frame.session
        self._launch = launch
        self._max_running = max_running
        self._max_output = max_output_chars
        self._cond = threading.Condition()
        self._workers: dict[str, _Worker] = {}
        self._notices: list[str] = []
        self._closed = False
        self._max_restarts = max_restarts

    # --- records ---

    def records(self) -> dict[str, BackgroundTask]:
        """The run's tasks by id (a copy)."""
        with self._cond:
            return dict(self._session.get(SESSION_KEY_BACKGROUND_TASKS) or {})

    def get(self, task_id: str) -> BackgroundTask:
        """The record of ``task_id``.

        Raises:
            ToolArgumentsError: no task of this run has that id (the model is told which do).
        """
        records = self.records()
        task = records.get(task_id) if isinstance(task_id, str) else None
        if task is None:
            known = ", ".join(f"{t.id} ({t.status})" for t in records.values()) or "none"
            raise ToolArgumentsError(
                f"there is no background task {task_id!r} in this run; its tasks are: {known}"
            )
        return task

    def _put(self, task: BackgroundTask) -> None:
        # Under self._cond. A new dict every time: the session's durable writer saves a key
        # whose value object changed.
        records = dict(self._session.get(SESSION_KEY_BACKGROUND_TASKS) or {})
        records[task.id] = task
        self._session.set(SESSION_KEY_BACKGROUND_TASKS, records)
        self._cond.notify_all()

    def recover(self) -> None:
        """Restart (or report lost) the tasks an earlier run left running (called once, when
        the manager is made: no worker of this run exists yet)."""
        max_restarts = self._max_restarts
        with self._cond:
            left = [t for t in self.records().values() if t.running]
            restart: list[BackgroundTask] = []
            for task in left:
                if task.restarts < max_restarts:
                    task = attrs.evolve(task, version=task.version + 1, restarts=task.restarts + 1)
                    restart.append(task)
                    self._notices.append(
                        f"Background task {task.title()} was restarted: its worker ended with "
                        "an earlier run of this agent (the run paused or stopped, or its "
                        "process died) before the task finished. You will be told when it ends."
                    )
                else:
                    task = attrs.evolve(
                        task,
                        status="lost",
                        version=task.version + 1,
                        output="its worker ended with an earlier run of this agent before the "
                        f"task finished (restarted {task.restarts} times already)",
                    )
                self._put(task)
        for task in restart:
            self._start_worker(task)

    # --- starting and ending ---

    def start(self, kind: TaskKind, request: str, subagent_type: str = "") -> BackgroundTask:
        """Record a new task and start its worker; return its record.

        Raises:
            ToolArgumentsError: ``max_running`` tasks run already (the model is told).
        """
        with self._cond:
            if self._closed:
                raise AgentKitRuntimeError("the agent run is ending: no task can start now")
            records = self.records()
            running = [t.id for t in records.values() if t.running]
            if len(running) >= self._max_running:
                raise ToolArgumentsError(
                    f"{len(running)} background tasks are running already ("
                    f"{', '.join(running)}), the most this agent runs at once; wait for one "
                    f"with {TASK_OUTPUT_TOOL_NAME} or stop one with {TASK_STOP_TOOL_NAME}"
                )
            task = BackgroundTask(f"bg_{len(records) + 1}", kind, request, subagent_type)
            self._put(task)
        self._start_worker(task)
        return task

    def _start_worker(self, task: BackgroundTask) -> None:
        work = self._launch(task)
        scope = RunScope()
        worker = _Worker(scope, task.version)
        place = current_frame() or self._frame
        frame = attrs.evolve(
            place,
            scope=scope,
            # The task is no step of the agent's: it records no resume point and commits no
            # progress (its record, in the session, is what is kept).
            journal=Journal(),
            progress=None,
            resume=None,
            tool=ToolCallFrame(name=f"background {task.kind}", call_id=task.id, options={}),
            steering=None,  # a message sent to the run is for the agent the user talks to
        )
        wake = _Wake(lambda: scope.request_cancel(CancelMode.IMMEDIATE))
        try:
            self._scope.open(wake)  # an immediate cancel of the run stops the task too
        except AgentCancelledError:
            self._finish(task.id, worker.version, "stopped", "the run was cancelled")
            raise

        def body() -> None:
            status: TaskStatus = "completed"
            try:
                with use_frame(frame):
                    output = work(worker.report)
            except AgentCancelledError:
                status, output = "stopped", "stopped before it finished"
            except InterruptSignal:
                status, output = "failed", (
                    "it asked to pause for input or approval, which a background task cannot "
                    "do; run it in the foreground instead"
                )
            except Exception as error:
                status, output = "failed", f"{type(error).__name__}: {error}"
            finally:
                scope.finish()
                self._scope.closed(wake)
            self._finish(task.id, worker.version, status, output)
            worker.ended.set()

        with self._cond:
            self._workers[task.id] = worker
            closing = self._closed
        if closing:  # the run's end came meanwhile: the task stops at its first check
            scope.request_cancel(CancelMode.IMMEDIATE)
        try:
            worker.future = self._scope.spawn(body, name=f"agentkit-background {task.id}")
        except BaseException:  # the run ended meanwhile: the task never ran
            self._scope.closed(wake)
            self._finish(task.id, worker.version, "failed", "the run ended before it started")
            worker.ended.set()
            raise

    def _finish(self, task_id: str, version: int, status: TaskStatus, output: str) -> bool:
        """Complete the task's record with the worker's outcome, if the fence lets it."""
        if len(output) > self._max_output:
            output = (
                output[: self._max_output]
                + f"\n[output truncated: {len(output) - self._max_output} more characters]"
            )
        with self._cond:
            task = self._session.get(SESSION_KEY_BACKGROUND_TASKS, {}).get(task_id)
            if task is None or task.version != version or not task.running:
                return False  # a stale worker: the task was stopped or restarted meanwhile
            self._put(attrs.evolve(task, status=status, output=output))
            return True

    def stop(self, task_id: str) -> BackgroundTask:
        """Stop ``task_id``: cancel its worker, wait a bounded time, fence it off."""
        task = self.get(task_id)
        if not task.running:
            return task
        with self._cond:
            worker = self._workers.get(task_id)
        if worker is not None:
            worker.scope.request_cancel(CancelMode.IMMEDIATE)
            worker.ended.wait(_STOP_WAIT)
        with self._cond:
            task = self.get(task_id)
            if task.running:  # the worker did not end in time: a late result is refused
                task = attrs.evolve(
                    task,
                    status="stopped",
                    version=task.version + 1,
                    output="stopped before it finished",
                )
                self._put(task)
        return task

    def wait(self, task_id: str, timeout: float) -> BackgroundTask:
        """Wait up to ``timeout`` seconds for ``task_id`` to end; return its record.

        Raises:
            AgentCancelledError: the run was cancelled meanwhile.
        """
        deadline = time.monotonic() + timeout
        task = self.get(task_id)

        def wake_all() -> None:
            with self._cond:
                self._cond.notify_all()

        wake = _Wake(wake_all)
        self._scope.open(wake)
        try:
            with self._cond:
                while task.running and not wake.woken:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._cond.wait(remaining)
                    task = self.get(task_id)
        finally:
            self._scope.closed(wake)
        self._scope.check()
        return task

    def mark_reported(self, task: BackgroundTask) -> None:
        """The model saw ``task``'s end: no notice of it is sent."""
        with self._cond:
            current = self._session.get(SESSION_KEY_BACKGROUND_TASKS, {}).get(task.id)
            if current is not None and not current.running and not current.reported:
                self._put(attrs.evolve(current, reported=True))

    def take_notices(self) -> list[str]:
        """The notices to tell the model now (restarts, ended tasks), each once."""
        with self._cond:
            notices, self._notices = self._notices, []
            for task in self.records().values():
                if not task.running and not task.reported:
                    notices.append(_ended_text(task, _NOTICE_CHARS))
                    self._put(attrs.evolve(task, reported=True))
        return notices

    def partial_output(self, task_id: str) -> str:
        """The latest output a running task reported (``""``: none, or not a command of a
        streaming shell)."""
        with self._cond:
            worker = self._workers.get(task_id)
        if worker is None:
            return ""
        with worker.lock:
            return worker.partial

    def running(self) -> list[BackgroundTask]:
        """The tasks running now."""
        return [task for task in self.records().values() if task.running]

    def close(self) -> None:
        """The agent run ends: stop every task still running and wait for their workers."""
        with self._cond:
            self._closed = True
            workers = list(self._workers.values())
        for worker in workers:
            worker.scope.request_cancel(CancelMode.IMMEDIATE)
        pending = [w.future for w in workers if w.future is not None]
        futures.wait(pending, _END_WAIT)  # the run's end joins what is left (RunScope.finish)


def _ended_text(task: BackgroundTask, limit: int | None = None) -> str:
    output = task.output
    if limit is not None and len(output) > limit:
        output = (
            output[:limit] + f"\n[{len(output) - limit} more characters: read them with "
            f"{TASK_OUTPUT_TOOL_NAME}]"
        )
    restarted = f" (after {task.restarts} restart(s))" if task.restarts else ""
    return f"Background task {task.title()} {task.status}{restarted}.\nOutput:\n{output}"


_TASK_OUTPUT_SCHEMA = object_schema(
    {
        "task_id": {"type": "string", "description": "The background task's id (bg_1, ...)"},
        "block": {
            "type": "boolean",
            "description": "Wait for the task to end (default false: answer at once)",
        },
        "timeout": {
            "type": "number",
            "description": f"With block: the most seconds to wait (default 60, at most "
            f"{_MAX_WAIT:g})",
        },
    },
    ("task_id",),
)
_TASK_STOP_SCHEMA = object_schema(
    {"task_id": {"type": "string", "description": "The background task's id (bg_1, ...)"}},
    ("task_id",),
)
_BACKGROUND_PROPERTY = {
    "type": "boolean",
    "description": "Run it in the background: the call answers at once with a task id, you "
    "are told when it ends, and task_output reads its result (default false)",
}

BACKGROUND_PROMPT = """

# Background tasks

'task' and 'execute' take run_in_background=true for long work: the call answers at once
with a task id (bg_1, ...) and you go on while it runs. You are told when a background task
ends, with its output. task_output(task_id) reads a task's state and result
(block=true waits for it); task_stop(task_id) stops one. Do not start the same work twice.
"""


class BackgroundTasks(AgentMiddleware):
    """Gives a deep agent background tasks (see the module): ``run_in_background`` on its
    ``task`` and ``execute`` tools, ``task_output`` and ``task_stop``, the notices and the
    wait before answering.

    Args:
        task: the ``task`` tool whose sub-agents can run in the background.
        execute: the ``execute`` tool whose commands can run in the background.
        max_running: the most tasks running at once.
        max_output_chars: the most characters of a task's output kept in its record.
        max_restarts: how many times a task whose worker was lost is restarted before it is
            reported lost.
        wait_timeout: the most seconds the agent waits for a task before answering.
    """

    def __init__(
        self,
        task: TaskTool | None,
        execute: InvokableTool | None,
        *,
        max_running: int = 8,
        max_output_chars: int = 50_000,
        max_restarts: int = 1,
        wait_timeout: float = 300.0,
    ) -> None:
        self._max_running = max_running
        self._max_output = max_output_chars
        self._max_restarts = max_restarts
        self._wait_timeout = wait_timeout
        self._task = task
        self._execute = execute

    def before_agent(self, context: AgentContext) -> None:
        """Offer ``run_in_background`` on ``task`` and ``execute``, add ``task_output`` and
        ``task_stop``, and append the section on background tasks to the instruction."""
        tools: list[BaseTool] = []
        for tool in context.tools:
            if tool is self._task and self._task is not None:
                tool = _InBackground(self, self._task, "agent")
            elif isinstance(tool, StreamingExecute) and tool is self._execute:
                tool = _StreamingInBackground(self, tool, "shell")
            elif tool is self._execute and self._execute is not None:
                tool = _InBackground(self, self._execute, "shell")
            tools.append(tool)
        context.tools[:] = tools
        context.instruction += BACKGROUND_PROMPT
        add_tools(context, [self._output_tool(), self._stop_tool()], "the deep agent")

    def manager(self) -> TaskManager:
        """The current agent run's task manager (made on first use)."""
        local = current_run_locals("background tasks")
        made: list[TaskManager] = []

        def make() -> TaskManager:
            frame = current_frame()
            assert frame is not None  # run locals exist inside a run only
            made.append(
                TaskManager(
                    frame,
                    self._launch,
                    max_running=self._max_running,
                    max_output_chars=self._max_output,
                    max_restarts=self._max_restarts,
                )
            )
            return made[0]

        manager: TaskManager = local.setdefault(_KEY_MANAGER, make)
        if made:  # this thread made it (another one may have asked at the same time)
            local.at_end(manager.close)
            manager.recover()
        return manager

    def wrap_tool_call(self, call: ToolCallInfo, invoke: ToolInvoke) -> str:
        """Make the run's task manager before the first tool call (a resumed run may start
        with its tool round), in the agent's scope."""
        self.manager()
        return invoke(call)

    def before_model(self, state: ModelState) -> None:
        """Tell the model, in one user message, of the tasks that ended since its last call."""
        notices = self.manager().take_notices()
        if notices:
            state.messages.append(
                user_message(
                    "<background-task-notices>\n"
                    + "\n\n".join(notices)
                    + "\n</background-task-notices>"
                )
            )

    def after_model(self, state: ModelState, message: Message) -> Message:
        """An answer while tasks run becomes a wait for them (``task_output`` calls)."""
        if message.tool_calls:
            return message
        running = self.manager().running()
        if not running:
            return message
        turn = len(state.messages)
        waits = tuple(
            ToolCall(
                f"wait_{task.id}_{turn}",
                FunctionCall(
                    TASK_OUTPUT_TOOL_NAME,
                    json.dumps(
                        {"task_id": task.id, "block": True, "timeout": self._wait_timeout}
                    ),
                ),
            )
            for task in running
        )
        return attrs.evolve(message, tool_calls=waits)

    def _launch(self, task: BackgroundTask) -> Work:
        tool: InvokableTool | None
        if task.kind == "agent":
            tool, arguments = self._task, {
                "subagent_type": task.subagent_type,
                "description": task.request,
            }
        else:
            tool, arguments = self._execute, {"command": task.request}
        if tool is None:  # pragma: no cover - only tools this middleware wrapped start tasks
            raise AgentKitRuntimeError(f"no tool runs background tasks of kind {task.kind!r}")
        text = json.dumps(arguments, ensure_ascii=False)
        if isinstance(tool, StreamingExecute):
            streaming = tool

            def stream_command(report: Callable[[str], None]) -> str:
                chunks: list[str] = []
                with streaming.stream(text) as reader:
                    for chunk in reader:
                        chunks.append(chunk)
                        report(chunk)
                return "".join(chunks)

            return stream_command
        invoke = tool.invoke
        return lambda report: invoke(text)

    def _output_tool(self) -> SchemaTool:
        def task_output(arguments: dict[str, Any]) -> str:
            manager = self.manager()
            task = manager.get(arguments["task_id"])
            if arguments.get("block") and task.running:
                timeout = arguments.get("timeout", 60)
                timeout = min(max(float(timeout), 0.0), _MAX_WAIT)
                task = manager.wait(task.id, timeout)
            if task.running:
                partial = manager.partial_output(task.id)
                so_far = f"\nIts latest output:\n{partial}" if partial else ""
                return (
                    f"Background task {task.title()} is still running. Call "
                    f"{TASK_OUTPUT_TOOL_NAME} with block=true to wait for it, or "
                    f"{TASK_STOP_TOOL_NAME} to stop it.{so_far}"
                )
            manager.mark_reported(task)
            return _ended_text(task)

        return SchemaTool(
            TASK_OUTPUT_TOOL_NAME,
            "Reads a background task's state and, once it ended, its output; with "
            "block=true waits for it to end (up to timeout seconds).",
            _TASK_OUTPUT_SCHEMA,
            task_output,
        )

    def _stop_tool(self) -> SchemaTool:
        def task_stop(arguments: dict[str, Any]) -> str:
            manager = self.manager()
            before = manager.get(arguments["task_id"])
            if not before.running:
                manager.mark_reported(before)
                return f"Background task {before.id} had ended already: " + _ended_text(before)
            task = manager.stop(before.id)
            manager.mark_reported(task)
            if task.status == "stopped":
                return f"Stopped background task {task.title()}."
            return f"Background task {task.id} ended before it was stopped: " + _ended_text(task)

        return SchemaTool(
            TASK_STOP_TOOL_NAME,
            "Stops a running background task (its sub-agent or command is cancelled).",
            _TASK_STOP_SCHEMA,
            task_stop,
        )


class _InBackground:
    """``task`` or ``execute`` with a ``run_in_background`` argument."""

    __slots__ = ("_info", "_kind", "_owner", "_tool")

    def __init__(self, owner: BackgroundTasks, tool: InvokableTool, kind: TaskKind) -> None:
        self._owner = owner
        self._tool = tool
        self._kind = kind
        info = tool.info()
        parameters = json.loads(json.dumps(info.parameters))
        parameters.setdefault("properties", {})["run_in_background"] = dict(_BACKGROUND_PROPERTY)
        self._info = ToolInfo(name=info.name, description=info.description, parameters=parameters)

    def info(self) -> ToolInfo:
        """The wrapped tool's info with ``run_in_background`` added."""
        return self._info

    def __repr__(self) -> str:
        return f"InBackground({self._tool!r})"

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Run the tool, or start it as a background task and answer with its id."""
        return content_text(self.invoke_content(arguments, **tool_options))

    def invoke_content(self, arguments: str, **tool_options: Any) -> str | tuple[ContentPart, ...]:
        """Run the tool (its parts too, for a sub-agent's answer with images or files), or
        start it as a background task and answer with its id."""
        given = checked_arguments(self._info, arguments)
        if not given.pop("run_in_background", False):
            text = json.dumps(given, ensure_ascii=False)
            tool = self._tool
            if isinstance(tool, TaskTool):
                return tool.invoke_content(text, **tool_options)
            return tool.invoke(text, **tool_options)
        checked_arguments(self._tool.info(), json.dumps(given))
        tool = self._tool
        if isinstance(tool, TaskTool) and given["subagent_type"] not in tool.agent_names:
            tool.invoke_content(json.dumps(given))  # raises: the model is told the types
        if self._kind == "agent":
            task = self._owner.manager().start(
                "agent", given["description"], given["subagent_type"]
            )
        else:
            task = self._owner.manager().start("shell", given["command"])
        return (
            f"Started background task {task.id}. You will be told when it ends; "
            f"{TASK_OUTPUT_TOOL_NAME}(task_id={task.id!r}) reads its result, "
            f"{TASK_STOP_TOOL_NAME} stops it."
        )


class _StreamingInBackground(_InBackground):
    """``execute`` over a streaming shell, with ``run_in_background``: streams in the
    foreground."""

    __slots__ = ()

    def stream(self, arguments: str, **tool_options: Any) -> StreamReader[str]:
        """Stream the command's output, or start it in the background (one chunk: the id)."""
        given = checked_arguments(self._info, arguments)
        tool = self._tool
        if given.pop("run_in_background", False) or not isinstance(tool, StreamingExecute):
            return stream_from_iterator([self.invoke(arguments, **tool_options)])
        return tool.stream(json.dumps(given, ensure_ascii=False), **tool_options)
