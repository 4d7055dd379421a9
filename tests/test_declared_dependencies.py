"""Every third-party module the code imports is declared in ``setup.cfg``, in the right place.

A user installs what the README says (``pip install -e .``, ``'.[test]'``, ``'.[docs]'``) in a
fresh virtual environment; a module imported but not declared there fails on their machine while
it passes on one where it was installed by hand. The imports are read from the sources (every
``import`` statement, those inside functions too, ``importlib.import_module("x")`` and
``pytest.importorskip("x")`` calls, ``[python, "-m", "x"]`` command lines) and mapped to the
distributions that provide them with :func:`importlib.metadata.packages_distributions`, so a new
import is checked as soon as it is written. Not counted: the standard library, the repository's
own modules, imports under ``if TYPE_CHECKING:`` (only the type checker reads them; it runs with
``[dev]``) and imports in a ``try:`` whose ``except ImportError`` lets the code run without them.

The rules:

- ``install_requires`` covers what ``import agentkit`` loads;
- ``[docs]`` covers the documentation build: ``docs/conf.py``, ``docs/_ext/`` and the
  module-level imports of ``agentkit`` (the API reference imports every public module);
- ``[test]`` covers every import of the repository: the tests exercise the library, its
  extras, the samples, the benchmarks and the documentation's extension;
- every import of ``agentkit`` is in ``install_requires`` or in an extra;
- ``[dev]`` holds ``[test]`` and ``[docs]`` (CI lints and type-checks in the test venv with
  ``[dev]`` added; a developer installs ``[dev]`` alone).
"""

from __future__ import annotations

import ast
import configparser
import functools
import importlib.metadata
import itertools
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
TREES = ("agentkit", "tests", "samples", "benchmarks", "docs")


# -- setup.cfg -------------------------------------------------------------------------------

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(text: str) -> list[tuple[str, list[str]]]:
    """``(distribution, extras)`` of each requirement line of a setup.cfg value."""
    found: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = _REQUIREMENT.match(line)
        assert match is not None, f"setup.cfg: cannot read the requirement {line!r}"
        extras = [e.strip() for e in (match.group(2) or "").split(",") if e.strip()]
        found.append((_normalise(match.group(1)), extras))
    return found


@functools.cache
def _setup_cfg() -> dict[str, list[tuple[str, list[str]]]]:
    """``install_requires`` and each extra, by name."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(REPO / "setup.cfg", encoding="utf-8")
    groups = {"install_requires": _requirements(parser["options"]["install_requires"])}
    for extra, text in parser["options.extras_require"].items():
        groups[extra] = _requirements(text)
    return groups


def _extra_requirements(distribution: str, extra: str) -> set[str]:
    """The distributions ``distribution[extra]`` adds (``celery[redis]`` adds ``redis``)."""
    try:
        requires = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return set()
    wanted = re.compile(rf"""extra\s*==\s*["']{re.escape(extra)}["']""")
    found: set[str] = set()
    for requirement in requires:
        name, _, marker = requirement.partition(";")
        if wanted.search(marker):
            match = _REQUIREMENT.match(name)
            if match is not None:
                found.add(_normalise(match.group(1)))
    return found


def declared(*groups: str) -> set[str]:
    """The distributions that installing these groups of setup.cfg asks for by name."""
    found: set[str] = set()
    for group in groups:
        for distribution, extras in _setup_cfg()[group]:
            found.add(distribution)
            for extra in extras:
                found |= _extra_requirements(distribution, extra)
    return found


# -- the imports of the sources -------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    module: str  # the top-level module name
    path: Path
    line: int
    module_level: bool  # not inside a function

    @property
    def place(self) -> str:
        shown = self.path.relative_to(REPO) if REPO in self.path.parents else self.path
        return f"{shown}:{self.line}"


_IMPORT_CALLS = {"import_module", "importorskip", "__import__"}


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names: list[ast.expr] = []
    if isinstance(handler.type, ast.Tuple):
        names = list(handler.type.elts)
    elif handler.type is not None:
        names = [handler.type]
    return any(
        isinstance(name, ast.Name) and name.id in ("ImportError", "ModuleNotFoundError")
        for name in names
    )


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """The absolute imports a module makes at run time, optional ones left out."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.found: list[Import] = []
        self._depth = 0  # functions we are inside

    def _add(self, dotted: str, node: ast.AST) -> None:
        self.found.append(
            Import(
                dotted.partition(".")[0], self.path, getattr(node, "lineno", 0), self._depth == 0
            )
        )

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self._add(node.module, node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if (
            name in _IMPORT_CALLS
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and not node.args[0].value.startswith(".")
        ):
            self._add(node.args[0].value, node)
        self.generic_visit(node)

    def visit_List(self, node: ast.List) -> None:
        self._run_module(node.elts)
        self.generic_visit(node)

    def visit_Tuple(self, node: ast.Tuple) -> None:
        self._run_module(node.elts)
        self.generic_visit(node)

    def _run_module(self, items: list[ast.expr]) -> None:
        """``[sys.executable, "-m", "sphinx", ...]``: a Python started to run a module."""
        for flag, module in itertools.pairwise(items):
            if (
                isinstance(flag, ast.Constant)
                and flag.value == "-m"
                and isinstance(module, ast.Constant)
                and isinstance(module.value, str)
            ):
                self._add(module.value, module)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for statement in node.orelse:
                self.visit(statement)
            return
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        if any(_catches_import_error(handler) for handler in node.handlers):
            # An optional import: the code runs without it (the handlers say what then).
            for statement in [*node.handlers, *node.orelse, *node.finalbody]:
                self.visit(statement)
            return
        self.generic_visit(node)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function
    visit_Lambda = _function


def _sources(tree: str) -> Iterator[Path]:
    root = REPO / tree
    if root.is_file():
        yield root
        return
    for path in sorted(root.rglob("*.py")):
        if not {"_build", "__pycache__"} & set(path.relative_to(REPO).parts):
            yield path


@functools.cache
def imports(tree: str) -> tuple[Import, ...]:
    """The third-party imports of the Python files under ``tree`` (a folder or a file)."""
    found: list[Import] = []
    for path in _sources(tree):
        visitor = _Imports(path)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        found.extend(visitor.found)
    first_party = _first_party()
    return tuple(
        item
        for item in found
        if item.module not in sys.stdlib_module_names and item.module not in first_party
    )


# Folders whose files import their siblings by bare name (the samples and the docs' extension
# put their own folder on sys.path; the tests run their helper scripts as programs).
_SCRIPT_TREES = ("tests", "samples", "benchmarks", "docs")


@functools.cache
def _first_party() -> frozenset[str]:
    """The names the repository's own files are imported as: its top-level folders, and the
    modules and packages of the folders that import their files by bare name (agentkit's own
    modules are not among them: ``agentkit/integrations/flask.py`` is not ``flask``)."""
    names = {"__future__", *TREES}
    for tree in _SCRIPT_TREES:
        for path in _sources(tree):
            names.add(path.stem)
            names.add(path.parent.name)
    return frozenset(names)


# -- the check --------------------------------------------------------------------------------


@functools.cache
def _providers() -> dict[str, frozenset[str]]:
    """``top-level module -> the installed distributions that provide it``.

    Python 3.10's ``packages_distributions()`` reads only ``top_level.txt``, which wheels built
    by hatchling or flit (attrs, httpx, Flask) do not have; the files a distribution installed
    say the same, as Python 3.11's reads them.
    """
    found: dict[str, set[str]] = {}
    for module, names in importlib.metadata.packages_distributions().items():
        found.setdefault(module, set()).update(_normalise(name) for name in names)
    for distribution in importlib.metadata.distributions():
        name = _normalise(distribution.metadata["Name"] or "")
        for file in distribution.files or ():
            if len(file.parts) > 1:
                top = file.parts[0]  # a package's folder
            elif file.suffix in (".py", ".so", ".pyd"):
                top = file.name.partition(".")[0]  # a single-file module
            else:
                continue
            if top.isidentifier():
                found.setdefault(top, set()).add(name)
    return {module: frozenset(names) for module, names in found.items()}


def undeclared(found: tuple[Import, ...] | list[Import], allowed: set[str]) -> list[str]:
    """One line per module that no distribution in ``allowed`` provides: the module, the
    distributions that do, and where it is imported."""
    where: dict[str, list[Import]] = {}
    for item in found:
        providers = _providers().get(item.module)
        if providers is None or not providers & allowed:
            where.setdefault(item.module, []).append(item)
    problems: list[str] = []
    for module, items in sorted(where.items()):
        providers = _providers().get(module)
        source = f"from {', '.join(sorted(providers))}" if providers else "not installed"
        places = sorted({item.place for item in items})
        more = f" and {len(places) - 3} more" if len(places) > 3 else ""
        problems.append(f"{module} ({source}): {', '.join(places[:3])}{more}")
    return problems


def test_the_tests_import_only_what_the_test_extra_installs() -> None:
    # The tests exercise everything: the library and its extras, the samples, the benchmarks,
    # the documentation's extension (tests/test_docs_reference.py imports it).
    found = [item for tree in TREES for item in imports(tree)]
    problems = undeclared(found, declared("install_requires", "test"))
    assert not problems, (
        "imported but not installed by pip install -e '.[test]'; add each one's distribution "
        "to [test] in setup.cfg (and to [dev]):\n" + "\n".join(problems)
    )


def _module_file(dotted: str) -> Path | None:
    """The file of an ``agentkit`` module, or ``None`` (a name imported from a module)."""
    base = REPO.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _module_level_agentkit_imports(path: Path) -> set[Path]:
    """The agentkit files ``path`` loads when imported (``TYPE_CHECKING`` blocks left out)."""
    found: set[Path] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.If) and not _is_type_checking(node.test):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
            for name in names:
                parts = name.split(".")
                if parts[0] != "agentkit":
                    continue
                for end in range(1, len(parts) + 1):  # a package's __init__ loads first
                    file = _module_file(".".join(parts[:end]))
                    if file is not None:
                        found.add(file)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return found


def _files_the_api_reference_loads() -> set[Path]:
    """The public modules of agentkit, and every module they load at import time."""
    root = REPO / "agentkit"
    todo = [
        path
        for path in root.rglob("*.py")
        if not any(part.startswith("_") for part in path.relative_to(root).parts[:-1])
        and (path.name == "__init__.py" or not path.name.startswith("_"))
    ]
    seen: set[Path] = set()
    while todo:
        path = todo.pop()
        if path not in seen:
            seen.add(path)
            todo.extend(_module_level_agentkit_imports(path) - seen)
    return seen


def test_the_docs_build_imports_only_what_the_docs_extra_installs() -> None:
    # The API reference imports every public module of agentkit: their module-level imports,
    # and those of every module they load, run in the documentation build. A private module
    # only imported inside a function (agentkit._yaml, for skills and eval datasets) is not.
    loaded = _files_the_api_reference_loads()
    found = [
        *imports("docs"),
        *(item for item in imports("agentkit") if item.module_level and item.path in loaded),
    ]
    problems = undeclared(found, declared("install_requires", "docs"))
    assert not problems, (
        "imported by the documentation build but not installed by pip install -e '.[docs]'; "
        "add each one's distribution to [docs] in setup.cfg (and to [dev]):\n" + "\n".join(problems)
    )


def test_import_agentkit_needs_only_install_requires() -> None:
    script = (
        "import json, sys, agentkit; "
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    loaded = set(
        json.loads(
            subprocess.run(
                [sys.executable, "-c", script],
                capture_output=True,
                text=True,
                check=True,
                cwd=REPO,
                timeout=60,
            ).stdout
        )
    )
    # What agentkit's own source imports, among what `import agentkit` loaded (the modules
    # its dependencies load in turn are theirs to declare).
    found = [item for item in imports("agentkit") if item.module in loaded]
    problems = undeclared(found, declared("install_requires"))
    assert not problems, (
        "loaded by `import agentkit` but not in install_requires (setup.cfg); declare each "
        "one's distribution there, or import it lazily where the extra's feature needs it:\n"
        + "\n".join(problems)
    )


# Modules agentkit uses only when the program's host has already loaded them, so no extra
# installs them: the module, and why.
PROVIDED_BY_THE_HOST = {
    "IPython": "display and evals read it from sys.modules, where a running Jupyter kernel put it",
}


def test_every_import_of_the_library_is_in_an_extra_or_required() -> None:
    groups = list(_setup_cfg())
    found = [item for item in imports("agentkit") if item.module not in PROVIDED_BY_THE_HOST]
    problems = undeclared(found, declared(*groups))
    assert not problems, (
        "agentkit imports these without declaring them; add each one's distribution to "
        "install_requires, or to the extra of the feature that needs it, in setup.cfg:\n"
        + "\n".join(problems)
    )


@pytest.mark.parametrize("extra", ["test", "docs"])
def test_the_dev_extra_holds_the_test_and_docs_extras(extra: str) -> None:
    # CI lints and type-checks in the test venv after installing [dev]; a developer installs
    # [dev] alone and runs the tests and builds the docs.
    dev = {name for name, _ in _setup_cfg()["dev"]}
    missing = sorted({name for name, _ in _setup_cfg()[extra]} - dev)
    assert not missing, f"[{extra}] requirements missing from [dev] in setup.cfg: {missing}"


def test_the_scan_finds_imports_of_every_kind(tmp_path: Path) -> None:
    source = tmp_path / "example.py"
    source.write_text(
        "from __future__ import annotations\n"
        "import os\n"
        "import yaml\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    import mypy_only\n"
        "try:\n"
        "    import optional_thing\n"
        "except ImportError:\n"
        "    optional_thing = None\n"
        "def later():\n"
        "    from flask import Flask\n"
        "    importlib.import_module('celery.app')\n"
        "    pytest.importorskip('selenium')\n"
        "    subprocess.run([sys.executable, '-m', 'sphinx', '-b', 'html'])\n",
        encoding="utf-8",
    )
    visitor = _Imports(source)
    visitor.visit(ast.parse(source.read_text(encoding="utf-8")))
    seen = {(item.module, item.module_level) for item in visitor.found}
    assert seen == {
        ("__future__", True),
        ("os", True),
        ("yaml", True),
        ("typing", True),
        ("flask", False),
        ("celery", False),
        ("selenium", False),
        ("sphinx", False),
    }
    fake = Import("yaml", source, 3, True)
    assert undeclared([fake], {"pyyaml"}) == []
    assert undeclared([fake], {"attrs"}) != []
