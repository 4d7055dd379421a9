"""The measured side: agentkit's ``Runner`` + ``ChatModelAgent`` + ``OpenAIChatModel`` + tools.

Everything here is built through agentkit's public API, the way a user would write it. The
tools wrap the very functions the raw loop calls (``benchmarks._raw``), so both sides do the
same tool work. :func:`with_unused_extensions` is the hook for the "extension points cost
nothing when unused" scenario.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from agentkit import (
    AgentEvent,
    AgentMiddleware,
    AgentRunOption,
    AgentTool,
    BaseTool,
    ChatModelAgent,
    LoopAgent,
    Message,
    Role,
    Runner,
    SequentialAgent,
    assistant_message,
    interrupt,
    set_sub_agents,
    tool,
    with_callbacks,
)
from agentkit.models import OpenAIChatModel
from agentkit.schema import FunctionCall, ToolCall
from benchmarks import _raw

__all__ = [
    "AK_TOOLS",
    "AgentkitLoop",
    "NESTING_KINDS",
    "InstantModel",
    "build_nested",
    "drain",
    "read_event",
    "with_unused_extensions",
]


@tool
def approve(a: int, b: int) -> str:
    """Ask a human to approve step a."""
    return "approved" if interrupt(f"approve step {a}?") else "rejected"


AK_TOOLS: dict[str, BaseTool] = {
    name: tool(function) for name, function in _raw.RAW_TOOLS.items() if name != "approve"
}
AK_TOOLS["approve"] = approve


class _AgentsOnlyHandler:
    """A callback handler that observes agent turns only (no model or tool callbacks)."""

    def on_agent_start(self, info: Any, input: Any) -> None:
        """Ignore the turn."""

    def on_agent_end(self, info: Any, error: BaseException | None) -> None:
        """Ignore the turn."""


def with_unused_extensions(
    agent_kwargs: dict[str, Any], run_options: list[AgentRunOption]
) -> tuple[dict[str, Any], list[AgentRunOption]]:
    """Return the agent keywords and run options of an agent whose extension points do nothing.

    The hook of the ``extensions-noop`` row: a middleware whose hooks are all the base class's
    no-ops, and a callback handler that observes agent turns only (so nothing per model or tool
    call). The row compares that agent with the plain one; ``extensions-unused`` (no
    middleware, no callbacks) is shown by counting the calls into extension code instead
    (``benchmarks._inproc.EXTENSION_FILES``).
    """
    kwargs = dict(agent_kwargs)
    kwargs["middlewares"] = [AgentMiddleware()]
    return kwargs, [*run_options, with_callbacks(_AgentsOnlyHandler())]


def read_event(event: AgentEvent) -> None:
    """Read one event the way a live display would (its message stream to the end)."""
    if event.err is not None:
        raise event.err
    output = event.output
    if output is not None and output.message_output is not None:
        output.message_output.get_message()


def drain(events: Any) -> list[AgentEvent]:
    """Consume a run's events (reading every message stream to its end); raise its error."""
    seen: list[AgentEvent] = []
    for event in events:
        read_event(event)
        seen.append(event)
    return seen


class AgentkitLoop:
    """One agent over the loopback server, run once per :meth:`run` through one Runner."""

    def __init__(
        self,
        base_url: str,
        tools: Sequence[str],
        *,
        steps: int,
        stream: bool = False,
        extensions: bool = False,
        checkpoint_store: Any = None,
        limits: httpx.Limits | None = None,
        durability: str = "step",
    ) -> None:
        # With ``limits``, the model gets an httpx client of those limits (which this loop
        # closes), as the raw loop does; otherwise the model's own client.
        self.http = None if limits is None else httpx.Client(limits=limits, timeout=60.0)
        self.model = OpenAIChatModel(
            "bench", api_key="sk-bench", base_url=base_url, http_client=self.http
        )
        kwargs: dict[str, Any] = {
            "tools": [AK_TOOLS[name] for name in tools],
            "max_iterations": steps + 2,
        }
        self.options: list[AgentRunOption] = []
        if extensions:
            kwargs, self.options = with_unused_extensions(kwargs, self.options)
        agent = ChatModelAgent("bench", "a benchmark agent", self.model, **kwargs)
        self.runner = Runner(
            agent, enable_streaming=stream, checkpoint_store=checkpoint_store,
            durability=durability,
        )

    def run(self, prompt: str, *options: AgentRunOption) -> list[AgentEvent]:
        """Run the agent on ``prompt`` to its end, reading its events live; returns them."""
        return drain(self.runner.query(prompt, *self.options, *options))

    def invoke(self, prompt: str, *options: AgentRunOption) -> str:
        """Run the agent on ``prompt`` with ``Runner.invoke`` (no live events); the answer."""
        return self.runner.invoke(prompt, *self.options, *options).text

    def on_event(self, prompt: str, *options: AgentRunOption) -> str:
        """Run the agent with ``Runner.invoke``, reading each event live with ``on_event``."""
        return self.runner.invoke(prompt, *self.options, *options, on_event=read_event).text

    def close(self) -> None:
        """Close the model's HTTP client."""
        self.model.close()
        if self.http is not None:
            self.http.close()


class InstantModel:
    """A tool-calling model that answers in-process at once, from a function of the history.

    Used where HTTP noise would drown what is measured (the nesting levels). Unlike
    ``ScriptedChatModel`` it keeps no call log, so repeated runs do not grow its memory.
    """

    def __init__(self, policy: Callable[[list[Message]], Message]) -> None:
        self.policy = policy

    def with_tools(self, tools: Sequence[Any]) -> InstantModel:
        """Return this model (the policy knows its tools)."""
        return self

    def generate(self, messages: Sequence[Message], options: Any = None) -> Message:
        """Answer from the policy."""
        return self.policy(list(messages))

    def stream(self, messages: Sequence[Message], options: Any = None) -> Any:
        """Answer from the policy, as a one-chunk stream."""
        from agentkit import stream_from_list

        return stream_from_list([self.policy(list(messages))])


def _calls(name: str, arguments: str, call_id: str) -> Message:
    return assistant_message("", [ToolCall(call_id, FunctionCall(name, arguments))])


def _leaf_policy(messages: list[Message]) -> Message:
    last = messages[-1]
    if last.role == Role.TOOL and last.tool_call_id == "leaf_call":
        return assistant_message(f"the answer is {last.content}")
    return _calls("add", '{"a": 40, "b": 2}', "leaf_call")


def _leaf() -> ChatModelAgent:
    return ChatModelAgent("leaf", "answers", InstantModel(_leaf_policy), tools=[AK_TOOLS["add"]])


def _transfer_parent(level: int, child: Any) -> Any:
    arguments = json.dumps({"agent_name": child.name})

    def policy(messages: list[Message]) -> Message:
        return _calls("transfer_to_agent", arguments, f"transfer_{level}")

    parent = ChatModelAgent(f"transfer{level}", "routes", InstantModel(policy))
    return set_sub_agents(parent, [child])


def _agent_tool_parent(level: int, child: Any) -> ChatModelAgent:
    call_id = f"tool_call_{level}"

    def policy(messages: list[Message]) -> Message:
        last = messages[-1]
        if last.role == Role.TOOL and last.tool_call_id == call_id:
            return assistant_message(last.content)
        return _calls(child.name, '{"request": "go"}', call_id)

    return ChatModelAgent(
        f"tool{level}", "delegates", InstantModel(policy), tools=[AgentTool(child)]
    )


NESTING_KINDS = ("sequential", "loop", "transfer", "agent_tool")


def build_nested(kind: str, depth: int) -> Runner:
    """Return a Runner of the leaf agent wrapped in ``depth`` levels of ``kind``."""
    agent: Any = _leaf()
    for level in range(depth):
        if kind == "sequential":
            agent = SequentialAgent(f"seq{level}", "wraps", [agent])
        elif kind == "loop":
            agent = LoopAgent(f"loop{level}", "wraps", [agent], max_iterations=1)
        elif kind == "transfer":
            agent = _transfer_parent(level, agent)
        elif kind == "agent_tool":
            agent = _agent_tool_parent(level, agent)
        else:
            raise ValueError(f"unknown nesting kind {kind!r}; use one of {NESTING_KINDS}")
    return Runner(agent)
