"""The thread-leak check that agentkit's own tests wrap around every run."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Protocol

from agentkit._aioloop import loop_thread
from agentkit.testing._errors import ThreadLeakError


class ThreadOwner(Protocol):
    """A long-lived test fixture that starts threads of its own while it serves.

    A :class:`~agentkit.testing.FakeOpenAIServer` is one: it serves every keep-alive
    connection in a thread that lives as long as the connection, which a model's HTTP client
    keeps open between runs.
    """

    def owned_threads(self) -> Collection[threading.Thread]:
        """The threads it runs now; empty once it stopped (it joined them)."""
        ...


_owners: weakref.WeakSet[ThreadOwner] = weakref.WeakSet()
_owners_lock = threading.Lock()


def register_owner(owner: ThreadOwner) -> None:
    """Let :func:`no_thread_leak` tell the threads of ``owner`` from the block's own.

    Called by an owner when it starts serving; it is forgotten when garbage-collected.
    """
    with _owners_lock:
        _owners.add(owner)


def _serving() -> list[ThreadOwner]:
    with _owners_lock:
        return list(_owners)


@contextmanager
def no_thread_leak(timeout: float = 10.0) -> Iterator[None]:
    """Fail if a thread started inside the block is still alive after it.

    Threads get up to ``timeout`` seconds to end (a guard against hangs, not a pace).

    Threads of a :class:`~agentkit.testing.FakeOpenAIServer` that was already serving when
    the block began are the server's, not the block's: a model talking to it over a
    keep-alive connection leaves the server's connection thread alive until the server
    stops, as a real server would. So the check wraps the run, the server wraps the check::

        with FakeOpenAIServer() as server:
            server.queue("Hello!")
            model = OpenAIChatModel("gpt-test", base_url=server.base_url, api_key="sk-test")
            with no_thread_leak():
                Runner(ChatModelAgent("a", "d", model)).invoke("Hi")

    A server started inside the block is checked like everything else: stop it (leave its
    ``with`` block) before the block ends.

    agentkit's event-loop thread (``agentkit-asyncio``, which runs ``async def`` tools and
    MCP connections) is never counted either: it is started once per process, on first use,
    and ends at exit. What runs on it is checked by the code that waits for it.

    Raises:
        ThreadLeakError: naming the threads that outlived the block.
    """
    before = set(threading.enumerate())
    owners = _serving()
    yield
    deadline = time.monotonic() + timeout
    while True:
        theirs: set[threading.Thread | None] = {loop_thread()}
        theirs.update(thread for owner in owners for thread in owner.owned_threads())
        extra = [
            t
            for t in threading.enumerate()
            if t not in before and t not in theirs and t.is_alive()
        ]
        if not extra:
            return
        if time.monotonic() > deadline:
            names = ", ".join(t.name for t in extra)
            raise ThreadLeakError(
                f"{len(extra)} thread(s) started in the block still run {timeout} s after it: "
                f"{names}; join or close what started them before the block ends"
            )
        extra[0].join(0.05)
