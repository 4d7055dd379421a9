"""YAML from files a model or another user may have written, parsed within bounds.

Framework-internal; needs PyYAML (import this module only once PyYAML is known to be there).
``yaml.safe_load`` builds no objects but plain data, yet a small document can still cost a lot:
an alias bomb (anchors that each repeat the one before twice) of 500 bytes stands for billions
of values once anything walks it, and nesting 50,000 levels deep ends in ``RecursionError``.
:func:`load_bounded` refuses a text longer than its bound, more aliases than its bound, nesting
deeper than its bound, and a document that would hold more values than its bound once its
aliases are expanded (counted on the parsed nodes, before any object is built), each with a
:class:`YAMLBoundError` saying which bound it passed.
"""

from __future__ import annotations

from typing import Any

import attrs
import yaml

__all__ = ["YAMLBoundError", "YAMLBounds", "load_bounded"]


class YAMLBoundError(ValueError):
    """A YAML text past one of its :class:`YAMLBounds`; the message completes "the YAML ..."."""


@attrs.frozen
class YAMLBounds:
    """How much one YAML text may hold.

    Attributes:
        max_chars: characters of text.
        max_aliases: aliases (``*name``, ``<<: *name`` included).
        max_depth: levels of nested collections.
        max_values: values (scalars and collections) once every alias is expanded.
    """

    max_chars: int
    max_aliases: int
    max_depth: int
    max_values: int


class _BoundedLoader(yaml.SafeLoader):
    """``SafeLoader`` counting aliases and nesting as it composes nodes."""

    def __init__(self, text: str, bounds: YAMLBounds) -> None:
        super().__init__(text)
        self.bounds = bounds
        self.aliases = 0
        self.depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > self.bounds.max_aliases:
                raise YAMLBoundError(
                    f"has more than {self.bounds.max_aliases} aliases (*name), as an alias "
                    "bomb does"
                )
        self.depth += 1
        try:
            if self.depth > self.bounds.max_depth:
                raise YAMLBoundError(f"nests deeper than {self.bounds.max_depth} levels")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def load_bounded(text: str, bounds: YAMLBounds) -> Any:
    """``yaml.safe_load(text)``, refused past ``bounds``.

    Raises:
        YAMLBoundError: the text passed one of ``bounds``.
        yaml.YAMLError: the text is not YAML (or holds several documents).
    """
    if len(text) > bounds.max_chars:
        raise YAMLBoundError(f"is longer than {bounds.max_chars:,} characters")
    loader = _BoundedLoader(text, bounds)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expanded(node, bounds.max_values)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_expanded(root: yaml.Node, limit: int) -> None:
    """Refuse a document of more than ``limit`` values once its aliases are expanded.

    An alias shares its anchor's node, so each node's expanded size is counted once
    (memoised); recursion is bounded by the nesting bound already checked.
    """
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # the nodes whose size is being counted (an alias cycle)

    def size(node: yaml.Node) -> int:
        key = id(node)
        known = sizes.get(key)
        if known is not None:
            return known
        if key in open_nodes:
            raise YAMLBoundError("has an alias that refers to itself (a value inside itself)")
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.SequenceNode):
            for item in node.value:
                total += size(item)
                if total > limit:
                    break
        elif isinstance(node, yaml.MappingNode):
            for name, value in node.value:
                total += size(name) + size(value)
                if total > limit:
                    break
        open_nodes.discard(key)
        if total > limit:
            raise YAMLBoundError(
                f"would hold more than {limit:,} values once its aliases are expanded, as an "
                "alias bomb does"
            )
        sizes[key] = total
        return total

    size(root)

