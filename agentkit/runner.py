"""Deprecated module: import its names from :mod:`agentkit`.

The module goes in agentkit 0.4; until then its names still work here, with a
:class:`DeprecationWarning` naming the import to use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach

__all__: list[str] = []

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "Runner": "agentkit.Runner",
        },
    )
