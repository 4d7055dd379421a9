"""The one lazy-import helper of agentkit's packages (PEP 562 ``__getattr__`` and ``__dir__``).

A package names what it exports and where each name is defined; the defining module is
imported the first time the name is asked for (``agentkit.LoopAgent``, ``from agentkit import
LoopAgent``), so ``import agentkit`` pays only for what a plain agent script needs. Usage, at
the end of a package's ``__init__.py``::

    if TYPE_CHECKING:  # what mypy and IDEs see: the very same names, imported eagerly
        from agentkit.agents._workflow import LoopAgent
    else:
        __getattr__, __dir__ = attach(__name__, {"LoopAgent": "agentkit.agents._workflow"})

``tests/test_public_modules.py`` checks that the two spellings agree.

A name that moved keeps working for one release under its old path: ``attach(...,
deprecated={"tool": "agentkit.tool"})`` answers ``agentkit.tools.tool`` with the object at its
canonical path and a :class:`DeprecationWarning` naming that path. A deprecated name is not in
the package's ``__all__`` nor in its ``dir()``; :data:`DEPRECATED` lists every one
(``tests/test_surface.py`` checks that docs and samples use none of them).
"""

from __future__ import annotations

import importlib
import sys
import types
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["DEPRECATED", "REMOVED_IN", "attach", "present"]

REMOVED_IN = "0.4"
"""The release that drops the paths deprecated in this one (they are kept for one release)."""

DEPRECATED: dict[str, str] = {}
"""Every deprecated path of a loaded package -> the object's canonical path
(``"agentkit.tools.tool": "agentkit.tool"``)."""


def attach(
    package: str,
    exports: Mapping[str, str] | None = None,
    *,
    submodules: Iterable[str] = (),
    deprecated: Mapping[str, str] | None = None,
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """Return the ``(__getattr__, __dir__)`` pair that loads ``package``'s exports on first use.

    Args:
        package: the package's ``__name__``.
        exports: exported name -> the absolute name of the module that defines it.
        submodules: names of the package's submodules to import when asked for as attributes
            (``agentkit.prebuilt.supervisor`` without importing it first).
        deprecated: old name -> the canonical path of its object (``"agentkit.tool"``): asking
            for the old name warns (:class:`DeprecationWarning`, naming the canonical import
            and the release that removes the old one) and returns the object. The value is not
            stored, so every use from new code warns.

    A loaded value is stored in the package's namespace, so ``__getattr__`` runs once per name.
    ``__dir__`` lists the package's API and nothing else: its ``__all__``, the lazy names
    (loaded or not), the declared ``submodules`` and the public submodules imported so far;
    never its own imports (``TYPE_CHECKING``, ``annotations``), private modules or helpers.
    A package that loads nothing lazily calls ``attach(__name__)`` for that ``__dir__``.
    """
    where = dict(exports or {})
    subs = frozenset(submodules)
    moved = dict(deprecated or {})
    DEPRECATED.update({f"{package}.{name}": canonical for name, canonical in moved.items()})
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> Any:
        canonical = moved.get(name)
        if canonical is not None:
            home, _, attribute = canonical.rpartition(".")
            warnings.warn(
                f"{package}.{name} is deprecated and goes in agentkit {REMOVED_IN}: use "
                f"{canonical} (from {home} import {attribute})",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(home), attribute)
        module_name = where.get(name)
        if module_name is not None:
            value = getattr(importlib.import_module(module_name), name)
            namespace[name] = value
            return value
        if name in subs:
            return importlib.import_module(f"{package}.{name}")
        known = [n for n in (*namespace, *where, *subs) if not n.startswith("_")]
        raise AttributeError(_no_attribute(package, name, known))

    def __dir__() -> list[str]:
        public = {name for name in where if not name.startswith("_")} | subs
        public.update(namespace.get("__all__", ()))
        public.update(
            name
            for name, value in namespace.items()
            if isinstance(value, types.ModuleType)
            and not name.startswith("_")
            and value.__name__ == f"{package}.{name}"
        )
        return sorted(public)

    return __getattr__, __dir__


def present(values: Iterable[object], module: str) -> None:
    """Give the classes and functions among ``values`` the ``__module__`` ``module``.

    Reprs and tracebacks then show the public path (``agentkit.Runner``), not the private
    module that defines the object. Names loaded lazily keep their own (public) module.
    """
    for value in values:
        if isinstance(value, type) or (callable(value) and hasattr(value, "__module__")):
            try:
                value.__module__ = module
            except (AttributeError, TypeError):  # builtins and some C objects refuse it
                pass


def _no_attribute(package: str, name: str, known: list[str]) -> str:
    message = f"module {package!r} has no attribute {name!r}"
    if name.startswith("__"):
        return message  # dunder probes (copy, pickle, IDEs): no advice
    import difflib  # only on this error path

    close = difflib.get_close_matches(name, known, n=3)
    if close:
        return f"{message}; did you mean {' or '.join(repr(c) for c in close)}?"
    return f"{message} (its public names are listed in {package}.__all__)"
