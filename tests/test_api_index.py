"""The public surface is a reviewed list: ``docs/api-names.txt`` names every public name.

A name added to a public module's ``__all__`` without a line in the list fails here, and so
does a line for a name no module exports any more, so the surface grows (and shrinks) only
on purpose.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from tests.test_public_modules import PUBLIC

INDEX = Path(__file__).resolve().parent.parent / "docs" / "api-names.txt"


def _listed() -> set[str]:
    lines = INDEX.read_text(encoding="utf-8").splitlines()
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def _exported() -> set[str]:
    return {
        f"{module}.{name}"
        for module in PUBLIC
        for name in getattr(importlib.import_module(module), "__all__", ())
    }


def test_every_public_name_is_in_the_api_index() -> None:
    missing = sorted(_exported() - _listed())
    assert not missing, (
        f"public names not in docs/api-names.txt: {missing}; a first program's names go at "
        "the top level, the rest in their module: add each line on purpose (or make it private)"
    )


def test_the_api_index_names_only_what_is_exported() -> None:
    stale = sorted(_listed() - _exported())
    assert not stale, f"docs/api-names.txt lists names no module exports: {stale}"


def test_the_index_is_sorted_and_has_no_duplicates() -> None:
    lines = [line for line in INDEX.read_text(encoding="utf-8").splitlines() if line[:1] != "#"]
    assert lines == sorted(set(lines))
