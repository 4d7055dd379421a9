"""Running an event iterator to its end, and summaries of events for comparing sequences."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from agentkit._events import AgentEvent
from agentkit.testing._threads import no_thread_leak


def run_events(
    events: Iterable[AgentEvent] | Callable[[], Iterable[AgentEvent]], *, timeout: float = 10.0
) -> list[AgentEvent]:
    """Drain a run's events into a list; fail if the run leaves a thread behind.

    The events are read to their end inside :func:`no_thread_leak`: a thread started while
    they are read and still alive afterwards (given up to ``timeout`` seconds to end) raises
    :class:`ThreadLeakError`. ``Runner.query`` starts the run's worker at once, so to watch
    the threads started before the first event too, pass a callable that starts the run::

        events = run_events(lambda: Runner(agent).query("What's the weather in Paris?"))
        assert summarize(events[-1])[3] == "Sunny."

    Streamed messages in the events are not read here; :func:`summarize` reads them.
    """
    with no_thread_leak(timeout):
        return list(events() if callable(events) else events)


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
