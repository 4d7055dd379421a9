"""Turning a run's events into log entries and a JSON summary (shared by the run backends).

:func:`publish` consumes a run's event iterator and appends ``token`` and ``agent`` entries
through a callback (:class:`Publisher` does the same for a run that calls it with each event,
``Runner.invoke(on_event=...)``, which :class:`InlineRun` runs: a run with no thread of its
own); it returns the run's summary (the data of its ``end`` entry) and the entries of the
run's last events, held back: a backend appends those together with the ``end`` entry and
the run's new state, so that no reader sees an interrupt (or the error a run stopped with)
while the run's state still says it is running. The summary is this package's own small JSON
result of a run, made from its events.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from agentkit._events import AgentEvent
from agentkit.errors import AgentCancelledError
from agentkit.iterators import AsyncIterator
from agentkit.schema import Message, Role

if TYPE_CHECKING:
    from agentkit._options import AgentRunOption
    from agentkit._runner import Runner

Append = Callable[[str, dict[str, Any]], object]
"""Appends one entry (kind, JSON data) to a run's log."""


@attrs.frozen
class Published:
    """What :func:`publish` made of a run: its summary, and the entries it held back.

    ``tail`` holds the ``agent`` entries of the run's final events (its interrupt, the error
    it stopped with), not appended yet: append them, the ``end`` entry (``summary``) and the
    run's new state in one step.
    """

    summary: dict[str, Any]
    tail: list[tuple[str, dict[str, Any]]]


def publish(events: AsyncIterator[AgentEvent], append: Append) -> Published:
    """Append the run's events (tokens first for streamed messages) but its final ones.

    An interrupt or error event is held back until another event follows it (then it was not
    the run's last); what is held when the run ends is returned in :attr:`Published.tail`.
    """
    publisher = Publisher(append)
    with events:
        for event in events:
            publisher(event)
    return publisher.published()


class Publisher:
    """Appends a run's events as they come, one call each: :func:`publish` for a run that
    is not read through an iterator (``Runner.invoke``'s ``on_event``).

    Call it with each event; :meth:`published` says what it made of them once the run ended.
    Not thread-safe: ``on_event`` calls are serialized by the run.
    """

    __slots__ = ("append", "held", "summary")

    def __init__(self, append: Append) -> None:
        self.append = append
        self.summary = Summary()
        self.held: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, event: AgentEvent) -> None:
        """Append ``event`` (its tokens first), or hold it back if it may be the run's last."""
        append = self.append
        held = self.held
        if held:
            for kind, data in held:
                append(kind, data)
            held.clear()
        variant = event.output.message_output if event.output is not None else None
        if variant is not None and variant.message_stream is not None:
            read = variant.open_stream()  # a reader of its own: the event stays unread
            try:
                for chunk in read:
                    if chunk.content:
                        append("token", {"agent_name": event.agent_name, "content": chunk.content})
            except Exception:
                read.close()  # the failure is reported by the event's own entry
        data = event.to_dict()
        if event.err is not None or event.interrupted:
            held.append(("agent", data))
        else:
            append("agent", data)
        self.summary.add(event, data)

    def published(self) -> Published:
        """The run's summary and the entries held back (see :class:`Published`)."""
        return Published(self.summary.result(), list(self.held))


@attrs.frozen
class InlineRun:
    """A new run, ready to go on in the calling thread: a run backend's task or thread.

    Its input is read and its options made; :meth:`publish` runs it to its end with
    ``Runner.invoke``, appending its events as they come (a :class:`Publisher` as
    ``on_event``): no thread of its own, no hand-over of each event. A resume is started by
    ``Runner.resume`` instead, which takes the run's lease and loads its checkpoint at once
    (they may refuse it before anything runs), and is read through :func:`publish`.
    """

    runner: Runner
    messages: list[Message]
    options: tuple[AgentRunOption, ...]

    def publish(self, append: Append) -> Published:
        """Run it here; its summary and the entries held back (see :func:`publish`).

        Raises:
            Exception: what ``append`` raised (the run was cancelled, and saved if it has a
                checkpoint id); a run that fails ends with its summary, as one read through
                an iterator does.
        """
        publisher = Publisher(append)
        self.runner.invoke(self.messages, *self.options, on_event=publisher, raise_errors=False)
        return publisher.published()

    def close(self) -> None:
        """Never started: nothing to stop."""


def summary_of_error(error: BaseException) -> dict[str, Any]:
    """The summary of a run that could not start (or resume) at all."""
    return {
        "status": "cancelled" if isinstance(error, AgentCancelledError) else "failed",
        "answer": None,
        "interrupts": [],
        "prompts": [],
        "error": {"type": type(error).__name__, "message": str(error)},
    }


class Summary:
    """Collects what the summary of a run needs while its events go by."""

    def __init__(self) -> None:
        self.answer: str | None = None
        self.error: dict[str, Any] | None = None
        self.cancelled = False
        self.prompts: list[dict[str, Any]] | None = None

    def add(self, event: AgentEvent, data: dict[str, Any]) -> None:
        """Take note of one event (``data`` is its ``to_dict()``)."""
        self.note(data)
        if event.err is not None:
            self.error = data["error"]
            self.cancelled = isinstance(event.err, AgentCancelledError)

    def note(self, data: dict[str, Any]) -> None:
        """Take note of an event's answer and interrupt from its ``to_dict()`` alone (an
        ``agent`` entry read back from a run's log)."""
        message = data.get("output", {}).get("message")
        role = data.get("output", {}).get("role")
        if message is not None and role == Role.ASSISTANT.value and message.get("content"):
            self.answer = message["content"]
        interrupted = data.get("action", {}).get("interrupted")
        if interrupted is not None:
            self.prompts = [
                {"id": context["id"], "info": context["info"]}
                for context in interrupted["contexts"]
                if context["is_root_cause"]
            ]

    def result(self) -> dict[str, Any]:
        """The summary: status, answer, interrupt ids and prompts, error."""
        if self.error is not None:
            status = "cancelled" if self.cancelled else "failed"
        elif self.prompts is not None:
            status = "interrupted"
        else:
            status = "completed"
        prompts = self.prompts or []
        return {
            "status": status,
            "answer": self.answer,
            "interrupts": [prompt["id"] for prompt in prompts],
            "prompts": prompts,
            "error": self.error,
        }
