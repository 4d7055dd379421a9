"""A child process for the Ctrl-C tests: a run of four tool steps, stopped by a real SIGINT.

    python -m tests.ctrlc_child <how> <block_at> <store_dir> <state_dir> <checkpoint_id>

``how`` is how the run is driven: ``invoke``, ``on_event`` (``invoke`` with a callback),
``loop`` (a ``for`` loop over ``query``, no ``with``), ``with`` (the same inside ``with``),
``body`` (a ``for`` loop, no ``with``, whose body waits after step 2, writing ``in-body``),
``with_stream`` (a streaming run inside ``with``, each reply read through its
``message_stream``), ``result`` (``query(...).result()``) or ``resume`` (finish the saved run,
no blocking).

``block_at`` is where the run waits for the parent's SIGINT after writing ``ready`` into
``state_dir``:

* ``tool:<n>``: inside step ``n``, after it started;
* ``model:<n>``: in the model call made after ``n`` steps finished;
* ``event:<n>``: inside ``on_event``, handling the result of step ``n``;
* ``parallel:4``: steps 3 and 4 are asked for in one reply and run at once on the run's
  threads; step 4 waits (the run's own thread waits for the round);
* ``stubborn:2``: inside step 2, which ignores the first Ctrl-C (it catches it and waits
  again): only a second one ends the wait;
* ``stream:<n>``: in the model reply streamed after ``n`` steps finished, after its first
  chunk: the run's thread waits for the next chunk (writing ``streaming``), and the main thread
  (``with_stream``) reads that reply's ``message_stream`` once ``streaming`` is there;
* ``save``: inside step 2; then, after writing ``saving``, inside the store's ``set`` of the
  checkpoint that Ctrl-C makes, until the second SIGINT of the parent was handled: the save a
  second Ctrl-C must not cut;
* ``none``: nowhere.

The waits in the run's own thread are plain ``time.sleep`` under ``invoke`` (a tool that
knows nothing of cancels: the Ctrl-C itself must end it) and ``cancellable_sleep`` in a
worker thread (the Ctrl-C reaches the main thread, which cancels the run).

Every step appends ``start <n>`` and ``end <n>`` to ``state_dir/steps``: the parent counts how
often each step ran. The child prints one JSON line: how the run ended, the notes of the
``KeyboardInterrupt`` and the threads left.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from typing import Any

from agentkit import (
    AgentEvent,
    ChatModelAgent,
    Message,
    Role,
    Runner,
    cancellable_sleep,
    tool,
    with_checkpoint_id,
)
from agentkit.checkpoint import FileCheckPointStore
from agentkit.models import ScriptedChatModel
from agentkit.streams import StreamReader, stream_from_iterator
from agentkit.testing import call, calls_message

STEPS = 4
BLOCK_FOR = 120.0  # the parent's SIGINT ends the wait long before; a failure guard only

how, block_at, store_dir, state_dir, checkpoint_id = sys.argv[1:6]
block_kind, _, block_number = block_at.partition(":")

# Ctrl-C as at a terminal: a child of a process started in the background (a CI job, `cmd &`
# in a script) inherits SIGINT ignored, and Python then installs no handler of its own.
signal.signal(signal.SIGINT, signal.default_int_handler)

# The C-level signal handler writes a byte here as soon as a signal arrives (before the
# Python handler runs, in the main thread, at its next bytecode).
signals_read, signals_write = os.pipe()
os.set_blocking(signals_write, False)
signal.set_wakeup_fd(signals_write)
waiting_for_save = threading.Event()  # agentkit said it waits for the save to end
step_3_saved = threading.Event()  # the durable record of step 3's result is in the store


class SaveWaitSeen(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if "waiting for the save to end" in record.getMessage():
            waiting_for_save.set()


logging.getLogger("agentkit").addHandler(SaveWaitSeen())


def note(line: str) -> None:
    with open(os.path.join(state_dir, "steps"), "a", encoding="utf-8") as file:
        file.write(line + "\n")
        file.flush()
        os.fsync(file.fileno())


def say(name: str) -> None:
    with open(os.path.join(state_dir, name), "w", encoding="utf-8") as file:
        file.write(block_at)


def wait() -> None:
    if threading.current_thread() is threading.main_thread():
        time.sleep(BLOCK_FOR)
    else:
        cancellable_sleep(BLOCK_FOR)


def wait_for_ctrl_c() -> None:
    """Say we are ready, then wait until the parent's SIGINT ends the wait."""
    say("ready")
    wait()
    raise SystemExit(f"no SIGINT came while waiting at {block_at}")


@tool
def step(number: int) -> str:
    """Do one step of the job.

    Args:
        number: which step.
    """
    note(f"start {number}")
    if block_kind == "stubborn" and number == 2:
        try:
            # "ready" inside the try: the parent's SIGINT may land while say() still closes
            # the file it already sees, and the tool ignores the first Ctrl-C wherever it lands.
            say("ready")
            wait()
        except BaseException:
            note("ignored 2")
            say("ignored")
            time.sleep(BLOCK_FOR)  # deaf to cancels: only a second Ctrl-C ends this
        raise SystemExit("no second SIGINT came")
    if block_at == f"parallel:{number}" and not step_3_saved.wait(BLOCK_FOR):
        # Step 3 runs in the main thread, where the Ctrl-C lands: sent before its result is
        # saved, it could cut step 3 between its last line and the save (a call that did not
        # finish, which the resume runs again). The test is of a Ctrl-C after step 3 finished.
        raise SystemExit("the result of step 3 was never saved")
    if block_at in (f"tool:{number}", f"parallel:{number}") or (
        block_kind == "save" and number == 2
    ):
        wait_for_ctrl_c()
    note(f"end {number}")
    return f"step {number} done"


def model(messages: list[Message]) -> Message | str:
    finished = sum(1 for message in messages if message.role is Role.TOOL)
    if block_at == f"model:{finished}":
        wait_for_ctrl_c()
    if block_kind == "parallel" and finished == 2:
        return calls_message(
            call("step", {"number": 3}, id="step-3"), call("step", {"number": 4}, id="step-4")
        )
    if finished < STEPS:
        number = finished + 1
        return calls_message(call("step", {"number": number}, id=f"step-{number}"))
    return f"all {finished} steps done"


class SlowStore(FileCheckPointStore):
    """A file store whose first save after the Ctrl-C waits, halfway, for a second Ctrl-C to
    be handled (the saves of a durable run before it go through)."""

    def append_step(self, checkpoint_id: str, data: bytes, *, sync: bool = False) -> None:
        super().append_step(checkpoint_id, data, sync=sync)
        if b"step 3 done" in data:  # the record of step 3's result (pickled text is UTF-8)
            step_3_saved.set()

    def set(self, checkpoint_id: str, data: bytes) -> None:
        if (
            block_kind == "save"
            and os.path.exists(os.path.join(state_dir, "ready"))
            and not os.path.exists(os.path.join(state_dir, "saving"))
        ):
            os.set_blocking(signals_read, False)
            try:
                os.read(signals_read, 64)  # the byte(s) of the first SIGINT
            except BlockingIOError:
                pass
            os.set_blocking(signals_read, True)
            say("saving")
            if threading.current_thread() is threading.main_thread():
                # Under invoke: the byte of the second SIGINT is here before its Python
                # handler runs, in this thread, at the next call: a handler that cuts the
                # save raises out of it.
                os.read(signals_read, 1)
                note("second SIGINT during the save")
            elif not waiting_for_save.wait(BLOCK_FOR):
                raise SystemExit("agentkit never said it waits for the save")
        super().set(checkpoint_id, data)


class BlockingStreamModel:
    """A scripted model whose reply streamed at ``stream:<n>`` stops after its first chunk."""

    def __init__(self, scripted: Any) -> None:
        self.scripted = scripted

    def with_tools(self, tools: Any) -> BlockingStreamModel:
        return BlockingStreamModel(self.scripted.with_tools(tools))

    def generate(self, messages: Any, options: Any = None) -> Message:
        return self.scripted.generate(messages, options)  # type: ignore[no-any-return]

    def stream(self, messages: Any, options: Any = None) -> StreamReader[Message]:
        reader: StreamReader[Message] = self.scripted.stream(messages, options)
        finished = sum(1 for message in messages if message.role is Role.TOOL)
        if block_at != f"stream:{finished}":
            return reader

        def chunks() -> Any:
            yield reader.recv()
            say("streaming")
            wait()
            raise SystemExit("no SIGINT came while the reply was streaming")

        return stream_from_iterator(chunks())


def wait_for_file(name: str) -> None:
    deadline = time.monotonic() + BLOCK_FOR
    while not os.path.exists(os.path.join(state_dir, name)):
        if time.monotonic() > deadline:
            raise SystemExit(f"{name!r} never came")
        time.sleep(0.01)


def is_result_of(event: AgentEvent, number: str) -> bool:
    variant = event.output.message_output if event.output is not None else None
    if variant is None or variant.role is not Role.TOOL:
        return False
    return variant.get_message().content == f"step {number} done"


def on_event(event: AgentEvent) -> None:
    if block_kind == "event" and is_result_of(event, block_number):
        wait_for_ctrl_c()


def read_streams_inside_with(runner: Runner, query: str, option: Any) -> None:
    """Read every reply through its ``message_stream`` in the body of ``with``."""
    replies = 0
    with runner.query(query, option) as events:
        for event in events:
            variant = event.output.message_output if event.output is not None else None
            if variant is None or variant.role is not Role.ASSISTANT:
                continue
            replies += 1
            if block_kind == "stream" and replies == int(block_number) + 1:
                wait_for_file("streaming")  # the run's thread waits for the next chunk
                say("ready")
            assert variant.message_stream is not None
            for _chunk in variant.message_stream:  # the Ctrl-C lands here
                pass


def main() -> dict[str, Any]:
    streaming = how == "with_stream"
    chat_model: Any = ScriptedChatModel(model)
    if streaming:
        chat_model = BlockingStreamModel(chat_model)
    agent = ChatModelAgent("worker", "does the job step by step", chat_model, tools=[step])
    runner = Runner(agent, checkpoint_store=SlowStore(store_dir), enable_streaming=streaming)
    option = with_checkpoint_id(checkpoint_id)
    query = "do the job"
    if how == "resume":
        return {"ended": "resume", "text": runner.resume(checkpoint_id).result().text}
    if how == "invoke":
        return {"ended": "returned", "text": runner.invoke(query, option).text}
    if how == "on_event":
        return {"ended": "returned", "text": runner.invoke(query, option, on_event=on_event).text}
    if how == "result":
        return {"ended": "returned", "text": runner.query(query, option).result().text}
    if how == "loop":
        for _event in runner.query(query, option):
            pass
        return {"ended": "returned"}
    if how == "body":
        # The Ctrl-C lands in the loop's body, not in the iterator: the run goes on until
        # the program exits, which cancels and saves it.
        for event in runner.query(query, option):
            if is_result_of(event, "2"):
                say("in-body")
                time.sleep(BLOCK_FOR)
        return {"ended": "returned"}
    if how == "with":
        with runner.query(query, option) as events:
            for _event in events:
                pass
        return {"ended": "returned"}
    if how == "with_stream":
        read_streams_inside_with(runner, query, option)
        return {"ended": "returned"}
    raise SystemExit(f"unknown way to drive the run: {how}")


if __name__ == "__main__":
    try:
        outcome = main()
        code = 0
    except KeyboardInterrupt as error:
        outcome = {"ended": "KeyboardInterrupt", "notes": getattr(error, "__notes__", [])}
        code = 130
    outcome["threads"] = sorted(
        thread.name for thread in threading.enumerate() if thread is not threading.main_thread()
    )
    print(json.dumps(outcome), flush=True)
    sys.exit(code)
