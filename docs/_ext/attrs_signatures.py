"""Signatures of attrs classes as a user writes them: ``max_retries: int = 2``, ``= []``.

attrs writes each class's ``__init__`` from its fields, and its source says
``max_retries=attr_dict['max_retries'].default`` and, for a factory, ``tool_calls=NOTHING``.
autodoc shows defaults as the source writes them (``autodoc_preserve_defaults``), so it would
print that generated source. This extension gives such an ``__init__`` the defaults the class's
own source writes instead (``= 2``, ``= default_backoff``), and a factory's default as what gives
the same value: the empty container a builtin factory makes (``= []``, ``= {}``), a class or
function called (``= Journal()``), the body of a ``lambda:``; else ``<factory>``.
"""

from __future__ import annotations

import ast
import inspect
import sys
from typing import Any

import attrs
from sphinx.application import Sphinx
from sphinx.ext.autodoc.preserve_defaults import DefaultValue

_FACTORY_RESULTS: dict[Any, str] = {
    list: "[]",
    dict: "{}",
    set: "set()",
    tuple: "()",
    frozenset: "frozenset()",
}


def attrs_class_of(function: Any) -> type | None:
    """The attrs class whose generated ``__init__`` ``function`` is, else ``None``."""
    function = getattr(function, "__func__", function)
    code = getattr(function, "__code__", None)
    if code is None or not code.co_filename.startswith("<attrs generated"):
        return None
    owner: Any = sys.modules.get(function.__module__)
    for part in function.__qualname__.split(".")[:-1]:
        owner = getattr(owner, part, None)
    return owner if inspect.isclass(owner) and attrs.has(owner) else None


def _class_node(cls: type) -> ast.ClassDef | None:
    """The definition of ``cls`` in its module's source, found by its qualified name.

    The module is the one its generated ``__init__`` was made in: agentkit gives its public
    classes the ``__module__`` of the public module that exports them.
    """
    module = getattr(cls.__init__, "__module__", None) or cls.__module__
    try:
        tree = ast.parse(inspect.getsource(sys.modules[module]))
    except (KeyError, OSError, TypeError, SyntaxError):
        return None
    body: list[ast.stmt] = tree.body
    node: ast.ClassDef | None = None
    for part in cls.__qualname__.split("."):
        node = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == part), None)
        if node is None:
            return None
        body = node.body
    return node


def _field_assignments(cls: type) -> dict[str, ast.expr]:
    """``field name -> the expression assigned to it`` in the body of ``cls`` and of its attrs
    bases (the nearest class wins), read from their source."""
    found: dict[str, ast.expr] = {}
    for klass in reversed(cls.__mro__):
        node = _class_node(klass) if attrs.has(klass) else None
        for statement in node.body if node is not None else ():
            if isinstance(statement, ast.AnnAssign):
                target, value = statement.target, statement.value
            elif isinstance(statement, ast.Assign) and len(statement.targets) == 1:
                target, value = statement.targets[0], statement.value
            else:
                continue
            if isinstance(target, ast.Name) and value is not None:
                found[target.id] = value
    return found


def _callee(node: ast.expr | None) -> str:
    if not isinstance(node, ast.Call):
        return ""
    return ast.unparse(node.func).rpartition(".")[2]


def _factory_text(factory: Any, written: ast.expr | None) -> str:
    if factory in _FACTORY_RESULTS:
        return _FACTORY_RESULTS[factory]
    if isinstance(written, ast.Lambda) and not written.args.args:
        return ast.unparse(written.body)
    if isinstance(written, (ast.Name, ast.Attribute)):
        return f"{ast.unparse(written)}()"
    return "<factory>"


def default_text(field: attrs.Attribute[Any], written: ast.expr | None) -> str:
    """The default of an attrs ``field`` as a user writes it; ``written`` is the expression
    the class body assigns to the field, when its source is known."""
    if _callee(written) in ("field", "ib", "attrib"):
        assert isinstance(written, ast.Call)
        keywords = {keyword.arg: keyword.value for keyword in written.keywords}
        written = keywords.get("default", keywords.get("factory"))
    default = field.default
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        if _callee(written) == "Factory":
            assert isinstance(written, ast.Call)
            written = written.args[0] if written.args else None
        if default.takes_self:
            return "<factory>"
        return _factory_text(default.factory, written)
    # A shared constant (``NO_EXTRA``, an empty read-only dict): what it is says more than a
    # name the reader cannot look up.
    literal = isinstance(default, (dict, tuple, frozenset, str, int, float))
    if isinstance(written, ast.Name) and written.id.isupper() and literal:
        return repr(default)
    if written is not None:
        return ast.unparse(written)
    return repr(default)


def attrs_signature(cls: type, signature: inspect.Signature) -> inspect.Signature:
    """``signature`` (of ``cls.__init__``) with each default as :func:`default_text` says."""
    by_alias = {field.alias: field for field in attrs.fields(cls) if field.init}
    written = _field_assignments(cls)
    parameters = []
    for parameter in signature.parameters.values():
        field = by_alias.get(parameter.name)
        if field is not None and parameter.default is not inspect.Parameter.empty:
            text = default_text(field, written.get(field.name))
            parameter = parameter.replace(default=DefaultValue(text))
        parameters.append(parameter)
    return signature.replace(parameters=parameters)


def _use_field_defaults(app: Sphinx, obj: Any, bound_method: bool) -> None:
    cls = attrs_class_of(obj)
    if cls is None:
        return
    function = getattr(obj, "__func__", obj)
    function.__signature__ = attrs_signature(cls, inspect.signature(function))


def setup(app: Sphinx) -> dict[str, Any]:
    # After autodoc has read the defaults from the source (autodoc_preserve_defaults; before
    # Sphinx 9 it does so in a handler of this event at the default priority, 500).
    app.connect("autodoc-before-process-signature", _use_field_defaults, priority=900)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
