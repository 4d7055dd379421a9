"""Whether a class's ``__getstate__``/``__setstate__`` are the ones attrs generates, and on
which fields they work.

attrs gives slotted classes a ``__getstate__`` that returns ``{field: value}`` for each field
in order, and a ``__setstate__`` that takes the state as such a dict (it sets each field
present) or as a tuple (it sets the fields in order from the tuple's items). So for these
classes the checkpoint writer reads the field values with one ``operator.attrgetter`` instead
of building the dict, and the reader, when a checkpoint's field names are exactly the class's
fields in order, passes the values as a tuple instead of building a dict per object: the same
fields get the same values either way, and the bytes written are the same.

attrs' functions are recognised by their code objects, which all classes share, and the field
names are read from their closure: nothing here guesses. At import, a probe class checks that
both behave as described; if a future attrs changes them, :func:`attrs_field_names` returns
``None`` for every function and the writer and reader use the dict as before.
"""

from __future__ import annotations

from types import CodeType
from typing import Any

import attrs

__all__ = ["attrs_field_names"]


@attrs.define
class _Probe:
    first: Any = None
    second: Any = None


def _generated_codes() -> tuple[CodeType, ...]:
    methods: dict[str, Any] = {
        name: vars(_Probe).get(name) for name in ("__getstate__", "__setstate__")
    }
    codes = {name: getattr(method, "__code__", None) for name, method in methods.items()}
    if not all(
        isinstance(code, CodeType) and "state_attr_names" in code.co_freevars
        for code in codes.values()
    ):
        return ()
    probe = _Probe.__new__(_Probe)
    try:
        methods["__setstate__"](probe, (1, 2))
        state = methods["__getstate__"](probe)
    except Exception:  # a future attrs that refuses tuples: keep using dicts
        return ()
    if (probe.first, probe.second) != (1, 2) or list(state.items()) != [
        ("first", 1),
        ("second", 2),
    ]:
        return ()
    return tuple(code for code in codes.values() if isinstance(code, CodeType))


_CODES = _generated_codes()


def attrs_field_names(method: Any) -> tuple[str, ...] | None:
    """The fields, in order, that attrs' generated ``__getstate__`` or ``__setstate__`` works
    on; ``None`` when ``method`` is another function."""
    code = getattr(method, "__code__", None)
    if code is None or not any(code is known for known in _CODES):  # identical, not equal
        return None
    cells = dict(zip(code.co_freevars, method.__closure__ or (), strict=False))
    names = cells["state_attr_names"].cell_contents
    if type(names) is not tuple or not all(type(name) is str for name in names):
        return None
    return names
