"""A loopback OpenAI-compatible Chat Completions server, to test agents over real HTTP.

:class:`FakeOpenAIServer` speaks the real wire format over real HTTP/1.1 on 127.0.0.1: JSON
responses with ``Content-Length``, streamed responses as Server-Sent Events in chunked
transfer encoding (a first delta with the role, content and tool-call arguments in several
deltas, keep-alive comments, a usage chunk with empty ``choices`` when the request asks for
it, ``data: [DONE]``), and keep-alive connections. Replies are scripted with :class:`Reply`,
which can also describe failures: an error status with ``Retry-After``, a delay, a stream
cut after some chunks, a dropped connection or a malformed body.

Example::

    with FakeOpenAIServer() as server:
        server.queue(Reply("Hello!"), Reply(status=429, error="slow down", retry_after=0))
        model = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="sk-test")
        model.generate([user_message("Hi")])
        assert server.requests[0]["messages"] == [{"role": "user", "content": "Hi"}]

``python -m agentkit.testing._openai_server`` serves one fixed reply in its own process (see
:func:`main`); the benchmarks measure the client against it.
"""

from __future__ import annotations

import sys
from typing import Any

from agentkit.testing._fake_http import FakeModelServer, Handler, RequestHandler
from agentkit.testing._openai_replies import (
    Reply,
    completion_body,
    error_body,
    status_error_type,
    stream_events,
)

__all__ = ["FakeOpenAIServer", "Handler"]


class FakeOpenAIServer(FakeModelServer):
    """An OpenAI-compatible server on ``127.0.0.1`` (a free port), serving in a background thread.

    Replies come from ``handler(request_json)`` when one is given, else from the replies
    queued with :meth:`queue`, in order (a ``str`` is an assistant message). A request with
    no reply to give gets HTTP 400 saying so. Use it as a context manager; it stops serving,
    drops open connections and joins its threads on exit.

    Each connection is served in a thread of its own (``FakeOpenAIServer connection N``) that
    lives as long as the client keeps the connection open. These threads are the server's:
    :func:`~agentkit.testing.no_thread_leak` inside the server's ``with`` block does not
    count them (see :meth:`owned_threads`).

    Attributes:
        base_url: ``"http://127.0.0.1:PORT/v1"``.
    """

    _root = "/v1"

    def _serves(self, path: str) -> bool:
        return path == "/v1/chat/completions"

    def _error_payload(self, reply: Reply) -> Any:
        return error_body(reply.error, status_error_type(reply.status))

    def _respond(
        self,
        handler: RequestHandler,
        path: str,
        request: dict[str, Any],
        reply: Reply,
        number: int,
    ) -> None:
        if request.get("stream"):
            handler.send_events(stream_events(request, reply, number), reply)
        else:
            handler.send_body(completion_body(request, reply, number), reply)


def main() -> None:
    """Serve one fixed reply to every request until standard input closes.

    Prints the base URL on the first line of standard output, and the number of TCP
    connections accepted on the last. Benchmarks run the server this way, in its own process.
    """
    import argparse

    parser = argparse.ArgumentParser(
        description=main.__doc__.splitlines()[0] if main.__doc__ else ""
    )
    parser.add_argument("--content", default="It is clear and 21 degrees in Paris today.")
    parser.add_argument("--chunks", type=int, default=4)
    args = parser.parse_args()
    reply = Reply(args.content, chunks=args.chunks)
    with FakeOpenAIServer(handler=lambda request: reply) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()
        connections = server.connections
    print(f"connections: {connections}", flush=True)


if __name__ == "__main__":
    main()
