"""The API reference: one page per public module, generated from the modules' ``__all__``.

A public module is one whose dotted name has no ``_`` part (``tests/test_public_modules.py``
keeps the same rule). Each public object is documented once, on its *home* page, and every
other public module that exports it lists it with a link; the Python domain learns each of
those names as an alias of the documented one, so ``agentkit.Runner``,
``agentkit.Runner`` and a docstring's ``:class:`~agentkit.Runner``` all resolve, and
the inventory (``objects.inv``) names every public name of every public module.

The home of an object:

1. the public module its ``__module__`` names, when that module exports it (classes and
   functions defined in a public module);
2. otherwise the deepest public module that exports it (``agentkit.checkpoint.base`` over
   ``agentkit.checkpoint`` over ``agentkit``); between modules of the same depth, a plain
   module over a package (``agentkit.errors`` over ``agentkit.models``), then by name.

Constants and type aliases are found by the module that assigns them (following ``from x
import name``), since two constants may be the very same ``int``. Their documentation is the
docstring under the assignment (or a ``#:`` comment before it), read from that module's source.

A public name with no documentation is a warning, so the ``-W`` build fails on it.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import re
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.domains.python import ObjectEntry, PythonDomain
from sphinx.environment import BuildEnvironment
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

logger = logging.getLogger(__name__)

PACKAGE = "agentkit"
API_DIR = "api"  # relative to the documentation's source directory
MAX_VALUE_SHOWN = 600  # a longer constant (a prompt, a test corpus) is described, not printed


def _is_public(dotted: str) -> bool:
    return not any(part.startswith("_") for part in dotted.split("."))


@functools.cache
def module_files(package: str = PACKAGE) -> dict[str, Path]:
    """Every module of ``package`` by dotted name, found from the files (nothing imported)."""
    root = Path(importlib.import_module(package).__file__ or "").parent
    found: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def public_modules(package: str = PACKAGE) -> list[str]:
    """The public modules of ``package``, sorted."""
    return sorted(name for name in module_files(package) if _is_public(name))


@dataclass
class Entry:
    """One public object: where it is documented and every public name it has."""

    home: str  # the module whose page documents it
    name: str  # its name there
    kind: str  # "class", "exception", "function", "data", "module"
    value: Any
    origin: tuple[str, str] | None = None  # (module, name) that assigns a constant
    names: list[tuple[str, str]] = field(default_factory=list)  # every (module, name)

    @property
    def target(self) -> str:
        return f"{self.home}.{self.name}"


def _kind(value: Any) -> str:
    if isinstance(value, types.ModuleType):
        return "module"
    if inspect.isclass(value):
        return "exception" if issubclass(value, BaseException) else "class"
    if inspect.isfunction(value) or inspect.isbuiltin(value):
        return "function"
    return "data"


def _imports(tree: ast.Module, module: str) -> dict[str, tuple[str, str]]:
    """``name -> (module, original name)`` for the ``from x import y`` of a module's body,
    those under ``if TYPE_CHECKING:`` included (lazy packages import their names there)."""
    found: dict[str, tuple[str, str]] = {}
    package = module if module_files().get(module, Path()).name == "__init__.py" else (
        module.rpartition(".")[0]
    )
    statements: list[ast.stmt] = list(tree.body)
    for node in tree.body:
        if isinstance(node, ast.If):
            statements.extend(node.body)
    for node in statements:
        if isinstance(node, ast.ImportFrom):
            source = node.module or ""
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, source] if source else base)
            for alias in node.names:
                found[alias.asname or alias.name] = (source, alias.name)
    return found


def _assigns(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return True
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
        ):
            return True
    return False


def constant_origin(module: str, name: str) -> tuple[str, str]:
    """The ``(module, name)`` whose assignment a module's exported constant comes from."""
    files = module_files()
    seen: set[tuple[str, str]] = set()
    while (module, name) not in seen:
        seen.add((module, name))
        path = files.get(module)
        if path is None:
            break
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if _assigns(tree, name):
            return module, name
        imported = _imports(tree, module).get(name)
        if imported is None:
            break
        module, name = imported
    raise LookupError(f"cannot find where {module}.{name} is assigned")


def _home_rank(module: str, value: Any) -> tuple[int, int, int, str]:
    files = module_files()
    defined_here = getattr(value, "__module__", None) == module and module != PACKAGE
    is_package = files[module].name == "__init__.py"
    return (0 if defined_here else 1, -module.count("."), 1 if is_package else 0, module)


@functools.cache
def collect(package: str = PACKAGE) -> list[Entry]:
    """Every public object of ``package`` with its home and all its public names."""
    by_key: dict[object, Entry] = {}
    for module_name in public_modules(package):
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            kind = _kind(value)
            origin = None
            if kind == "module":
                key: object = ("module", value.__name__)
            elif kind == "data" and defining_module(module_name, name) is not None:
                kind = "function"  # a decorated function (a pytest fixture): a callable object
                key = id(value)
            elif kind == "data":
                origin = constant_origin(module_name, name)
                key = ("data", origin)
            else:
                key = id(value)
            entry = by_key.get(key)
            if entry is None:
                entry = by_key[key] = Entry("", name, kind, value, origin)
            entry.names.append((module_name, name))
    entries = list(by_key.values())
    for entry in entries:
        if entry.kind == "module":
            entry.home, entry.name = entry.value.__name__.rpartition(".")[::2]
            continue
        if entry.origin is not None and _is_public(entry.origin[0]):
            entry.home, entry.name = entry.origin
            continue
        home, name = min(entry.names, key=lambda pair: _home_rank(pair[0], entry.value))
        entry.home, entry.name = home, name
    return entries


# -- page generation --------------------------------------------------------------------------


_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)(?:\s*<[^>]*>)?`")


def _first_line(value: Any, origin: tuple[str, str] | None = None) -> str:
    """The first paragraph of a docstring, on one line, its roles as plain literals.

    The roles are checked where the docstring is rendered whole, relative to its own module;
    here, in another module's table, they could point elsewhere.
    """
    doc = _constant_doc(origin) if origin else inspect.getdoc(value)
    first = (doc or "").strip().split("\n\n")[0].replace("\n", " ")
    return _ROLE.sub(lambda match: f"``{match.group(1).strip()}``", first)


def _constant_doc(origin: tuple[str, str]) -> str | None:
    analyzer = ModuleAnalyzer.for_module(origin[0])
    lines = analyzer.find_attr_docs().get(("", origin[1]))
    return "\n".join(lines).strip() if lines else None


def _value_text(value: Any) -> str:
    text = repr(value)
    for prefix in ("collections.abc.", "typing."):
        text = text.replace(prefix, "")
    return text


def _indent(text: str, spaces: int = 3) -> str:
    pad = " " * spaces
    return "\n".join(pad + line if line.strip() else "" for line in text.splitlines())


def _heading(text: str, char: str = "=") -> str:
    return f"{text}\n{char * len(text)}\n"


def _http_model_base(value: Any) -> bool:
    """Whether ``value`` is built on a private base whose public methods it presents as its
    own (the HTTP chat models, the fake model servers)."""
    bases = ("agentkit.models._http._model", "agentkit.testing._fake_http")
    return isinstance(value, type) and any(
        base.__module__ in bases for base in value.__mro__[1:]
    )


def _directive_for(entry: Entry) -> str:
    if entry.kind in ("class", "exception"):
        options = [":members:", ":show-inheritance:"]
        if entry.kind == "class" and _http_model_base(entry.value):
            # What the private base defines (generate, stream, close...) is documented here.
            options.append(":inherited-members:")
        if entry.kind == "class" and _is_enum(entry.value):
            options.append(":undoc-members:")
        body = "\n".join(f"   {option}" for option in options)
        return f".. auto{entry.kind}:: {entry.name}\n{body}\n"
    if entry.kind == "function":
        return f".. autofunction:: {entry.name}\n"
    assert entry.origin is not None
    doc = _constant_doc(entry.origin) or ""
    value = _value_text(entry.value)
    lines = [f".. py:data:: {entry.name}"]
    if len(value) <= 70 and "\n" not in value:
        lines.append(f"   :value: {value}")
    lines.append("")
    if doc:
        lines.append(_indent(doc))
        lines.append("")
    if (len(value) > 70 or "\n" in value) and len(value) <= MAX_VALUE_SHOWN:
        lines.append("   Value::")
        lines.append("")
        lines.append(_indent(value, 6))
        lines.append("")
    return "\n".join(lines) + "\n"


def _is_enum(value: Any) -> bool:
    import enum

    return inspect.isclass(value) and issubclass(value, enum.Enum)


def module_page(module_name: str, entries: list[Entry]) -> str:
    """The reStructuredText of one module's page."""
    module = importlib.import_module(module_name)
    exported = list(getattr(module, "__all__", ()))
    home_here = [e for e in entries if e.home == module_name and e.kind != "module"]
    by_name = {e.name: e for e in home_here}
    # In the order of __all__ (the modules group their names on purpose).
    documented = [by_name[name] for name in exported if name in by_name]
    elsewhere: list[tuple[str, Entry]] = []
    for entry in entries:
        for mod, name in entry.names:
            if mod != module_name:
                continue
            if entry.home != module_name or entry.kind == "module" or entry.name != name:
                # documented on another page, a module, or another name of one documented here
                elsewhere.append((name, entry))
    order = {name: i for i, name in enumerate(exported)}
    elsewhere.sort(key=lambda pair: order[pair[0]])

    parts = [
        _heading(f"``{module_name}``"),
        f".. automodule:: {module_name}\n   :no-members:\n",
    ]
    if documented:
        parts.append(f".. currentmodule:: {module_name}\n")
        for entry in documented:
            parts.append(_directive_for(entry))
    if elsewhere:
        title = "Also exported here" if documented else "Exported names"
        parts.append(_heading(title, "-"))
        parts.append(
            "These names are documented where they are defined; importing them from "
            f"``{module_name}`` gives the very same objects.\n"
        )
        parts.append(".. list-table::\n   :widths: 30 70\n")
        for name, entry in elsewhere:
            role = {
                "module": "mod",
                "class": "class",
                "exception": "exc",
                "function": "func",
                "data": "data",
            }[entry.kind]
            target = entry.value.__name__ if entry.kind == "module" else entry.target
            summary = _first_line(entry.value, entry.origin) if entry.kind != "module" else (
                _first_line(entry.value)
            )
            alias_note = f" (``{name}`` is another name of it)" if name != entry.name else ""
            parts.append(
                f"   * - :{role}:`{name} <{target}>`\n"
                f"     - {summary}{alias_note}\n"
            )
    return "\n".join(parts)


def index_page(modules: list[str]) -> str:
    lines = [
        _heading("API reference"),
        "Every public module of agentkit, with every name in its ``__all__``. A module is public",
        "when no part of its dotted name starts with ``_``; the others are the implementation and",
        "may change in any release. Most everyday names are importable from ``agentkit`` itself.",
        "",
        ".. toctree::",
        "   :maxdepth: 1",
        "",
    ]
    lines.extend(f"   {module}" for module in modules)
    return "\n".join(lines) + "\n"


def write_pages(srcdir: Path) -> list[str]:
    """Write the API pages under ``srcdir/api`` (only files whose text changed) and return the
    modules."""
    modules = public_modules()
    entries = collect()
    out = srcdir / API_DIR
    out.mkdir(exist_ok=True)
    wanted = {f"{module}.rst": module_page(module, entries) for module in modules}
    wanted["index.rst"] = index_page(modules)
    for stale in out.glob("*.rst"):
        if stale.name not in wanted:
            stale.unlink()
    for filename, text in wanted.items():
        path = out / filename
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
    return modules


# -- Sphinx hooks ------------------------------------------------------------------------------


def _generate(app: Sphinx) -> None:
    write_pages(Path(app.srcdir))
    _restore_defining_modules()


def _defines(tree: ast.Module, name: str) -> bool:
    return any(
        isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name
        for node in tree.body
    )


def defining_module(module: str, name: str) -> str | None:
    """The module whose source defines the class or function ``module.name`` (following
    ``from x import name``), or ``None`` when it is not agentkit's."""
    seen: set[tuple[str, str]] = set()
    while (module, name) not in seen and module in module_files():
        seen.add((module, name))
        tree = _module_tree(module)
        if _defines(tree, name):
            return module
        imported = _imports(tree, module).get(name)
        if imported is None:
            return None
        module, name = imported
    return None


def _restore_defining_modules() -> None:
    """Give each public class and function back the ``__module__`` of the source that defines it.

    agentkit sets the ``__module__`` of the objects its public modules import from private ones
    to the public module (``agentkit._lazy.present``: reprs and tracebacks show public paths).
    autodoc reads attribute docstrings (and viewcode the source) from the module
    ``__module__`` names, so in the documentation build that is set back to the defining one;
    the pages still document each object under its public name.
    """
    for entry in collect():
        if entry.kind not in ("class", "exception", "function"):
            continue
        for module, name in entry.names:
            real = defining_module(module, name)
            if real is not None and real != entry.value.__module__:
                entry.value.__module__ = real
                break


def _undocumented(app: Sphinx, env: BuildEnvironment) -> Iterator[str]:
    for entry in collect():
        if entry.kind == "module":
            doc = inspect.getdoc(entry.value)
        elif entry.kind == "data":
            assert entry.origin is not None
            doc = _constant_doc(entry.origin)
        else:
            doc = inspect.getdoc(entry.value)
        if not (doc and doc.strip()):
            yield entry.target


def _add_aliases(app: Sphinx, env: BuildEnvironment) -> None:
    """Teach the Python domain every public name of every documented object, members too
    (``agentkit.Runner.invoke`` for ``agentkit.Runner.invoke``)."""
    domain: PythonDomain = env.get_domain("py")  # type: ignore[assignment]
    objects = domain.objects
    members: dict[str, list[str]] = {}
    for name in objects:
        owner, _, _ = name.rpartition(".")
        while owner:
            members.setdefault(owner, []).append(name)
            owner = owner.rpartition(".")[0]
    missing: list[str] = []
    for entry in collect():
        if entry.kind == "module":
            continue
        documented = objects.get(entry.target)
        if documented is None:
            missing.append(entry.target)
            continue
        for module, name in entry.names:
            alias = f"{module}.{name}"
            _alias(objects, alias, documented)
            for member in members.get(entry.target, ()):
                _alias(objects, alias + member[len(entry.target) :], objects[member])
    for target in missing:
        logger.warning("%s is public but the API reference does not document it", target)
    for target in _undocumented(app, env):
        logger.warning("%s is public but has no docstring", target)


def _alias(objects: dict[str, ObjectEntry], alias: str, documented: ObjectEntry) -> None:
    if alias not in objects or objects[alias].aliased:
        objects[alias] = ObjectEntry(
            documented.docname, documented.node_id, documented.objtype, True
        )


# -- references the Python domain cannot resolve by itself -----------------------------------


def _import_target(target: str) -> Any:
    """The object a dotted name names, or ``LookupError``."""
    parts = target.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            value: Any = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        try:
            for attribute in parts[split:]:
                value = getattr(value, attribute)
        except AttributeError:
            continue
        return value
    raise LookupError(target)


@functools.cache
def _public_targets() -> dict[int, str]:
    found: dict[int, str] = {}
    for entry in collect():
        if entry.kind in ("class", "exception", "function"):
            found[id(entry.value)] = entry.target
    return found


def _resolve(app: Sphinx, env: BuildEnvironment, node: Any, contnode: Any) -> Any:
    """Resolve what autodoc writes from type hints and the Python domain cannot find.

    - a type variable (``T``, ``P``): plain text, there is nothing to link to;
    - a public object seen under the private path that defines it
      (``agentkit._stream_base.StreamReader``): the link to its documentation;
    - a private class listed in ``apiref_private_types`` (the types of internal constructor
      arguments and fields): plain text; any other private class is left to warn;
    - a name listed in ``apiref_external_links``, for projects without a Sphinx inventory:
      a link to their documentation.
    """
    if node.get("refdomain") != "py":
        return None
    target: str = node["reftarget"]
    module: str | None = node.get("py:module")
    external = app.config.apiref_external_links.get(target)
    if external is not None:
        from docutils import nodes

        reference = nodes.reference("", "", internal=False, refuri=external)
        reference.append(contnode)
        return reference
    if _LITERAL.fullmatch(target):
        return contnode  # a value in a Literal[...] type: nothing to link to
    candidates = [target] + ([f"{module}.{target}"] if module and "." not in target else [])
    context = _context_module(module, node.get("py:class"))
    if context is not None and context != module and "." not in target:
        candidates.append(f"{context}.{target}")
    for candidate in candidates:
        try:
            value = _import_target(candidate)
        except LookupError:
            continue
        if isinstance(value, (typing.TypeVar, typing.ParamSpec)):
            return contnode
        public = _public_targets().get(id(value))
        if public is not None and public != candidate:
            domain: PythonDomain = env.get_domain("py")  # type: ignore[assignment]
            builder = app.builder
            return domain.resolve_xref(
                env, node["refdoc"], builder, node["reftype"], public, node, contnode
            )
        if candidate in app.config.apiref_private_types:
            return contnode
    imported = _imported_name(module, target) or _imported_name(context, target)
    if imported is not None and imported != target:
        return _resolve_as(app, env, node, contnode, imported)
    if target in _type_variable_names():
        # a type variable of a private module, in the signature of a public name documented
        # on another page (``P`` of ``agentkit.tool``): plain text, as above
        return contnode
    listed = [name for name in app.config.apiref_private_types if name.rpartition(".")[2] == target]
    if len(listed) == 1:
        # a listed private type by its bare name, in a signature written in a private module
        # and documented under a public one (``ToolExceptionHandler`` of ChatModelAgent)
        return contnode
    return None


@functools.cache
def _type_variable_names() -> frozenset[str]:
    """The names that every agentkit module binding them binds to a ``TypeVar``/``ParamSpec``."""
    typevars: set[str] = set()
    others: set[str] = set()
    for module in module_files():
        for statement in _module_tree(module).body:
            if not isinstance(statement, ast.Assign):
                continue
            value = statement.value
            is_typevar = (
                isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id in ("TypeVar", "ParamSpec", "TypeVarTuple")
            )
            for target in statement.targets:
                if isinstance(target, ast.Name):
                    (typevars if is_typevar else others).add(target.id)
    return frozenset(typevars - others)


_LITERAL = re.compile(r"""'[^']*'|"[^"]*"|-?\d+(\.\d+)?""")


def _context_module(module: str | None, cls: str | None) -> str | None:
    """The module defining the class a reference is written in (its type hints are that
    module's names), or ``None``."""
    if not module or not cls:
        return None
    try:
        value = _import_target(f"{module}.{cls}")
    except LookupError:
        return None
    defined_in = getattr(value, "__module__", None)
    return defined_in if isinstance(defined_in, str) else None


def _imported_name(module: str | None, target: str) -> str | None:
    """The full name of ``target`` as ``module`` imports it (``Request`` -> ``flask.Request``),
    imports under ``if TYPE_CHECKING:`` included: type hints name such imports."""
    if not module or module not in module_files():
        return None
    tree = _module_tree(module)
    head, _, rest = target.partition(".")
    found = _imports(tree, module).get(head)
    if found is None:
        return None
    source, name = found
    return ".".join(part for part in (source, name, rest) if part)


@functools.cache
def _module_tree(module: str) -> ast.Module:
    return ast.parse(module_files()[module].read_text(encoding="utf-8"))


def _resolve_as(
    app: Sphinx, env: BuildEnvironment, node: Any, contnode: Any, target: str
) -> Any:
    """Resolve ``node`` as if it named ``target``: agentkit's own names, then the other
    projects' inventories."""
    retry = node.deepcopy()
    retry["reftarget"] = target
    domain: PythonDomain = env.get_domain("py")  # type: ignore[assignment]
    resolved = domain.resolve_xref(
        env, node["refdoc"], app.builder, node["reftype"], target, retry, contnode
    )
    if resolved is None:
        resolved = _resolve(app, env, retry, contnode)
    if resolved is not None:
        return resolved
    from sphinx.ext.intersphinx import missing_reference

    return missing_reference(app, env, retry, contnode)


# -- napoleon and the docstrings of attributes ---------------------------------------------------

# Napoleon reads the first line of an attribute's or property's docstring as ``type: text``, so
# ``"""The most rounds the loop makes (0: no limit)."""`` would render ``The most rounds ... (0``
# as a type (a broken reference). agentkit's docstrings never give a type there (the annotation
# does), so these docstrings are kept as written: saved before napoleon runs, put back after.
_PLAIN_KINDS = ("attribute", "property", "data")
_saved_lines: dict[str, list[str]] = {}


def _save_plain(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    if what in _PLAIN_KINDS:
        _saved_lines[name] = list(lines)


def _restore_plain(
    app: Sphinx, what: str, name: str, obj: Any, options: Any, lines: list[str]
) -> None:
    if what in _PLAIN_KINDS and name in _saved_lines:
        lines[:] = _saved_lines.pop(name)


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("autodoc-process-docstring", _save_plain, priority=400)
    app.connect("autodoc-process-docstring", _restore_plain, priority=600)
    app.add_config_value("apiref_private_types", {}, "env", dict)
    app.add_config_value("apiref_external_links", {}, "env", dict)
    app.connect("builder-inited", _generate)
    app.connect("env-updated", _add_aliases)
    app.connect("missing-reference", _resolve)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
