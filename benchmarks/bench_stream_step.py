"""CPU cost of a streamed model step over a non-streamed one, on the client side (issue 19).

Run: ``python benchmarks/bench_stream_step.py [--steps N] [--repeats R]``

In process, over an ``httpx.MockTransport`` that replays the bytes the benchmark server sends
for one tool-calling step (role, tool-call head, two argument fragments, finish, usage and
``[DONE]``: six chunks), so no network or server scheduling noise is in the figures. A
streamed step does what a streamed ReAct step does with the stream: ``stream()``, two copies
(history and user), one more copy of the user's (the flow's history record), the history's
``concat_message_stream`` and the user's ``get_message``-style concatenation of a copy. A
non-streamed step is one ``generate()``. Prints the best of ``repeats`` CPU times per step of
each and their difference: the per-chunk path's cost (parsing, chunk messages, the tee
buffer, the merge).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from agentkit import concat_message_stream, user_message  # noqa: E402
from agentkit.models import OpenAIChatModel  # noqa: E402
from benchmarks._server import _completion, _sse  # noqa: E402

_CALLS = [
    {
        "id": "call_1",
        "type": "function",
        "function": {"name": "add", "arguments": json.dumps({"a": 1, "b": 0})},
    }
]


def _model() -> OpenAIChatModel:
    streamed, whole = _sse("", _CALLS), _completion("", _CALLS)

    def handler(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=streamed
            )
        return httpx.Response(200, headers={"content-type": "application/json"}, content=whole)

    client = httpx.Client(transport=httpx.MockTransport(handler))
    return OpenAIChatModel(
        "bench", api_key="k", base_url="http://bench.test/v1", http_client=client
    )


def _cpu_per_step(step: Callable[[], object], steps: int) -> float:
    started = time.process_time()
    for _ in range(steps):
        step()
    return (time.process_time() - started) / steps * 1e6


def main() -> None:
    """Print the CPU microseconds per streamed and per non-streamed step."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    model = _model()
    messages = [user_message("go")]

    def streamed() -> None:
        history, user = model.stream(messages).copy(2)
        user, recorded = user.copy(2)
        reply = concat_message_stream(history)
        kept, read = user.copy(2)
        assert concat_message_stream(read) is reply
        for reader in (recorded, kept):
            reader.close()

    def whole() -> None:
        model.generate(messages)

    for step in (streamed, whole):
        _cpu_per_step(step, max(1, args.steps // 5))  # warm up
    best_streamed = best_whole = float("inf")
    for _ in range(args.repeats):  # interleaved, so drift in the machine's speed hits both
        best_streamed = min(best_streamed, _cpu_per_step(streamed, args.steps))
        best_whole = min(best_whole, _cpu_per_step(whole, args.steps))
    print(
        f"CPU per step, best of {args.repeats} x {args.steps}: streamed {best_streamed:.1f} us, "
        f"non-streamed {best_whole:.1f} us, streaming costs {best_streamed - best_whole:.1f} us"
    )
    model.close()


if __name__ == "__main__":
    main()
