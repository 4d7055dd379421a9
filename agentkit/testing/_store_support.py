"""What the store conformance checks share: factories, fresh ids, clean-up and failing loudly."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import NoReturn

from agentkit.checkpoint._base import CheckPointStore
from agentkit.testing._errors import StoreConformanceError

StoreFactory = Callable[[], CheckPointStore]
"""A zero-argument callable returning the checkpoint store under test."""

StoreCheck = Callable[[StoreFactory], None]
"""One conformance check: it takes a :data:`StoreFactory` and raises on a broken store."""

THREAD_GUARD = 60.0
"""Seconds a check waits for its threads before it reports the store as hanging."""


def fail(message: str) -> NoReturn:
    """Raise :class:`StoreConformanceError` with ``message``."""
    raise StoreConformanceError(message)


def expect(condition: bool, message: str) -> None:
    """Raise :class:`StoreConformanceError` with ``message`` unless ``condition`` holds.

    The replacement for ``assert``: it still checks under ``python -O``.
    """
    if not condition:
        fail(message)


def unique(label: str) -> str:
    """Return a fresh id, so checks can run against a shared, non-empty backend."""
    return f"agentkit-conformance:{label}:{uuid.uuid4().hex}"


@contextmanager
def cleanup(store: CheckPointStore, *ids: str) -> Iterator[None]:
    """Delete ``ids`` from ``store`` when the block ends, however it ends."""
    try:
        yield
    finally:
        for checkpoint_id in ids:
            store.delete(checkpoint_id)


def short(value: object) -> str:
    """Return ``repr(value)``, shortened to fit an error message."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text)} chars)"


def expect_value(
    store: CheckPointStore, checkpoint_id: str, expected: bytes | None, why: str
) -> None:
    """Fail unless ``store.get(checkpoint_id)`` returns exactly ``expected``."""
    got = store.get(checkpoint_id)
    if expected is None:
        expect(got is None, f"{why}: get({checkpoint_id!r}) returned {short(got)}, expected None")
        return
    expect(
        isinstance(got, bytes),
        f"{why}: get({checkpoint_id!r}) returned {type(got).__name__}, expected bytes",
    )
    expect(
        got == expected,
        f"{why}: get({checkpoint_id!r}) returned {short(got)}, expected {short(expected)}",
    )


def run_threads(threads: Iterable[threading.Thread], what: str) -> None:
    """Start ``threads`` and join them, failing if one still runs after :data:`THREAD_GUARD`."""
    started = list(threads)
    for thread in started:
        thread.start()
    join_threads(started, what)


def join_threads(threads: Iterable[threading.Thread], what: str) -> None:
    """Join ``threads``, failing if one still runs after :data:`THREAD_GUARD` seconds."""
    for thread in threads:
        thread.join(THREAD_GUARD)
        expect(
            not thread.is_alive(),
            f"{what}: a thread calling the store did not finish within {THREAD_GUARD:.0f} s "
            "(does a store method block forever, e.g. on a lock it never releases?)",
        )
