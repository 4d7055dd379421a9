"""Stable names for the types that checkpoints persist.

A checkpoint outlives the code that wrote it, so what it stores must not depend on where a
class happens to live. Every agentkit type that can appear in a checkpoint is registered here
under a stable name (``"agentkit.Message"``); the checkpoint serializer writes that name, not
the module path, and resolves it back through this registry. Moving a class to another module
keeps its name; renaming a persisted name breaks every stored checkpoint, so names are never
changed or reused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

_T = TypeVar("_T", bound=type)

_by_name: dict[str, type] = {}
_by_type: dict[type, str] = {}


def persisted(name: str) -> Callable[[_T], _T]:
    """Class decorator: register the class under the stable checkpoint ``name``."""

    def register(cls: _T) -> _T:
        register_type(cls, name)
        return cls

    return register


def register_type(cls: type, name: str) -> None:
    """Register ``cls`` under the stable checkpoint ``name`` (each name and class once)."""
    known = _by_name.get(name)
    if known is not None and known is not cls:
        raise RuntimeError(f"persisted name {name!r} is taken by {known!r}")
    other = _by_type.get(cls)
    if other is not None and other != name:
        raise RuntimeError(f"{cls!r} is already persisted as {other!r}")
    _by_name[name] = cls
    _by_type[cls] = name


def persisted_name(cls: type) -> str | None:
    """The stable name of ``cls``, or ``None`` when it is not a persisted type."""
    return _by_type.get(cls)


def persisted_type(name: str) -> type | None:
    """The class registered under ``name``, or ``None``."""
    return _by_name.get(name)


def persisted_names() -> dict[str, type]:
    """Every registered name and its class (a copy)."""
    return dict(_by_name)
