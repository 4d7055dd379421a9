"""Human in the loop, feedback loop: a writer drafts, a critic asks the human, the writer revises.

A ``LoopAgent`` runs two agents in turn: the writer (a ChatModelAgent) writes a draft; the
critic (a custom agent) shows the draft to the human and stops the run for their feedback
(``interrupt_event``). Resumed with feedback, the critic passes it on and the loop goes round:
the writer revises. Resumed with "ok" (or "no need to edit"), the critic breaks the loop and
the run ends with the last draft (eino-examples ``human-in-the-loop/3_feedback-loop``).

    python samples/hitl_feedback_loop.py                              # feedback on stdin
    python samples/hitl_feedback_loop.py --feedback "make it rhyme" ok

Offline by default (scripted model); live with ``OPENAI_API_KEY`` (see samples/quickstart.py).
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Iterator, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import banner, make_model

from agentkit import (
    AgentEvent,
    AgentRun,
    BaseAgent,
    ChatModelAgent,
    LoopAgent,
    Message,
    Role,
    Runner,
    assistant_message,
    event_from_message,
    interrupt_event,
    new_break_loop_action,
    print_events,
    with_checkpoint_id,
)
from agentkit.checkpoint import InMemoryCheckPointStore

DEFAULT_REQUEST = "Write a short poem about potatoes."
APPROVALS = ("", "ok", "yes", "no need to edit")
FEEDBACK = "Feedback from the reader: "

DRAFTS = (
    "Brown coats in the cellar dark,\nwaiting for a pot and spark.",
    "Brown coats sleeping in the dark,\nhoping for a pot and spark;\n"
    "butter melts, the kettle sings,\npotatoes are the humblest kings.",
)


WRITER_SAID = "For context: [writer] said: "


def latest_draft(messages: list[Message]) -> str:
    """The writer's last draft, as another agent of the loop sees it (``For context: ...``)."""
    for message in reversed(messages):
        if message.role is Role.USER and message.content.startswith(WRITER_SAID):
            return message.content.removeprefix(WRITER_SAID).removesuffix(".")
    return ""


class Critic(BaseAgent):
    """Shows the writer's draft to the human and passes their feedback on (or ends the loop)."""

    name = "critic"
    description = "asks a human reader for feedback on the draft"

    def execute(self, run: AgentRun) -> None:
        info = run.resume_info
        if info is None:
            draft = latest_draft(run.input.messages)
            question = f"Your feedback on this draft? ('ok' if it is good)\n\n{draft}"
            run.emit(interrupt_event(question, state=draft))
            return
        feedback = str(info.resume_data or "").strip()
        if feedback.lower() in APPROVALS:
            event = event_from_message(
                assistant_message("The reader is happy with the draft."), None, Role.ASSISTANT
            )
            run.emit(AgentEvent(output=event.output, action=new_break_loop_action(self.name)))
            return
        run.emit(event_from_message(assistant_message(FEEDBACK + feedback), None, Role.ASSISTANT))


def scripted_writer(messages: list[Message]) -> Message | str:
    """Plays the writer: a first draft, then one revision per piece of feedback."""
    revisions = sum(FEEDBACK in m.content for m in messages)
    return DRAFTS[min(revisions, len(DRAFTS) - 1)]


def build_runner() -> Runner:
    writer = ChatModelAgent(
        "writer",
        "writes and revises short texts",
        make_model(scripted_writer),
        instruction=(
            "You write what the user asks for. When the conversation holds feedback from the "
            "reader, rewrite your last draft to follow it. Answer with the text only."
        ),
    )
    loop = LoopAgent(
        "feedback_loop", "writes until the reader is happy", [writer, Critic()], max_iterations=5
    )
    return Runner(loop, checkpoint_store=InMemoryCheckPointStore())


def main(argv: Sequence[str] | None = None) -> list[AgentEvent]:
    """Write, ask for feedback, revise until the reader says ok; returns every event."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("request", nargs="?", default=DEFAULT_REQUEST)
    parser.add_argument(
        "--feedback", nargs="*", help="the reader's answers in order (default: stdin)"
    )
    args = parser.parse_args(argv)
    banner("feedback loop")
    given: Iterator[str] = iter(args.feedback) if args.feedback is not None else iter(())
    runner = build_runner()
    checkpoint_id = f"feedback-{uuid.uuid4().hex[:8]}"
    print(f"> {args.request}")
    events = print_events(runner.query(args.request, with_checkpoint_id(checkpoint_id)))
    everything = list(events)
    while events and events[-1].action is not None and events[-1].action.interrupted is not None:
        (point,) = events[-1].action.interrupted.contexts
        feedback = next(given, None)
        if feedback is None:
            feedback = input("feedback ('ok' to finish): ")
        print(f"\nfeedback: {feedback or 'ok'}\n")
        events = print_events(runner.resume(checkpoint_id, targets={point.id: feedback}))
        everything += events
    return everything


if __name__ == "__main__":
    main()
