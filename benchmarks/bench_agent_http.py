"""Framework cost per ReAct step beyond the HTTP round trip, end to end.

Run: ``python benchmarks/bench_agent_http.py [--steps N]``

A ``ChatModelAgent`` with one tool runs N steps (model asks for the tool, tool runs, repeat)
through ``OpenAIChatModel`` over an ``httpx.MockTransport`` that answers with the real wire
format (JSON, or SSE for streaming). Then the very request bodies the agent sent are posted
again with a raw httpx client over the same transport and the same answers are read raw:
that is the HTTP round trip without agentkit. The difference per step is agentkit's cost:
building the request, parsing the reply, running the tool, naming/recording/delivering the
events. It is shown for early and late steps, so growth with the history shows.
(MockTransport keeps socket and server noise out; ``bench_openai_client.py`` measures the
client over real loopback HTTP.)
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agentkit import ChatModelAgent, Runner, tool  # noqa: E402
from agentkit.models import OpenAIChatModel  # noqa: E402


@tool
def lookup(n: int) -> str:
    """Look up item n."""
    return f"item {n}: ok"


def completion(step: int, final: bool) -> bytes:
    if final:
        message: dict[str, Any] = {"role": "assistant", "content": "all done"}
        finish = "stop"
    else:
        call = {
            "id": f"c{step}",
            "type": "function",
            "function": {"name": "lookup", "arguments": json.dumps({"n": step})},
        }
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }
    ).encode()


def sse(step: int, final: bool) -> bytes:
    def event(delta: dict[str, object], finish: str | None = None) -> bytes:
        chunk = {
            "id": "x",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    parts = [event({"role": "assistant", "content": ""})]
    if final:
        parts += [event({"content": "all "}), event({"content": "done"}), event({}, "stop")]
    else:
        args = json.dumps({"n": step})
        parts += [
            event(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": f"c{step}",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": ""},
                        }
                    ]
                }
            ),
            event({"tool_calls": [{"index": 0, "function": {"arguments": args[:4]}}]}),
            event({"tool_calls": [{"index": 0, "function": {"arguments": args[4:]}}]}),
            event({}, "tool_calls"),
        ]
    usage = {
        "id": "x",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    parts.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


class Server:
    """Answers step k with a tool call (final answer after N steps); records the bodies."""

    def __init__(self, steps: int, streaming: bool) -> None:
        self.steps = steps
        self.streaming = streaming
        self.count = 0
        self.bodies: list[bytes] = []
        self.arrivals: list[float] = []
        self.replies = [(sse if streaming else completion)(k, k == steps) for k in range(steps + 1)]

    def agent_handler(self, request: httpx.Request) -> httpx.Response:
        self.arrivals.append(time.perf_counter())
        self.bodies.append(request.content)
        reply = self.replies[self.count]
        self.count += 1
        return self._response(reply)

    def _response(self, reply: bytes) -> httpx.Response:
        if self.streaming:
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=reply)
        return httpx.Response(200, headers={"content-type": "application/json"}, content=reply)


def run_agent(steps: int, streaming: bool) -> tuple[list[float], Server]:
    server = Server(steps, streaming)
    client = httpx.Client(transport=httpx.MockTransport(server.agent_handler))
    model = OpenAIChatModel("m", api_key="k", base_url="http://bench/v1", http_client=client)
    agent = ChatModelAgent("bench", "d", model, tools=[lookup], max_iterations=steps + 2)
    for event in Runner(agent, enable_streaming=streaming).query("go"):
        if event.err is not None:
            raise event.err
    client.close()
    # One step = from one model request to the next, as the transport sees them.
    stamps = server.arrivals
    return [b - a for a, b in itertools.pairwise(stamps)], server


def run_raw(server: Server) -> list[float]:
    replies = iter(server.replies)
    client = httpx.Client(
        transport=httpx.MockTransport(lambda request: server._response(next(replies)))
    )
    headers = {"content-type": "application/json", "authorization": "Bearer k"}
    times = []
    for body in server.bodies:
        started = time.perf_counter()
        if server.streaming:
            with client.stream(
                "POST", "http://bench/v1/chat/completions", content=body, headers=headers
            ) as response:
                for _ in response.iter_lines():
                    pass
        else:
            client.post("http://bench/v1/chat/completions", content=body, headers=headers).json()
        times.append(time.perf_counter() - started)
    client.close()
    return times[:-1]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    header = f"{'mode':14} {'steps':>6} {'agent step':>11} {'raw HTTP':>9} {'agentkit':>9}"
    print(header + "  (median ms)")
    for streaming in (False, True):
        for window, label in ((slice(0, 10), "first 10"), (slice(-10, None), "last 10")):
            agent_times: list[float] = []
            raw_times: list[float] = []
            for _ in range(args.repeats):
                steps, server = run_agent(args.steps, streaming)
                agent_times += steps[window]
                raw_times += run_raw(server)[window]
            agent = statistics.median(agent_times) * 1e3
            raw = statistics.median(raw_times) * 1e3
            mode = "streaming" if streaming else "non-streaming"
            print(f"{mode:14} {label:>6} {agent:11.3f} {raw:9.3f} {agent - raw:9.3f}")


if __name__ == "__main__":
    main()
