"""Ids that must be unique, not secret: of a turn's execution, a message, a run, a transfer.

:func:`new_id` costs no system call: a random 64-bit prefix drawn once per process (again in
a forked child) and a counter. ``uuid.uuid4()`` reads ``os.urandom`` each time, a system call
that cost ~30 us in a worker thread of a loaded machine (the ``nesting`` benchmark rows,
where every level of every turn made one). Where an id must not be guessable (a nonce, a
token, a run id another party may present), use :mod:`secrets` instead.
"""

from __future__ import annotations

import itertools
import os

__all__ = ["new_id"]

_prefix = ""
_counter = itertools.count()


def _reseed() -> None:
    global _prefix, _counter  # the process's one id source, renewed after fork
    _prefix = os.urandom(8).hex()
    _counter = itertools.count()


_reseed()
os.register_at_fork(after_in_child=_reseed)


def new_id() -> str:
    """Return 32 hex digits no other call of any process returns (as ``uuid4().hex`` does)."""
    return f"{_prefix}{next(_counter):016x}"
