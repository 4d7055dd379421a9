"""Running an event iterator to its end, and summaries of events for comparing sequences."""

from __future__ import annotations

from collections.abc import Iterable

from agentkit.events import AgentEvent
from agentkit.testing._threads import no_thread_leak


def run_events(events: Iterable[AgentEvent], *, timeout: float = 10.0) -> list[AgentEvent]:
    """Drain ``events`` (e.g. ``runner.query("hi")``) into a list; no thread may outlive the run.

    The iterator is read to its end inside :func:`no_thread_leak`, so a run that leaves a
    worker thread behind fails with :class:`ThreadLeakError` (threads get up to ``timeout``
    seconds to end). Streamed messages in the events are not read; :func:`summarize` reads
    them. Example::

        events = run_events(Runner(agent).query("What's the weather in Paris?"))
        assert summarize(events[-1])[3] == "Sunny."
    """
    with no_thread_leak(timeout):
        return list(events)


def summarize(event: AgentEvent) -> tuple[str, list[str], str, str, str | None]:
    """Return ``(agent_name, run_path, kind, content, action)`` for comparing event sequences.

    ``kind`` is ``"assistant"``, ``"tool/<name>"``, ``"error"`` or ``""``; ``content`` is the
    message text (streams materialized) or the error text; ``action`` is ``"exit"``,
    ``"transfer:<dest>"``, ``"interrupt"``, ``"break_loop"``, ``"custom"`` or ``None``.
    """
    kind = ""
    content = ""
    variant = event.output.message_output if event.output is not None else None
    if variant is not None:
        kind = f"tool/{variant.tool_name}" if variant.tool_name else variant.role.value
        content = variant.get_message().content
    if event.err is not None:
        kind = "error"
        content = str(event.err)
    return event.agent_name, [str(step) for step in event.run_path], kind, content, _action(event)


def _action(event: AgentEvent) -> str | None:
    act = event.action
    if act is None:
        return None
    if act.exit:
        return "exit"
    if act.transfer_to_agent is not None:
        return f"transfer:{act.transfer_to_agent.dest_agent_name}"
    if act.interrupted is not None:
        return "interrupt"
    if act.break_loop is not None:
        return "break_loop"
    if act.customized_action is not None:
        return "custom"
    return None
