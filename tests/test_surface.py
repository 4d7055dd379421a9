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

#: What API.md binds under more than one path: ``(the API.md section, the modules, the names)``.
#: API.md: "Everything below is importable from ``agentkit`` unless another module is named";
#: sections 1-3 name a module "re-exported" (both paths bound; the module is re-exported whole,
#: so ``stream_from_iterator`` too); section 8 names ``agentkit.models`` and says the model
#: errors are "also exported from agentkit". ``agentkit.errors`` is the home of the whole error
#: tree (``errors.py``, "AgentKitError and its tree"; the concepts guide's Errors section says
#: every error is importable from there): the errors API.md binds elsewhere are there too, and
#: the errors it does not name are only there. Every other object has exactly one exported path.
BOUND_TWICE: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "1. Messages (agentkit.schema, re-exported); 9. ToolInfo; 16. content parts of a Message",
        ("agentkit", "agentkit.schema"),
        ("Role", "FunctionCall", "ToolCall", "TokenUsage", "ResponseMeta", "Message", "ToolInfo",
         "user_message", "system_message", "assistant_message", "tool_message", "concat_messages",
         "TextPart", "ImagePart", "FilePart", "AudioPart"),
    ),
    (
        "2. Streams (agentkit.streams, re-exported)",
        ("agentkit", "agentkit.streams"),
        ("pipe", "StreamWriter", "StreamReader", "StreamEOF", "stream_from_list",
         "stream_from_iterator", "concat_message_stream"),
    ),
    (
        "3. Async iterator pair (agentkit.iterators, re-exported)",
        ("agentkit", "agentkit.iterators"),
        ("new_async_iterator_pair", "AsyncIterator", "AsyncGenerator"),
    ),
    (
        "8. Models: the model errors, in agentkit.models and also exported from agentkit; "
        "agentkit.errors, the tree's home",
        ("agentkit", "agentkit.errors", "agentkit.models"),
        ("ModelError", "AuthenticationError", "PermissionDeniedError", "BadRequestError",
         "RateLimitError", "APIConnectionError", "APITimeoutError", "APIStatusError",
         "IncompleteStreamError", "ResponseTooLargeError"),
    ),
    (
        "8. Models: a model error API.md does not list, beside its siblings; agentkit.errors",
        ("agentkit.errors", "agentkit.models"),
        ("ContentBlockedError",),
    ),
    (
        "5, 7, 11, 14, 15: errors bound at the top level (retry errors: section 8, 'ModelError "
        "and subclasses ... also exported from agentkit'); agentkit.errors, the tree's home",
        ("agentkit", "agentkit.errors"),
        ("AgentKitError", "ExceedMaxIterationsError", "TransferError", "CheckpointError",
         "CheckpointNotFoundError", "CheckpointBusyError", "CheckpointConsumedError",
         "AgentCancelledError", "ToolError", "ToolArgumentsError", "ToolNotFoundError",
         "ToolTimeoutError", "ConversationBusyError", "RunLimitError", "GuardrailTripped",
         "RetryExhaustedError", "WillRetryError"),
    ),
)

#: The bound paths of each object API.md binds twice, by name.
BOUND_PATHS: dict[str, frozenset[str]] = {
    name: frozenset(f"{module}.{name}" for module in modules)
    for _, modules, names in BOUND_TWICE
    for name in names
}

#: Objects exported under more than one path when this count was last lowered; a change that
#: adds a second path to an object fails here (lower it when you remove one). Issue 46 found
#: 193 (and 176 top-level names, 77 public modules); this round started at 163 (177 top-level
#: names, 81 public modules, 49 deprecated paths). What remains is what API.md binds twice
#: (:data:`BOUND_TWICE`): :func:`test_only_what_api_md_binds_has_two_paths` keeps it so.
MULTI_PATH_CEILING = 54

#: The counts this round started from (printed beside today's by ``python -m tests.test_surface``).
BEFORE = {"top-level names": 177, "public modules": 81, "multi-path objects": 163,
          "deprecated paths": 49}


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


def test_only_what_api_md_binds_has_two_paths() -> None:
    extra = {
        first: paths
        for first, paths in measure().multi_path.items()
        if frozenset(paths) != BOUND_PATHS.get(first.rpartition(".")[2])
    }
    assert not extra, (
        f"objects exported under more than one path that API.md does not bind: {extra}; keep "
        "one path and deprecate the others (agentkit._lazy.attach(..., deprecated=...))"
    )


def test_every_path_api_md_binds_twice_is_exported_and_quiet() -> None:
    for name, paths in BOUND_PATHS.items():
        objects = set()
        for path in paths:
            module, _, attribute = path.rpartition(".")
            with warnings.catch_warnings():
                warnings.simplefilter("error", DeprecationWarning)
                loaded = importlib.import_module(module)
                objects.add(id(getattr(loaded, attribute)))
            assert attribute in loaded.__all__, path
        assert len(objects) == 1, f"{name}: {sorted(paths)} are not one object"


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


def test_docs_readme_samples_and_benchmarks_use_only_canonical_spellings() -> None:
    deprecated = _deprecated()
    assert deprecated, "nothing is deprecated: this test checks nothing"
    files = [
        *sorted((REPO / "docs").rglob("*.md")),
        *sorted((REPO / "docs").rglob("*.rst")),
        REPO / "README.md",
        REPO / "SKILL.md",
        REPO / "llms.txt",
        *sorted((REPO / "samples").rglob("*.py")),
        *sorted((REPO / "benchmarks").rglob("*.py")),
        *sorted((REPO / "benchmarks").rglob("*.md")),
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


def test_every_agentkit_import_of_the_samples_and_docs_is_quiet() -> None:
    # The imports themselves, resolved with DeprecationWarning as an error (the samples are
    # not run here: their own tests do that).
    files = [*sorted((REPO / "samples").rglob("*.py")), *sorted((REPO / "docs").rglob("*.md"))]
    names: set[str] = set()
    for path in files:
        text = path.read_text(encoding="utf-8")
        sources = [text] if path.suffix == ".py" else [
            block for match in _CODE_BLOCK.finditer(text) for block in match.groups() if block
        ]
        names |= {
            name for source in sources for name in _imported_names(source)
            if name.startswith("agentkit") and not name.endswith(".*")
        }
    assert len(names) > 100, "the scan found too few imports to check anything"
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for name in sorted(names):
            module, _, attribute = name.rpartition(".")
            loaded = importlib.import_module(module)
            if not hasattr(loaded, attribute):  # a submodule (from agentkit.prebuilt import deep)
                importlib.import_module(name)


def _main() -> None:
    surface = measure()
    deprecated = _deprecated()
    shims = sorted(
        name
        for name in PUBLIC
        if not importlib.import_module(name).__all__
        and any(path.rpartition(".")[0] == name for path in deprecated)
    )
    unbound = [
        paths
        for first, paths in surface.multi_path.items()
        if frozenset(paths) != BOUND_PATHS.get(first.rpartition(".")[2])
    ]
    now = {
        "top-level names": surface.top_level_names,
        "public modules": surface.public_modules,
        "multi-path objects": len(surface.multi_path),
        "deprecated paths": len(deprecated),
    }
    for what, count in now.items():
        print(f"{what}: {BEFORE[what]} -> {count}")
    print(f"  public modules exporting nothing but deprecated names: {len(shims)}")
    print(f"  multi-path objects API.md does not bind: {len(unbound)}")
    if "-v" in sys.argv:
        for found in sorted(surface.multi_path.values()):
            print("  " + " | ".join(found))


if __name__ == "__main__":
    _main()
