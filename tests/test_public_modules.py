"""Every agentkit module is either public or private, and the public ones say what they export.

A module is public when no part of its dotted name starts with ``_``. A public module has
``__all__``; every name in it resolves and is documented; every public name the module itself
defines (classes, functions, module-level constants) is in it. Private modules (``_x.py``)
hold the machinery and are never exported. Packages that load names lazily list them in
``dir()`` before they are loaded, and import them under ``TYPE_CHECKING`` for mypy and IDEs.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
import types
from pathlib import Path

import pytest

import agentkit

ROOT = Path(agentkit.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def _is_public(name: str) -> bool:
    return not any(part.startswith("_") for part in name.split("."))


PUBLIC = sorted(name for name in MODULES if _is_public(name))
PACKAGES = sorted(name for name, path in MODULES.items() if path.name == "__init__.py")


def _is_type_variable(node: ast.expr | None) -> bool:
    """``T = TypeVar("T")`` and friends: typing helpers, not API."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("TypeVar", "ParamSpec", "TypeVarTuple")
    )


def _defined_names(tree: ast.Module) -> set[str]:
    """The public names a module binds itself: classes, functions and module-level constants."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and not _is_type_variable(node.value):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and not _is_type_variable(node.value)
        ):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def test_the_walk_sees_the_public_and_the_private_side() -> None:
    # The rule bites only if the walk finds modules on both sides of it.
    assert {"agentkit", "agentkit.events", "agentkit.checkpoint.serializer"} <= set(PUBLIC)
    assert {"agentkit._runctx", "agentkit._agent", "agentkit._interrupt"} <= set(MODULES)
    assert not {"agentkit.runctx", "agentkit.worker", "agentkit.interrupt"} & set(MODULES)


@pytest.mark.parametrize("name", PUBLIC)
def test_a_public_module_exports_exactly_its_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert isinstance(exported, list), f"{name} has no __all__ list"
    assert len(exported) == len(set(exported)), f"{name}.__all__ repeats a name"

    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    missing = _defined_names(tree) - set(exported)
    assert not missing, (
        f"{name} defines public names that are not in its __all__: {sorted(missing)}; "
        "export them, or give them a _ name (or move them to a private module)"
    )

    for export in exported:
        assert not export.startswith("_") or export == "__version__", f"{name} exports {export}"
        value = getattr(module, export)  # resolves (lazy names load here)
        if isinstance(value, types.ModuleType):
            assert _is_public(value.__name__), f"{name} exports private module {value.__name__}"
        elif inspect.isclass(value) or inspect.isfunction(value):
            assert value.__doc__ and value.__doc__.strip(), f"{name}.{export} has no docstring"
            assert _is_public(value.__module__), (
                f"{name}.{export} presents itself as {value.__module__}.{value.__qualname__}, "
                "a private path"
            )


def test_lazily_exported_names_are_in_dir_before_they_are_loaded() -> None:
    # A fresh interpreter: nothing but the packages themselves has been imported.
    code = (
        "import importlib, sys\n"
        f"for name in {PACKAGES!r}:\n"
        "    package = importlib.import_module(name)\n"
        "    missing = set(getattr(package, '__all__', ())) - set(dir(package))\n"
        "    assert not missing, (name, sorted(missing))\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def _lazy_table(tree: ast.Module) -> tuple[dict[str, str], dict[str, str]]:
    """What a package imports under ``TYPE_CHECKING`` and what it hands to ``attach()``."""
    typed: dict[str, str] = {}
    lazy: dict[str, str] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for statement in node.body:
            if isinstance(statement, ast.ImportFrom) and statement.module:
                for alias in statement.names:
                    typed[alias.asname or alias.name] = statement.module
        for statement in node.orelse:
            for call in ast.walk(statement):
                if isinstance(call, ast.Call) and ast.unparse(call.func) == "attach":
                    for argument in call.args[1:2]:
                        assert isinstance(argument, ast.Dict)
                        for key, value in zip(argument.keys, argument.values, strict=True):
                            assert isinstance(key, ast.Constant) and isinstance(value, ast.Constant)
                            assert isinstance(key.value, str) and isinstance(value.value, str)
                            lazy[key.value] = value.value
    return typed, lazy


@pytest.mark.parametrize("name", PACKAGES)
def test_lazy_names_are_imported_under_type_checking_from_the_same_module(name: str) -> None:
    typed, lazy = _lazy_table(ast.parse(MODULES[name].read_text(encoding="utf-8")))
    public_lazy = {key: value for key, value in lazy.items() if not key.startswith("_")}
    typed_names = {key: value for key, value in typed.items() if key in public_lazy}
    assert typed_names == public_lazy, f"{name}: TYPE_CHECKING imports and attach() disagree"
    assert set(public_lazy) <= set(importlib.import_module(name).__all__)


def test_the_lazy_helper_is_used_where_packages_export_lazily() -> None:
    users = [
        name
        for name in PACKAGES
        if "attach(" in MODULES[name].read_text(encoding="utf-8")
    ]
    assert {
        "agentkit",
        "agentkit.agents",
        "agentkit.checkpoint",
        "agentkit.conversation",
        "agentkit.integrations",
        "agentkit.mcp",
        "agentkit.models",
        "agentkit.prebuilt",
    } <= set(users)
    # and no package keeps a hand-written PEP 562 hook of its own
    for name in PACKAGES:
        assert "def __getattr__" not in MODULES[name].read_text(encoding="utf-8"), name


def test_dir_of_prebuilt_lists_the_patterns_before_they_are_imported() -> None:
    code = (
        "import sys, agentkit.prebuilt as p\n"
        "assert 'agentkit.prebuilt.supervisor' not in sys.modules\n"
        "assert {'supervisor', 'planexecute'} <= set(dir(p))\n"
        "assert callable(p.supervisor.new) and callable(p.planexecute.new)\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_a_checkpoint_finds_every_persisted_type_even_when_its_module_was_not_imported() -> None:
    # Loading imports the persisted-type modules named in the codec; with lazy imports that
    # list must reach every module that registers a persisted type.
    code = (
        "import importlib, pathlib, agentkit\n"
        "from agentkit._persist import persisted_names\n"
        "from agentkit.checkpoint._codec import _PERSISTED_MODULES\n"
        "for name in _PERSISTED_MODULES:\n"
        "    importlib.import_module(name)\n"
        "found = set(persisted_names())\n"
        f"for name in {sorted(MODULES)!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(set(persisted_names()) - found))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


PUBLIC_PACKAGES = [name for name in PACKAGES if _is_public(name)]


def _dir_problems(name: str) -> list[str]:
    """What ``dir()`` of the package lists beyond its API, or cannot resolve."""
    package = importlib.import_module(name)
    exported = set(package.__all__)
    problems = []
    for entry in dir(package):
        if entry in exported:
            continue
        value = getattr(package, entry, None)
        if not (isinstance(value, types.ModuleType) and value.__name__ == f"{name}.{entry}"):
            problems.append(f"{name}: dir() lists {entry!r}, which is not API")
        elif not _is_public(value.__name__):
            problems.append(f"{name}: dir() lists the private module {entry!r}")
    return problems


@pytest.mark.parametrize("name", PUBLIC_PACKAGES)
def test_dir_of_a_public_package_lists_its_api_and_nothing_else(name: str) -> None:
    # Here every module of agentkit has been imported (the walk above): private modules,
    # imports and helpers are attributes of the packages by now, and still not listed.
    for module in MODULES:
        importlib.import_module(module)
    assert _dir_problems(name) == []
    listed = set(dir(importlib.import_module(name)))
    assert not {"TYPE_CHECKING", "annotations", "attach", "present"} & listed
    assert set(importlib.import_module(name).__all__) <= listed


def test_dir_of_every_public_package_is_clean_in_a_fresh_interpreter() -> None:
    code = (
        "import importlib\n"
        "from tests.test_public_modules import _dir_problems\n"
        f"problems = [p for name in {PUBLIC_PACKAGES!r} for p in _dir_problems(name)]\n"
        "print(problems)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT.parent,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
