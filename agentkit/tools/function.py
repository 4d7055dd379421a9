"""Tools from Python functions: :func:`~agentkit.tool`, :class:`~agentkit.tools.FunctionTool`,
:class:`~agentkit.tools.StreamingFunctionTool`.

This page documents how a function becomes a tool; the names are imported from ``agentkit``
(``tool``) and :mod:`agentkit.tools` (the others). Their spellings here go in agentkit 0.4.

Everything about a function that a model needs is worked out once, when the tool is made:

* the JSON Schema of its parameters, from the type hints (resolved where the function is
  defined, so ``from __future__ import annotations`` works) and the docstring (Google, reST or
  NumPy style, parsed with ``docstring-parser``);
* a conversion plan: for every parameter a ``cattrs`` structuring hook that checks the JSON value
  and turns it into the annotated type (attrs instances, enum members, tuples, sets...).

A call then only parses the JSON text, runs the prepared hooks and calls the function. An
``async def`` function is run as a task on agentkit's event loop (one per process, in a
thread of its own), and the call waits for it; see :class:`~agentkit.tools.FunctionTool`.

The JSON value accepted for each annotation, and the schema it gets:

==========================================  =============================================
annotation                                  JSON value (schema)
==========================================  =============================================
``str`` / ``int`` / ``float`` / ``bool``    string / integer / number / boolean; an
                                            integer is a valid ``float``, an integral
                                            number (``3.0``) a valid ``int``, a boolean is
                                            neither; unless ``strict=True``, a string that
                                            spells one is accepted too (``"2"``,
                                            ``"2.5"``, ``"true"``), not inside a union
                                            that has a member taking the string as it is
``None``                                    null
no annotation, ``Any``                      anything (``{}``)
``list[X]``, ``Sequence[X]``                array (``items``); a ``list`` is passed
``tuple[X, ...]`` / ``tuple[X, Y]``         array / array of exactly 2 (``prefixItems``)
``set[X]``, ``frozenset[X]``                array (``uniqueItems``; duplicates collapse)
``dict[str, X]``, ``Mapping[str, X]``       object (``additionalProperties``)
``X | Y``, ``Optional[X]``                  ``anyOf``; the most specific member that
                                            accepts the value wins, whatever the order:
                                            literals and enums, bool, int, float, str,
                                            arrays and objects (of attrs classes, the one
                                            with most fields in the value), null, Any; a
                                            number keeps its kind in ``int | float``
``Literal[...]``                            one of the values (``enum``)
``Enum`` subclass                           one of the members' values (``enum``)
attrs class, dataclass, ``TypedDict``       object with the class's fields (defaults kept)
pydantic model (v2)                         the model's ``model_json_schema()``, nested
                                            models in place; converted by
                                            ``model_validate`` (the model's own rules)
``Annotated[X, "text"]``                    as ``X``, described by ``"text"``
``NewType("N", X)``                         as ``X``
==========================================  =============================================
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentkit._lazy import attach

__all__: list[str] = []

if not TYPE_CHECKING:
    __getattr__, __dir__ = attach(
        __name__,
        deprecated={
            "tool": "agentkit.tool",
            "as_tool": "agentkit.tools.as_tool",
            "FunctionTool": "agentkit.tools.FunctionTool",
            "StreamingFunctionTool": "agentkit.tools.StreamingFunctionTool",
        },
    )
