"""The server of ``sse-fanout``: the sample Flask app on werkzeug's threaded WSGI server.

``python -m benchmarks._sse_server MODEL_URL`` serves ``samples/flask_app`` (its routes,
sessions, stream limit and error handling as they are) with runs in threads of this process
(:class:`~agentkit.integrations.runs.LocalRuns`), whose agent is a ``ChatModelAgent`` over
the loopback model server at ``MODEL_URL`` with the :func:`stamp` tool. It prints
``PORT <n>`` once it listens and stops when its stdin closes. ``GET /bench/stats`` answers
the process's RSS, peak RSS and thread count (a route added for the benchmark; the sample's
own code is not changed).
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from agentkit import ChatModelAgent, Runner, tool
from agentkit.integrations.runs import LocalRuns
from agentkit.models import OpenAIChatModel

__all__ = ["STREAMS_PER_CLIENT", "main", "stamp"]

SAMPLES = Path(__file__).resolve().parent.parent / "samples"
#: Streams one session may hold open (the sample's default is 8; each run's followers share one).
STREAMS_PER_CLIENT = 64
WRITE_TIMEOUT = 60.0  # the sample's (samples/flask_app/__main__.py)


@tool
def stamp(a: int, b: int) -> str:
    """Return the time now (seconds since the epoch), so a reader can tell how late it got it."""
    return repr(time.time())


def _stats() -> dict[str, int]:
    values: dict[str, int] = {}
    with open("/proc/self/status") as file:
        for line in file:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM", "Threads"):
                values[name] = int(rest.split()[0])
    return values


def main() -> None:
    """Serve the sample app until stdin closes."""
    from werkzeug.serving import WSGIRequestHandler, make_server

    sys.path.insert(0, str(SAMPLES))
    from flask_app import create_app
    from flask_app.agents import AGENT_NAME

    class RequestHandler(WSGIRequestHandler):
        """Werkzeug's handler with a socket timeout, as ``python -m flask_app`` serves."""

        timeout = WRITE_TIMEOUT

    model = OpenAIChatModel("bench", api_key="sk-bench", base_url=sys.argv[1])
    agent = ChatModelAgent("bench", "a benchmark agent", model, tools=[stamp], max_iterations=50)
    runs = LocalRuns({AGENT_NAME: Runner(agent)})
    app = create_app(runs, secret_key="bench-secret", streams_per_client=STREAMS_PER_CLIENT)
    app.add_url_rule("/bench/stats", "bench_stats", _stats)
    server = make_server(
        "127.0.0.1", 0, app, threaded=True, request_handler=RequestHandler
    )
    print(f"PORT {server.server_port}", flush=True)

    def watch_parent() -> None:
        sys.stdin.read()
        server.shutdown()

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    server.serve_forever(poll_interval=0.2)
    server.server_close()


if __name__ == "__main__":
    main()
