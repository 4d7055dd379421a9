"""The public surface shrinks on purpose: one import path per object, old paths deprecated.

An object is *exported* by a public module when its name is in the module's ``__all__``.
:func:`measure` counts the top-level names, the public modules and the objects exported
under more than one path; ``python -m tests.test_surface`` prints them (and, with ``-v``, every
object still exported twice). A path that moved answers with a :class:`DeprecationWarning`
naming the canonical import for one release (``agentkit._lazy.DEPRECATED`` lists them); the
docs, the README and the samples use none of them, and agentkit's own imports never warn.
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
import types
import warnings
from collections import defaultdict
from pathlib import Path

import attrs
import pytest

from tests.test_public_modules import PUBLIC

REPO = Path(__file__).resolve().parent.parent

#: Objects exported under more than one path when this count was last lowered; a change that
#: adds a second path to an object fails here (lower it when you remove one). Issue 46 found
#: 193 (and 176 top-level names, 77 public modules). Raised once, to 163, by two names that
#: arrived beside siblings exported the same two ways (``delete_run_local_value`` beside
#: ``get_run_local_value``, ``agentkit.checkpoint.ListingCheckPointStore`` beside
#: ``CheckPointStore``): those families go to one path together, not one name at a time.
MULTI_PATH_CEILING = 163


@attrs.frozen
class Surface:
    """What :func:`measure` counts."""

    top_level_names: int
    public_modules: int
    multi_path: dict[str, tuple[str, ...]]  # canonical-looking first path -> every path


def measure() -> Surface:
    """Count the public surface (imports every public module)."""
    paths: dict[int, list[str]] = defaultdict(list)
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            # a constant or a module is not an object with an import path of its own
            if isinstance(value, (str, bytes, int, float, tuple, frozenset, types.ModuleType)):
                continue
            paths[id(value)].append(f"{module_name}.{name}")
    import agentkit

    return Surface(
        top_level_names=len(agentkit.__all__),
        public_modules=len(PUBLIC),
        multi_path={found[0]: tuple(found) for found in paths.values() if len(found) > 1},
    )


def _deprecated() -> dict[str, str]:
    for module_name in PUBLIC:
        importlib.import_module(module_name)
    from agentkit._lazy import DEPRECATED

    return dict(DEPRECATED)


def test_the_multi_path_count_only_goes_down() -> None:
    surface = measure()
    assert len(surface.multi_path) <= MULTI_PATH_CEILING, sorted(surface.multi_path.values())


def test_the_issue_example_has_one_exported_path_and_the_old_one_warns() -> None:
    import agentkit
    import agentkit.tools

    exported = [
        f"{module}.{name}"
        for module in PUBLIC
        for name in importlib.import_module(module).__all__
        if getattr(importlib.import_module(module), name) is agentkit.tool
    ]
    assert exported == ["agentkit.tool"]  # was also agentkit.tools.tool, .tools.function.tool
    with pytest.warns(DeprecationWarning) as caught:
        from agentkit.tools import tool  # type: ignore[attr-defined]  # the old spelling is the test
    assert tool is agentkit.tool
    message = str(caught[0].message)
    assert "agentkit.tools.tool is deprecated" in message
    assert "from agentkit import tool" in message and "0.4" in message
    assert caught[0].filename == __file__  # the warning points at the user's import


@pytest.mark.parametrize("old", sorted(_deprecated()))
def test_every_deprecated_path_warns_and_is_the_canonical_object(old: str) -> None:
    canonical = _deprecated()[old]
    package, _, name = old.rpartition(".")
    home, _, attribute = canonical.rpartition(".")
    module = importlib.import_module(package)
    assert name not in module.__all__ and name not in dir(module)
    with pytest.warns(DeprecationWarning, match=re.escape(f"use {canonical}")):
        value = getattr(module, name)
    assert value is getattr(importlib.import_module(home), attribute)
    # the canonical path itself is quiet
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        getattr(importlib.import_module(home), attribute)


def test_agentkit_never_imports_a_deprecated_path_itself() -> None:
    code = (
        "import importlib\n"
        f"for name in {PUBLIC!r}:\n"
        "    importlib.import_module(name)\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def _imported_names(source: str) -> set[str]:
    """``package.name`` for every ``from package import name`` in ``source`` (Python code)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {
        f"{node.module}.{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


_CODE_BLOCK = re.compile(r"```python\n(.*?)```|<!-- doctest: setup\n(.*?)-->", re.S)


def test_docs_readme_and_samples_use_only_canonical_spellings() -> None:
    deprecated = _deprecated()
    assert deprecated, "nothing is deprecated: this test checks nothing"
    files = [
        *sorted((REPO / "docs").rglob("*.md")),
        *sorted((REPO / "docs").rglob("*.rst")),
        REPO / "README.md",
        *sorted((REPO / "samples").rglob("*.py")),
    ]
    found = []
    for path in files:
        if "_build" in path.parts or path.parent == REPO / "docs" / "api":
            continue  # built or generated from __all__ (which holds no deprecated name)
        text = path.read_text(encoding="utf-8")
        sources = [text] if path.suffix == ".py" else [
            block for match in _CODE_BLOCK.finditer(text) for block in match.groups() if block
        ]
        names = set().union(*(_imported_names(source) for source in sources))
        for old in deprecated:
            if old in names or re.search(rf"(?<![\w.]){re.escape(old)}(?!\w)", text):
                found.append(f"{path.relative_to(REPO)}: {old} (use {deprecated[old]})")
    assert not found, found


def _main() -> None:
    surface = measure()
    print(f"top-level names: {surface.top_level_names}")
    deprecated = _deprecated()
    shims = sorted(
        name
        for name in PUBLIC
        if not importlib.import_module(name).__all__
        and any(path.rpartition(".")[0] == name for path in deprecated)
    )
    print(f"public modules: {surface.public_modules} ({len(shims)} of them only deprecated names)")
    print(f"objects exported under more than one path: {len(surface.multi_path)}")
    print(f"deprecated paths: {len(deprecated)}")
    if "-v" in sys.argv:
        for found in sorted(surface.multi_path.values()):
            print("  " + " | ".join(found))


if __name__ == "__main__":
    _main()
