"""Framework cost per call of OpenAIChatModel, against a raw httpx baseline.

Run: ``python benchmarks/bench_openai_client.py [--calls N]``

A loopback ``agentkit.testing.FakeOpenAIServer``, run in its own process so that it does
not compete with the client for the GIL, answers every request. For each history
length, the benchmark times calls to ``OpenAIChatModel.generate`` / ``stream`` (read to the
end) and calls that post the very same request bytes with the same httpx client and read
the response raw. The framework cost is the difference of the medians: encoding the request,
retries bookkeeping, parsing the JSON or the SSE stream into messages. The two kinds of call
alternate one by one, so that drift in the machine's speed hits both alike.

The history is the steady state of an agent loop: the same messages are sent again on every
call (their encoded form is cached), as when a conversation is replayed to the model.

A second table repeats the measurement in process, over an ``httpx.MockTransport`` that replays
the server's bytes: without network and server scheduling noise it shows the framework's own
CPU cost per call most steadily.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from agentkit.models import OpenAIChatModel  # noqa: E402
from agentkit.schema import (  # noqa: E402
    FunctionCall,
    Message,
    ToolCall,
    ToolInfo,
    assistant_message,
    system_message,
    tool_message,
    user_message,
)

HISTORY_LENGTHS = (2, 50, 200)
TOOLS = [
    ToolInfo(
        "get_weather",
        "Return the weather in a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    )
]


def make_history(length: int) -> list[Message]:
    """Return a realistic conversation of ``length`` messages (system, user, tool rounds)."""
    history = [system_message("You are a helpful assistant. " * 4)]
    turn = 0
    while len(history) < length:
        turn += 1
        history.append(user_message(f"What is the weather in city number {turn}? " * 3))
        history.append(
            assistant_message(
                "",
                [ToolCall(f"call_{turn}", FunctionCall("get_weather", f'{{"city": "c{turn}"}}'))],
            )
        )
        history.append(
            tool_message(f'{{"city": "c{turn}", "sky": "clear", "t": 21}}', f"call_{turn}")
        )
        history.append(assistant_message(f"It is clear and 21 degrees in city {turn}. " * 2))
    return history[:length]


def measure(
    framework: Callable[[], object], baseline: Callable[[], object], calls: int
) -> tuple[float, float]:
    """Return the median call time of ``framework`` and ``baseline`` in ms.

    Calls alternate one by one, so that drift in the machine's speed hits both alike.
    """
    framework_times: list[float] = []
    baseline_times: list[float] = []
    clock = time.perf_counter
    for _ in range(5):  # warm up: connections, caches
        framework()
        baseline()
    for _ in range(calls):
        start = clock()
        baseline()
        middle = clock()
        framework()
        end = clock()
        baseline_times.append(middle - start)
        framework_times.append(end - middle)
    return statistics.median(framework_times) * 1e3, statistics.median(baseline_times) * 1e3


Row = tuple[str, int, int, float, float]
HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json",
    "Authorization": "Bearer sk-bench",
}


def bench(model: OpenAIChatModel, client: httpx.Client, url: str, calls: int) -> list[Row]:
    """Return ``(kind, history length, body size, total ms, raw ms)`` rows."""
    rows = []
    for length in HISTORY_LENGTHS:
        history = make_history(length)
        plain_body = model._body(history, None, stream=False)
        stream_body = model._body(history, None, stream=True)

        def raw_generate(body: bytes = plain_body) -> bytes:
            return client.post(url, content=body, headers=HEADERS).content

        def raw_stream(body: bytes = stream_body) -> None:
            with client.stream("POST", url, content=body, headers=HEADERS) as response:
                for _ in response.iter_bytes():
                    pass

        def generate(history: list[Message] = history) -> Message:
            return model.generate(history)

        def stream(history: list[Message] = history) -> None:
            for _ in model.stream(history):
                pass

        gc.collect()
        gc.freeze()  # the history is long-lived: keep it out of the collector's way
        for kind, framework, baseline in (
            ("generate", generate, raw_generate),
            ("stream", stream, raw_stream),
        ):
            total, raw = measure(framework, baseline, calls)
            rows.append((kind, length, len(plain_body), total, raw))
    return rows


def replaying_transport(url: str) -> httpx.MockTransport:
    """Return a transport that replays what the server at ``url`` answers, byte for byte.

    Streamed bodies keep the pieces in which they arrived.
    """
    history = make_history(2)
    model = OpenAIChatModel("bench-model", base_url="http://unused/v1")
    with httpx.Client() as client:
        plain = client.post(url, content=model._body(history, None, stream=False)).content
        with client.stream("POST", url, content=model._body(history, None, stream=True)) as r:
            pieces = list(r.iter_bytes())
    model.close()

    def handler(request: httpx.Request) -> httpx.Response:
        request.read()
        if b'"stream":true' in request.content:
            headers = {"content-type": "text/event-stream"}
            return httpx.Response(200, headers=headers, content=iter(pieces))
        return httpx.Response(200, headers={"content-type": "application/json"}, content=plain)

    return httpx.MockTransport(handler)


def print_table(title: str, rows: list[Row]) -> None:
    """Print rows with the framework cost (total minus raw) per call."""
    print(title)
    print(f"{'call':<9} {'history':>7} {'body KB':>8} {'total ms':>9} {'raw ms':>8} {'cost ms':>8}")
    for kind, length, size, total, raw in rows:
        print(
            f"{kind:<9} {length:>7} {size / 1024:>8.1f} {total:>9.3f} {raw:>8.3f} "
            f"{total - raw:>8.3f}"
        )


def main() -> None:
    """Run the benchmark and print the tables of per-call costs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000, help="calls of each kind")
    args = parser.parse_args()

    server = subprocess.Popen(
        [sys.executable, "-m", "agentkit.testing._openai_server"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        base_url = server.stdout.readline().strip()
        url = base_url + "/chat/completions"
        with (
            httpx.Client() as client,
            OpenAIChatModel("bench-model", base_url=base_url, api_key="sk-bench") as model,
        ):
            http_rows = bench(model.with_tools(TOOLS), client, url, args.calls)  # type: ignore[arg-type]
        transport = replaying_transport(url)
    finally:
        server.stdin.close()
        connections = server.stdout.read().strip()
        server.wait(timeout=30)

    with (
        httpx.Client(transport=transport) as client,
        OpenAIChatModel(
            "bench-model",
            base_url=base_url,
            http_client=httpx.Client(transport=transport, headers=HEADERS),
        ) as model,
    ):
        cpu_rows = bench(model.with_tools(TOOLS), client, url, args.calls)  # type: ignore[arg-type]

    print_table("Loopback HTTP (FakeOpenAIServer in its own process)", http_rows)
    print(f"(median of {args.calls} calls each; server {connections})")
    print()
    print_table("In process (httpx.MockTransport replaying the same bytes; no network)", cpu_rows)


if __name__ == "__main__":
    main()
