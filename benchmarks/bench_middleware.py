"""Cost of middleware and callbacks per ReAct step.

A step is one model call that asks for one tool, the tool call, and the events they make, with
an in-process model that answers at once (see ``bench_react_step.py``). Configurations:

* ``none``: no middleware, no callbacks (the plain path);
* ``3 base``: three ``AgentMiddleware()`` that override nothing (skipped entirely);
* ``3 no-op``: three middlewares overriding every hook with a pass-through;
* ``callbacks``: one handler with every callback method, doing nothing.

Run: ``python benchmarks/bench_middleware.py`` (add ``--none-only`` to time only the plain
path, e.g. against another checkout with ``PYTHONPATH=...``).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from agentkit import (
    AgentMiddleware,
    ChatModelAgent,
    Message,
    Role,
    Runner,
    StreamReader,
    ToolInfo,
    tool,
    with_callbacks,
)
from agentkit.models import ModelOptions
from agentkit.streams import stream_from_list
from agentkit.testing import call, calls_message


@tool
def step(n: int) -> str:
    """One step of work."""
    return f"done {n}"


class InstantModel:
    """A tool-calling model that answers at once: N tool-call steps, then a final answer."""

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.calls = 0

    def with_tools(self, tools: Sequence[ToolInfo]) -> InstantModel:
        return self

    def stream(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> StreamReader[Message]:
        return stream_from_list([self.generate(messages, options)])

    def generate(
        self, messages: Sequence[Message], options: ModelOptions | None = None
    ) -> Message:
        done = self.calls
        self.calls += 1
        if done < self.steps:
            return calls_message(call("step", {"n": done}, id=f"c{done}"))
        return Message(Role.ASSISTANT, "finished")


class PassThrough(AgentMiddleware):
    """A middleware that overrides every hook and changes nothing."""

    def before_agent(self, context: Any) -> None:
        pass

    def before_model(self, state: Any) -> None:
        pass

    def after_model(self, state: Any, message: Message) -> Message:
        return message

    def wrap_model(self, call: Any) -> Any:
        def wrapped(messages: list[Message], options: Any) -> Message:
            return call(messages, options)  # type: ignore[no-any-return]

        return wrapped

    def wrap_tool_call(self, call: Any, invoke: Any) -> str:
        return str(invoke(call))


class Quiet:
    """A callback handler that listens to every event and does nothing."""

    def on_agent_start(self, *args: Any) -> None: ...
    def on_agent_end(self, *args: Any) -> None: ...
    def on_model_start(self, *args: Any) -> None: ...
    def on_model_end(self, *args: Any) -> None: ...
    def on_tool_start(self, *args: Any) -> None: ...
    def on_tool_end(self, *args: Any) -> None: ...


# The agent's keyword arguments (and, under "options", the run options) of each configuration.
CONFIGURATIONS: dict[str, Callable[[], dict[str, Any]]] = {
    "none": lambda: {},
    "3 base": lambda: {"middlewares": [AgentMiddleware() for _ in range(3)]},
    "3 no-op": lambda: {"middlewares": [PassThrough() for _ in range(3)]},
    "callbacks": lambda: {"options": [with_callbacks(Quiet())]},
}


def make_middlewares(kind: str) -> dict[str, Any]:
    """A fresh configuration of the given kind (see ``CONFIGURATIONS``)."""
    return CONFIGURATIONS[kind]()


def one_run(kind: str, steps: int) -> float:
    """Seconds per step of one run of ``steps`` steps."""
    config = make_middlewares(kind)
    options = config.pop("options", [])
    model = InstantModel(steps)
    agent = ChatModelAgent("bench", "d", model, tools=[step], max_iterations=steps + 1, **config)
    gc.collect()
    # CPU time of the process (all its threads): what agentkit spends, not what other load
    # on the machine makes it wait.
    started = time.process_time()
    for event in Runner(agent).query("go", *options):
        if event.err is not None:
            raise event.err
    return (time.process_time() - started) / (steps + 1)


def main() -> None:
    kinds = ["none"] if "--none-only" in sys.argv else ["none", "3 base", "3 no-op", "callbacks"]
    one_run("none", 50)  # warm up
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    # Interleaved, and the minimum kept: other load on the machine only ever adds time.
    for _ in range(15):
        for kind in kinds:
            samples[kind].append(one_run(kind, 200))
    base = min(samples["none"])
    for kind in kinds:
        cost = min(samples[kind])
        spread = statistics.median(samples[kind])
        extra = "" if kind == "none" else f"  ({(cost - base) * 1e6:+6.1f} µs/step vs none)"
        print(f"{kind:10} {cost * 1e6:7.1f} µs/step (median {spread * 1e6:7.1f}){extra}")


if __name__ == "__main__":
    main()
