"""The roots an MCP client declares: the directories a server may work in (``roots/list``).

A root is a ``file://`` URI with an optional name. Users give them as URIs, paths or
``{"uri", "name"}`` dicts (the wire shape); they are checked once, here, and kept in the
wire shape the client answers ``roots/list`` with.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterable, Mapping

from agentkit.errors import AgentKitTypeError, AgentKitValueError

__all__ = ["RootLike", "normalize_roots"]

RootLike = str | os.PathLike[str] | Mapping[str, str]
"""A root as users give it: a ``file://`` URI, a path, or ``{"uri": ..., "name": ...}``."""

_MAX_ROOTS = 1000  # a listing the server reads at once: kept to a sane size


def normalize_roots(roots: Iterable[RootLike]) -> tuple[dict[str, str], ...]:
    """The roots in the wire shape (``{"uri"}`` or ``{"uri", "name"}``), in the given order.

    A path becomes the ``file://`` URI of its absolute form; a URI must be a ``file://`` URI
    (the only kind MCP roots may have).

    Raises:
        TypeError: ``roots`` is one string or path, or an item is none of the three forms.
        ValueError: a URI is not a ``file://`` URI, a dict has keys other than ``uri`` and
            ``name``, or there are more than 1000 roots.
    """
    if isinstance(roots, (str, os.PathLike, Mapping)):
        raise AgentKitTypeError(
            f"roots must be a list of roots, not one root (got {roots!r}); wrap it in a list"
        )
    normalized = tuple(_normalize(root) for root in roots)
    if len(normalized) > _MAX_ROOTS:
        raise AgentKitValueError(
            f"at most {_MAX_ROOTS} roots can be declared (got {len(normalized)})"
        )
    return normalized


def _normalize(root: RootLike) -> dict[str, str]:
    if isinstance(root, os.PathLike):
        return {"uri": pathlib.Path(os.fspath(root)).absolute().as_uri()}
    if isinstance(root, str):
        return {"uri": _file_uri(root)}
    if isinstance(root, Mapping):
        extra = sorted(set(root) - {"uri", "name"})
        if extra or "uri" not in root:
            raise AgentKitValueError(
                f"a root dict has the keys 'uri' and (optionally) 'name' (got {dict(root)!r})"
            )
        entry = {"uri": _file_uri(root["uri"])}
        if root.get("name") is not None:
            entry["name"] = str(root["name"])
        return entry
    raise AgentKitTypeError(
        "a root is a file:// URI, a path or a {'uri': ..., 'name': ...} dict "
        f"(got {type(root).__name__}: {root!r})"
    )


def _file_uri(uri: object) -> str:
    if not isinstance(uri, str) or not uri.startswith("file://"):
        raise AgentKitValueError(
            f"a root's URI must be a file:// URI (got {uri!r}); pass a path (a pathlib.Path) "
            "to have it turned into one"
        )
    return uri
