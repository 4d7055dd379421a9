"""The thread-leak check that agentkit's own tests wrap around every run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from agentkit.testing._errors import ThreadLeakError


@contextmanager
def no_thread_leak(timeout: float = 10.0) -> Iterator[None]:
    """Fail if a thread started inside the block is still alive after it.

    Threads get up to ``timeout`` seconds to end (a guard against hangs, not a pace).

    Raises:
        ThreadLeakError: naming the threads that outlived the block.
    """
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + timeout
    while True:
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not extra:
            return
        if time.monotonic() > deadline:
            names = ", ".join(t.name for t in extra)
            raise ThreadLeakError(
                f"{len(extra)} thread(s) started in the block still run {timeout} s after it: "
                f"{names}; join or close what started them before the block ends"
            )
        extra[0].join(0.05)
