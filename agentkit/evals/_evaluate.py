"""Run a dataset's cases against an agent and check them: :func:`evaluate`.

The cases run on a thread pool of ``concurrency`` threads owned by the call (named
``agentkit-eval_<n>``); each case is one :meth:`Runner.run <agentkit.Runner.run>` with its own
:class:`~agentkit.CancelHandle`, whose run starts its own worker thread as every run does.
The calling thread waits for them, updates the progress display, enforces the per-case
``timeout`` and watches ``cancel``. On a cancel, a Ctrl-C (``KeyboardInterrupt``) or any
other exception in the calling thread, every running case is cancelled at once, the cases
not started are dropped, and every thread is joined before ``evaluate`` returns or raises.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import threading
import time
from collections.abc import Iterable, Sequence
from typing import IO, Any

import attrs

from agentkit._callbacks import with_callbacks
from agentkit._cancel import CancelHandle, CancelMode
from agentkit._events import Agent
from agentkit._options import AgentRunOption, with_cancel
from agentkit._results import RunResult
from agentkit._runner import Runner
from agentkit.errors import AgentCancelledError, AgentKitTypeError, AgentKitValueError
from agentkit.evals._case import Case, CaseRun, Check
from agentkit.evals._checks import Equals
from agentkit.evals._dataset import Dataset
from agentkit.evals._errors import EvalCancelledError
from agentkit.evals._judge import Judge
from agentkit.evals._progress import Progress, make_progress
from agentkit.evals._report import CaseReport, EvalReport
from agentkit.schema import Message, TokenUsage
from agentkit.tools._base import ToolCallInfo

_TICK = 0.05  # seconds between looks at the clock, the cancel event and the progress


def evaluate(
    target: Runner | Agent,
    dataset: Dataset | Iterable[Case],
    *,
    concurrency: int = 1,
    retries: int = 0,
    timeout: float | None = None,
    options: Sequence[AgentRunOption] = (),
    progress: bool | IO[str] | None = None,
    cancel: threading.Event | None = None,
    name: str | None = None,
) -> EvalReport:
    """Run every case of ``dataset`` with ``target`` and check the answers.

    Args:
        target: a :class:`~agentkit.Runner` (its settings apply: streaming, stores), or an
            agent (run by a plain ``Runner(agent)``).
        dataset: a :class:`Dataset`, or cases.
        concurrency: how many cases run at once, each on its own thread. The report is the
            same for any concurrency (cases are reported in the dataset's order).
        retries: how many more times a failing case runs before it counts as failed (for
            flaky models); a case that passes on a retry is marked flaky.
        timeout: seconds a case's run may take; a run past it is cancelled and the case
            fails saying so.
        options: run options for every case (``with_session_values(...)``, ...).
        progress: ``None`` shows a progress bar in notebooks, and in terminals when stderr is
            one; ``True`` always, ``False`` never; a text stream gets the terminal bar.
        cancel: set this event (from any thread) to stop the evaluation: running cases are
            cancelled, the others skipped, and :class:`EvalCancelledError` raised with the
            report of the cases that finished.
        name: the report's name (default: the dataset's).

    A case passes when its run completes (no error, no interrupt) and every check passes:
    the case's own, then the dataset's. A case with an ``expected`` value is also checked
    with :class:`Equals` unless one of its checks already looks at it (an :class:`Equals`
    or a :class:`Judge`). A check that raises fails the case, its exception kept in
    ``CaseReport.errors``.

    Raises:
        EvalCancelledError: ``cancel`` was set before every case finished.
        KeyboardInterrupt: Ctrl-C, after every case was cancelled and every thread joined.
        ValueError, TypeError: bad arguments, or a dataset without cases.
    """
    runner = _runner(target)
    data = dataset if isinstance(dataset, Dataset) else Dataset(list(dataset))
    _check_arguments(data, concurrency, retries, timeout, cancel)
    evaluation = _Evaluation(runner, data, tuple(options), retries, timeout)
    display = make_progress(progress, len(data), name or data.name)
    started = time.monotonic()
    reports = evaluation.run(concurrency, cancel, display)
    report = EvalReport(
        [r for r in reports if r is not None],
        name=name or data.name,
        duration=time.monotonic() - started,
    )
    if len(report.cases) < len(data):
        raise EvalCancelledError(
            f"the evaluation was cancelled after {len(report.cases)} of {len(data)} cases; "
            "the error's report holds the finished ones",
            report,
        )
    return report


def _runner(target: Runner | Agent) -> Runner:
    if isinstance(target, Runner):
        return target
    if isinstance(target, Agent):
        return Runner(target)
    raise AgentKitTypeError(
        f"evaluate() runs a Runner or an agent (got {type(target).__name__}); wrap other "
        "code in an agent, or pass Runner(agent, ...)"
    )


def _check_arguments(
    data: Dataset,
    concurrency: int,
    retries: int,
    timeout: float | None,
    cancel: threading.Event | None,
) -> None:
    if not data.cases:
        raise AgentKitValueError("the dataset has no cases to evaluate")
    for label, value, least in (("concurrency", concurrency, 1), ("retries", retries, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise AgentKitValueError(f"{label} must be an int >= {least} (got {value!r})")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
    ):
        raise AgentKitValueError(
            f"timeout must be a positive number of seconds or None (got {timeout!r})"
        )
    if cancel is not None and not isinstance(cancel, threading.Event):
        raise AgentKitTypeError(f"cancel must be a threading.Event (got {type(cancel).__name__})")


class _Tally:
    """A callback handler counting a run's model calls and the tool calls the model asked for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.model_calls = 0
        self.tool_calls: list[ToolCallInfo] = []

    def on_model_start(self, info: object, messages: list[Message]) -> None:
        with self._lock:
            self.model_calls += 1

    def on_model_end(
        self, info: object, message: Message | None, error: BaseException | None
    ) -> None:
        if message is None or not message.tool_calls:
            return
        calls = [ToolCallInfo.from_tool_call(call) for call in message.tool_calls]
        with self._lock:
            self.tool_calls.extend(calls)


@attrs.define
class _Running:
    """A case's run in progress: its cancel handle and when it started."""

    handle: CancelHandle
    started: float
    timed_out: bool = False


class _Evaluation:
    """The state of one :func:`evaluate` call, shared by its threads (under ``lock``)."""

    def __init__(
        self,
        runner: Runner,
        dataset: Dataset,
        options: tuple[AgentRunOption, ...],
        retries: int,
        timeout: float | None,
    ) -> None:
        self.runner = runner
        self.dataset = dataset
        self.options = options
        self.retries = retries
        self.timeout = timeout
        self.lock = threading.Lock()
        self.stopped = False
        self.running: dict[int, _Running] = {}

    # -- the calling thread ---------------------------------------------------------------------

    def run(
        self, concurrency: int, cancel: threading.Event | None, display: Progress | None
    ) -> list[CaseReport | None]:
        """Run every case; a case cut short by a cancel has no report (``None``)."""
        cases = self.dataset.cases
        pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=min(concurrency, len(cases)), thread_name_prefix="agentkit-eval"
        )
        futures: list[concurrent.futures.Future[CaseReport | None]] = []
        try:
            for index, case in enumerate(cases):
                # Each case runs in a copy of the caller's context (tracing, context variables).
                context = contextvars.copy_context()
                futures.append(pool.submit(context.run, self.run_case, index, case))
            self._wait(futures, cancel, display)
        except BaseException:
            self.stop()
            for future in futures:
                future.cancel()
            raise
        finally:
            pool.shutdown(wait=True)
            if display is not None:
                display.close()
        return [
            future.result() if future.done() and not future.cancelled() else None
            for future in futures
        ]

    def _wait(
        self,
        futures: list[concurrent.futures.Future[CaseReport | None]],
        cancel: threading.Event | None,
        display: Progress | None,
    ) -> None:
        """Wait for the cases, or for the cancel; raise a worker's unexpected error."""
        pending = set(futures)
        passed = failed = 0
        while pending:
            done, pending = concurrent.futures.wait(
                pending, timeout=_TICK, return_when=concurrent.futures.FIRST_COMPLETED
            )
            for future in done:
                report = future.result()  # a bug in a worker is raised here, then cleaned up
                if report is not None:
                    passed += report.passed
                    failed += not report.passed
            if cancel is not None and cancel.is_set():
                self.stop()
                for future in pending:
                    future.cancel()
                return
            self._enforce_timeouts()
            if display is not None:
                display.update(passed + failed, passed, failed)

    def stop(self) -> None:
        """Cancel every running case and start no more."""
        with self.lock:
            self.stopped = True
            running = list(self.running.values())
        for entry in running:
            entry.handle.cancel(CancelMode.IMMEDIATE)

    def _enforce_timeouts(self) -> None:
        if self.timeout is None:
            return
        now = time.monotonic()
        late: list[CancelHandle] = []
        with self.lock:
            for entry in self.running.values():
                if not entry.timed_out and now - entry.started > self.timeout:
                    entry.timed_out = True
                    late.append(entry.handle)
        for handle in late:
            handle.cancel(CancelMode.IMMEDIATE)

    # -- the pool's threads ---------------------------------------------------------------------

    def _leave(self, index: int) -> bool:
        """Forget the run of case ``index``; ``True`` when the evaluation was stopped."""
        with self.lock:
            del self.running[index]
            return self.stopped

    def run_case(self, index: int, case: Case) -> CaseReport | None:
        """Run ``case`` (again, while it fails and retries are left); ``None`` when stopped."""
        checks = _resolve_checks(case, self.dataset.checks)
        attempt = 0
        while True:
            attempt += 1
            outcome = self._attempt(index, case, attempt)
            if outcome is None:
                return None
            run, timed_out = outcome
            failures, errors = _judge(run, checks, timed_out, self.timeout)
            if not failures or attempt > self.retries:
                return CaseReport(
                    name=case.name or f"case {index + 1}",
                    passed=not failures,
                    failures=failures,
                    result=run.result,
                    case=case,
                    duration=run.duration,
                    attempts=attempt,
                    model_calls=run.model_calls,
                    errors=errors,
                )

    def _attempt(self, index: int, case: Case, attempt: int) -> tuple[CaseRun, bool] | None:
        handle = CancelHandle()
        tally = _Tally()
        entry = _Running(handle, time.monotonic())
        with self.lock:
            if self.stopped:
                return None
            self.running[index] = entry
        try:
            try:
                iterator = self.runner.run(
                    case.messages, with_cancel(handle), with_callbacks(tally), *self.options
                )
            except Exception as error:  # the run could not start: the case fails with it
                result = _unstarted(error)
            else:
                result = iterator.result(raise_errors=False)
        finally:
            stopped = self._leave(index)
        if stopped:
            return None
        run = CaseRun(
            case=case,
            result=result,
            duration=time.monotonic() - entry.started,
            model_calls=tally.model_calls,
            tool_calls=tuple(tally.tool_calls),
            attempt=attempt,
        )
        return run, entry.timed_out


def _resolve_checks(case: Case, shared: Sequence[Check]) -> tuple[Check, ...]:
    checks = (*case.checks, *shared)
    if case.expected is not None and not any(isinstance(c, (Equals, Judge)) for c in checks):
        return (Equals(), *checks)
    return checks


def _unstarted(error: Exception) -> RunResult:
    return RunResult(
        events=[],
        final_message=None,
        output=None,
        session_values={},
        usage=TokenUsage(),
        usage_by_agent={},
        error=error,
    )


def _check_name(check: Check) -> str:
    if isinstance(check, type) or not hasattr(check, "__name__"):
        return repr(check)
    return str(check.__name__)


def _judge(
    run: CaseRun, checks: Sequence[Check], timed_out: bool, timeout: float | None
) -> tuple[list[str], list[BaseException]]:
    """The failures of ``run`` and the exceptions behind them."""
    result = run.result
    if result.error is not None:
        if timed_out and isinstance(result.error, AgentCancelledError):
            reason = f"the run took longer than timeout={timeout} s and was cancelled"
        elif isinstance(result.error, AgentCancelledError):
            reason = f"the run was cancelled: {result.error}"
        else:
            reason = f"the run failed: {type(result.error).__name__}: {result.error}"
        return [reason], [result.error]
    if result.interrupt is not None:
        infos = ", ".join(repr(c.info) for c in result.interrupt.contexts) or "no info"
        return [f"the run stopped at an interrupt ({infos}); an eval case must run to its end"], []
    failures: list[str] = []
    errors: list[BaseException] = []
    for check in checks:
        try:
            outcome: Any = check(run)
        except Exception as error:
            failures.append(f"{_check_name(check)} raised {type(error).__name__}: {error}")
            errors.append(error)
            continue
        if outcome is None or outcome is True:
            continue
        if outcome is False:
            failures.append(f"{_check_name(check)} failed")
        elif isinstance(outcome, str):
            failures.append(outcome)
        else:
            failures.append(
                f"{_check_name(check)} returned {outcome!r}; a check returns None or True "
                "(passed), or False or a reason (failed)"
            )
    return failures, errors
