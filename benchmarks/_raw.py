"""The baseline: a minimal hand-written ReAct loop on ``httpx.Client`` (the physical limit).

It does only what any agent loop must do: post the history and the tool schemas, read the
reply (JSON, or Server-Sent Events merged by tool-call index), run the requested tools
(in a thread pool when a reply asks for several), append the results, repeat. No events, no
validation beyond ``json.loads``, no retries. Imports nothing but httpx and the stdlib, so a
process running it pays only for those.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

__all__ = ["RAW_TOOLS", "TOOL_SCHEMAS", "Paused", "RawLoop", "save_state", "stamps"]

#: perf_counter() at every tool call of the current run (both sides append to it).
stamps: list[float] = []


def add(a: int, b: int) -> int:
    """Add two integers."""
    stamps.append(time.perf_counter())
    return a + b


def mul(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def sub(a: int, b: int) -> int:
    """Subtract b from a."""
    return a - b


def slow_add(a: int, b: int) -> int:
    """Add two integers, slowly (200 ms)."""
    time.sleep(0.2)
    return a + b


def approve(a: int, b: int) -> str:
    """Ask a human to approve step a (the raw loop pauses before it runs)."""
    return "approved"


RAW_TOOLS: dict[str, Callable[..., object]] = {
    "add": add,
    "mul": mul,
    "sub": sub,
    "slow_add": slow_add,
    "approve": approve,
}

_INT_PAIR = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}
TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    name: {
        "type": "function",
        "function": {"name": name, "description": function.__doc__ or "", "parameters": _INT_PAIR},
    }
    for name, function in RAW_TOOLS.items()
}


class Paused(Exception):
    """The raw loop stopped at a tool that needs approval; its state is in ``path``."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class RawLoop:
    """A ReAct loop over one shared ``httpx.Client``; thread-safe like the client."""

    def __init__(
        self,
        base_url: str,
        tools: tuple[str, ...],
        *,
        stream: bool = False,
        limits: httpx.Limits | None = None,
    ) -> None:
        self.url = base_url + "/chat/completions"
        self.client = httpx.Client(
            headers={"authorization": "Bearer sk-bench"},
            timeout=60.0,
            limits=limits or httpx.Limits(),
        )
        self.tools = [TOOL_SCHEMAS[name] for name in tools]
        self.stream = stream
        self.pool = ThreadPoolExecutor(max_workers=16)
        #: Called with every model reply (the ``decompose`` scenario hands them to a thread).
        self.on_message: Callable[[dict[str, Any]], object] | None = None
        #: Called with every tool result message (``celery-throughput`` XADDs them).
        self.on_tool_result: Callable[[dict[str, Any]], object] | None = None

    def close(self) -> None:
        """Release the client and the tool pool."""
        self.client.close()
        self.pool.shutdown()

    def run(self, prompt: str, *, pause_at: str = "", state_dir: str = "") -> str:
        """Run the loop on one user message; returns the final answer text."""
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        return self._loop(messages, pause_at, state_dir)

    def resume(self, path: str, approved: bool) -> str:
        """Continue a loop paused by ``pause_at`` from the state file at ``path``."""
        with open(path, "rb") as file:
            messages = json.loads(file.read())
        call = messages[-1]["tool_calls"][0]
        result = "approved" if approved else "rejected"
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": result})
        return self._loop(messages, "", "")

    def _loop(self, messages: list[dict[str, Any]], pause_at: str, state_dir: str) -> str:
        while True:
            body: dict[str, Any] = {"model": "bench", "messages": messages, "tools": self.tools}
            message = self._stream(body) if self.stream else self._post(body)
            messages.append(message)
            if self.on_message is not None:
                self.on_message(message)
            calls = message.get("tool_calls") or []
            if not calls:
                return str(message.get("content") or "")
            if pause_at and calls[0]["function"]["name"] == pause_at:
                raise Paused(save_state(state_dir, messages))
            if len(calls) == 1:
                results = [_run_tool(calls[0])]
            else:
                results = list(self.pool.map(_run_tool, calls))
            for call, result in zip(calls, results, strict=True):
                tool_message = {"role": "tool", "tool_call_id": call["id"], "content": result}
                messages.append(tool_message)
                if self.on_tool_result is not None:
                    self.on_tool_result(tool_message)

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post(self.url, json=body)
        response.raise_for_status()
        message: dict[str, Any] = response.json()["choices"][0]["message"]
        return message

    def _stream(self, body: dict[str, Any]) -> dict[str, Any]:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
        content: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        with self.client.stream("POST", self.url, json=body) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                for choice in chunk["choices"]:
                    delta = choice["delta"]
                    if delta.get("content"):
                        content.append(delta["content"])
                    for fragment in delta.get("tool_calls") or ():
                        call = calls.setdefault(
                            fragment["index"],
                            {
                                "id": "",
                                "type": "function",
                                "function": {"name": "", "arguments": ""},
                            },
                        )
                        call["id"] = fragment.get("id") or call["id"]
                        function = fragment.get("function") or {}
                        call["function"]["name"] += function.get("name") or ""
                        call["function"]["arguments"] += function.get("arguments") or ""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(content)}
        if calls:
            message["tool_calls"] = [calls[index] for index in sorted(calls)]
        return message


def _run_tool(call: dict[str, Any]) -> str:
    function = call["function"]
    return str(RAW_TOOLS[function["name"]](**json.loads(function["arguments"])))


def save_state(directory: str, messages: list[dict[str, Any]]) -> str:
    """Write the history atomically and durably (as the file checkpoint store does)."""
    path = os.path.join(directory, "raw-state.json")
    fd, temporary = tempfile.mkstemp(dir=directory)
    with os.fdopen(fd, "wb") as file:
        file.write(json.dumps(messages).encode())
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    return path
