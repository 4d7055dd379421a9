"""Whether a class's ``__setstate__`` is the one attrs generates, and which fields it sets.

attrs gives slotted classes a ``__setstate__`` that takes the state as a dict (it sets each of
the class's fields present in the dict, in field order) or as a tuple (it sets the fields in
field order from the tuple's items). When a checkpoint's field names are exactly the class's
fields in order, both set the same fields to the same values, so the reader passes the values
as a tuple and skips building a dict per object (a fifth of the time spent building a
checkpoint's objects).

attrs' function is recognised by its code object, which all classes share, and the field names
are read from its closure: nothing here guesses. At import, a probe class checks that the
tuple form behaves as described; if a future attrs changes it, :func:`attrs_field_names`
returns ``None`` for every class and the reader passes dicts as before.
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


def _setstate_code() -> CodeType | None:
    setstate: Any = vars(_Probe).get("__setstate__")
    code = getattr(setstate, "__code__", None)
    if not isinstance(code, CodeType) or "state_attr_names" not in code.co_freevars:
        return None
    probe = _Probe.__new__(_Probe)
    try:
        setstate(probe, (1, 2))
    except Exception:  # a future attrs that refuses tuples: keep passing dicts
        return None
    return code if (probe.first, probe.second) == (1, 2) else None


_CODE = _setstate_code()


def attrs_field_names(setstate: Any) -> tuple[str, ...] | None:
    """The field names attrs' generated ``__setstate__`` assigns a tuple state to, in order;
    ``None`` when ``setstate`` is another function."""
    code = getattr(setstate, "__code__", None)
    if _CODE is None or code is not _CODE:
        return None
    cells = dict(zip(code.co_freevars, setstate.__closure__ or (), strict=False))
    names = cells["state_attr_names"].cell_contents
    if type(names) is not tuple or not all(type(name) is str for name in names):
        return None
    return names
