"""Graceful cancel: Ctrl-C stops the agent at its next safe point and keeps the work done so far.

A research agent searches, then hands the results to an analyst (an agent used as a tool) that
analyzes and summarizes them: several model and tool calls, each tool taking a while. Press
Ctrl-C while it works: the run is cancelled at its next safe point (after a model call that
asked for tools, or after a round of tool calls; at once after 30 seconds, or at a second
Ctrl-C) and, because it has a checkpoint id, saved in a file store first. Run the printed
command to resume it later, in another process: the finished tool calls are not run again
(eino-examples ``adk/cancel/graceful-exit``).

    python samples/graceful_cancel.py                 # press Ctrl-C while it works
    python samples/graceful_cancel.py --resume ID     # go on from where it stopped

Offline by default (scripted models); live with ``OPENAI_API_KEY`` (see samples/quickstart.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import uuid
from collections.abc import Iterator, Sequence
from types import FrameType

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _common import banner, make_model

from agentkit import (
    AgentCancelledError,
    AgentEvent,
    AgentTool,
    CancelHandle,
    CancelMode,
    ChatModelAgent,
    CheckpointError,
    Message,
    Role,
    Runner,
    cancellable_sleep,
    print_events,
    tool,
    with_cancel,
    with_checkpoint_id,
)
from agentkit.checkpoint import FileCheckPointStore
from agentkit.testing import call, calls_message

DEFAULT_STORE = os.path.join(os.getcwd(), ".agentkit-checkpoints")
TOPIC = (
    "Research the topic: mysterious deep-space radio signals and their possible artificial origins."
)
GRACE_SECONDS = 30.0
STEP_SECONDS = float(os.environ.get("SAMPLE_STEP_SECONDS", "1.0"))  # how long each tool works


def _work(name: str) -> None:
    """Say the tool started, take a while (an immediate cancel cuts it short), say it is done."""
    print(f"[{name}] started", flush=True)
    cancellable_sleep(STEP_SECONDS)
    print(f"[{name}] done", flush=True)


@tool
def search_web(query: str) -> str:
    """Search the web.

    Args:
        query: what to search for.
    """
    _work("search_web")
    return (
        "Signal X-47: a 73-second period from the Proxima Centauri system; SETI rules out "
        "natural causes."
    )


@tool
def analyze_data(content: str, aspect: str) -> str:
    """Analyze content, focusing on one aspect.

    Args:
        content: what to analyze.
        aspect: the aspect to focus on.
    """
    _work("analyze_data")
    return f"On {aspect}: the 73-second period carries prime-number spacing; confidence 94%."


@tool
def summarize_findings(findings: list[str]) -> str:
    """Summarize findings into a short report.

    Args:
        findings: the findings to summarize.
    """
    _work("summarize_findings")
    return (
        f"Summary of {len(findings)} finding(s): the signal is very likely artificial; keep "
        "observing."
    )


def scripted_analyst(messages: list[Message]) -> Message | str:
    results = [m for m in messages if m.role is Role.TOOL]
    if not results:
        return calls_message(
            call("analyze_data", {"content": "Signal X-47", "aspect": "periodicity"}, id="a1")
        )
    if len(results) == 1:
        return calls_message(
            call("summarize_findings", {"findings": [results[0].content]}, id="s1")
        )
    return results[-1].content


def scripted_researcher(messages: list[Message]) -> Message | str:
    results = [m for m in messages if m.role is Role.TOOL]
    if not results:
        return calls_message(call("search_web", {"query": "deep-space radio signals"}, id="w1"))
    if len(results) == 1:
        return calls_message(
            call("analyst", {"request": f"Analyze: {results[0].content}"}, id="n1")
        )
    return f"Report: {results[-1].content}"


def build_runner(store_dir: str) -> Runner:
    analyst = ChatModelAgent(
        "analyst",
        "analyzes search results and summarizes them",
        make_model(scripted_analyst),
        instruction="Use analyze_data, then summarize_findings, then answer with the summary.",
        tools=[analyze_data, summarize_findings],
    )
    researcher = ChatModelAgent(
        "researcher",
        "researches a topic",
        make_model(scripted_researcher),
        instruction="Search with search_web, have the analyst analyze the results, then report.",
        tools=[search_web, AgentTool(analyst)],
    )
    return Runner(researcher, checkpoint_store=FileCheckPointStore(store_dir))


@contextlib.contextmanager
def ctrl_c_cancels(handle: CancelHandle) -> Iterator[None]:
    """While inside: a first Ctrl-C asks for a graceful stop, a second for an immediate one.

    Without a handler of its own, a program's Ctrl-C is a ``KeyboardInterrupt``, which agentkit
    turns into an immediate cancel (saved, then re-raised). A graceful stop needs the program
    to take SIGINT itself: the handler only asks the run to stop (it runs between two bytecodes
    of the main thread, so it writes its message straight to the file descriptor and takes no
    lock the main thread may hold); the run then ends at its next safe point and its events
    end with the cancel error, read as usual.
    """
    presses = 0

    def on_ctrl_c(signum: int, frame: FrameType | None) -> None:
        nonlocal presses
        presses += 1
        if presses == 1:
            say(
                "\nCtrl-C: stopping at the next safe point, keeping the work done so far "
                "(Ctrl-C again to stop at once)...\n"
            )
            handle.cancel(CancelMode.ANY_SAFE_POINT, timeout=GRACE_SECONDS)
        else:
            say("\nCtrl-C again: stopping now...\n")
            handle.cancel(CancelMode.IMMEDIATE)

    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def say(text: str) -> None:
    """Write ``text`` to stdout unbuffered (safe inside a signal handler)."""
    os.write(sys.stdout.fileno(), text.encode())


def start(store_dir: str) -> int:
    runner = build_runner(store_dir)
    checkpoint_id = f"research-{uuid.uuid4().hex[:8]}"
    handle = CancelHandle()
    print(f"> {TOPIC}\n(press Ctrl-C to stop; the work done so far is kept)", flush=True)
    with ctrl_c_cancels(handle):
        events = runner.query(TOPIC, with_checkpoint_id(checkpoint_id), with_cancel(handle))
        seen = print_events(events, raise_errors=False)
    return report(runner, seen, checkpoint_id, store_dir)


def resume(store_dir: str, checkpoint_id: str) -> int:
    runner = build_runner(store_dir)
    handle = CancelHandle()
    print(f"resuming {checkpoint_id}", flush=True)
    with ctrl_c_cancels(handle):
        try:
            events = runner.resume(checkpoint_id, with_cancel(handle))
        except CheckpointError as error:  # unknown, finished, busy or damaged
            print(f"cannot resume: {error}", file=sys.stderr)
            return 1
        seen = print_events(events, raise_errors=False)
    return report(runner, seen, checkpoint_id, store_dir)


def report(runner: Runner, seen: list[AgentEvent], checkpoint_id: str, store_dir: str) -> int:
    error = next((event.err for event in reversed(seen) if event.err is not None), None)
    if error is None:
        print("\nfinished.")
        return 0
    store = runner.checkpoint_store
    if isinstance(error, AgentCancelledError) or (store is not None and store.get(checkpoint_id)):
        print(f"\nstopped ({error}); the work done so far is saved as {checkpoint_id!r}.")
        print(f"resume with: python {sys.argv[0]} --store {store_dir} --resume {checkpoint_id}")
        return 130
    print(f"\nfailed: {type(error).__name__}: {error}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--store", default=DEFAULT_STORE, help="checkpoint directory")
    parser.add_argument("--resume", metavar="ID", help="resume the run saved under ID")
    args = parser.parse_args(argv)
    banner("graceful cancel")
    try:
        if args.resume:
            return resume(args.store, args.resume)
        return start(args.store)
    except KeyboardInterrupt:  # a Ctrl-C after the run ended (while reporting)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
