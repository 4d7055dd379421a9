"""Every error agentkit raises to users is an :class:`~agentkit.AgentKitError`.

The scan reads every module of the package and fails on a ``raise`` of a bare builtin
exception (``raise ValueError(...)``): raise the agentkit error that says the same thing
(``AgentKitValueError``, ``AgentKitTypeError``... or a more precise one), which also
subclasses the builtin, so ``except ValueError`` keeps working.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

import agentkit.errors as errors
from agentkit.errors import (
    AgentKitError,
    AgentKitKeyError,
    AgentKitRuntimeError,
    AgentKitTimeoutError,
    AgentKitTypeError,
    AgentKitValueError,
    MissingDependencyError,
)

PACKAGE = Path(__file__).resolve().parent.parent / "agentkit"

# Builtins that are protocol, not errors for users: the iterator protocol, a Ctrl-C passed on,
# an invariant that cannot fail (and ``EvalReport.assert_passed``, a test assertion), the hook
# of a private base class its every subclass provides (the HTTP models' and fake servers').
PROTOCOL = {
    "NotImplementedError",
    "StopIteration",
    "StopAsyncIteration",
    "GeneratorExit",
    "KeyboardInterrupt",
    "AssertionError",
}

# (module, builtin): the few raises that stay bare, each for its reason.
ALLOWED = {
    # two classes claiming one persisted name: a bug in a class definition, found at import;
    # agentkit.errors itself uses _persist, which cannot import it back
    ("_persist.py", "RuntimeError"),
    # a module __getattr__ says "no such name" with the AttributeError Python expects
    ("_lazy.py", "AttributeError"),
    # OS errors with their errno, made where the OS would have raised them and handled by
    # the store that called (the file checkpoint store's private file primitives)
    ("checkpoint/_appends.py", "OSError"),
    ("checkpoint/_atomic.py", "OSError"),
    ("checkpoint/_atomic.py", "FileExistsError"),
    # LocalBackend on a system without O_NOFOLLOW/openat: the OSError os itself would raise
    ("backends/_local.py", "OSError"),
    # TODO(persist): the persistence modules another branch rewrites; converted after merge
    ("_agent.py", "ValueError"),
    ("_checkpoints.py", "ValueError"),
    ("_progress.py", "ValueError"),
}


def _bare_raises(root: Path = PACKAGE) -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(root.rglob("*.py")):
        module = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Raise) or node.exc is None:
                continue
            target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if not isinstance(target, ast.Name):
                continue
            builtin = getattr(builtins, target.id, None)
            if not (isinstance(builtin, type) and issubclass(builtin, BaseException)):
                continue
            if target.id in PROTOCOL or (module, target.id) in ALLOWED:
                continue
            found.append((module, node.lineno, target.id))
    return found


def test_no_module_raises_a_bare_builtin_error() -> None:
    bare = _bare_raises()
    assert not bare, (
        "raise an agentkit error (agentkit.errors: AgentKitValueError, AgentKitTypeError, "
        "AgentKitRuntimeError... or a precise one) instead of a bare builtin: "
        + ", ".join(f"{module}:{line} {name}" for module, line, name in bare)
    )


def test_the_scan_finds_a_bare_raise_and_passes_an_agentkit_one(tmp_path: Path) -> None:
    (tmp_path / "bad.py").write_text("def f(x):\n    if x:\n        raise ValueError('x')\n")
    (tmp_path / "good.py").write_text("def f():\n    raise AgentKitValueError('x')\n")
    (tmp_path / "protocol.py").write_text("def f():\n    raise StopIteration\n")
    assert _bare_raises(tmp_path) == [("bad.py", 3, "ValueError")]


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (AgentKitValueError, ValueError),
        (AgentKitTypeError, TypeError),
        (AgentKitRuntimeError, RuntimeError),
        (AgentKitTimeoutError, TimeoutError),
        (AgentKitKeyError, KeyError),
        (MissingDependencyError, ImportError),
    ],
)
def test_the_general_errors_are_agentkit_errors_and_their_builtins(
    error: type[Exception], builtin: type[Exception]
) -> None:
    raised = error("what was wrong, and how to fix it")
    assert isinstance(raised, AgentKitError) and isinstance(raised, builtin)
    assert str(raised).strip("'") == "what was wrong, and how to fix it"
    assert error.__name__ in errors.__all__


def test_an_argument_error_is_caught_as_before() -> None:
    from agentkit import Runner, with_checkpoint_id

    with pytest.raises(ValueError, match="checkpoint id") as caught:
        with_checkpoint_id("")
    assert isinstance(caught.value, AgentKitValueError)
    with pytest.raises(AgentKitError):
        Runner(object())  # type: ignore[arg-type]
