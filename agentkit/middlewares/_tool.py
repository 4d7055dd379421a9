"""The tools the middlewares add: a JSON Schema written by hand, a handler of the parsed arguments.

Eino's tools take arguments whose names are not Python identifiers (grep's ``-A``, ``-i``)
and schemas a function signature cannot say; :class:`SchemaTool` checks the arguments against
the subset of JSON Schema these tools use (object properties of type string, integer,
boolean, array and object; ``required``; ``enum``) and refuses others with
:class:`~agentkit.ToolArgumentsError`, which the agent sends back to the model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from agentkit._middleware import AgentContext
from agentkit.errors import AgentConfigError, ToolArgumentsError
from agentkit.schema import ToolInfo
from agentkit.tools._base import BaseTool

__all__ = ["SchemaTool", "add_tools", "checked_arguments", "object_schema"]

_KINDS: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def object_schema(
    properties: Mapping[str, Mapping[str, Any]], required: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A JSON Schema object with ``properties``, of which ``required`` are required."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {key: dict(value) for key, value in properties.items()},
    }
    if required:
        schema["required"] = list(required)
    return schema


class SchemaTool:
    """A tool with a hand-written schema; ``handler(arguments)`` gets the checked arguments.

    Properties that are absent or ``null`` are left out of the arguments the handler gets.
    """

    __slots__ = ("_handler", "_info")

    def __init__(
        self,
        name: str,
        description: str,
        parameters: dict[str, Any],
        handler: Callable[[dict[str, Any]], str],
    ) -> None:
        self._info = ToolInfo(name=name, description=description, parameters=parameters)
        self._handler = handler

    def info(self) -> ToolInfo:
        """The tool's name, description and parameters."""
        return self._info

    def __repr__(self) -> str:
        return f"SchemaTool({self._info.name!r})"

    def invoke(self, arguments: str, **tool_options: Any) -> str:
        """Check ``arguments`` (JSON text) and run the handler with them."""
        return self._handler(checked_arguments(self._info, arguments))


def checked_arguments(info: ToolInfo, arguments: str) -> dict[str, Any]:
    """``arguments`` parsed and checked against ``info.parameters``.

    Raises:
        ToolArgumentsError: not a JSON object, a required property missing, a property of the
            wrong type or not one of its ``enum`` values.
    """
    name = info.name
    try:
        parsed = json.loads(arguments) if arguments and not arguments.isspace() else {}
    except ValueError as error:
        raise ToolArgumentsError(
            f"{name}: the arguments are not valid JSON ({error}); send a JSON object",
            tool_name=name,
        ) from None
    if not isinstance(parsed, dict):
        raise ToolArgumentsError(
            f"{name}: the arguments must be a JSON object (got {arguments!r})", tool_name=name
        )
    properties: dict[str, Any] = info.parameters.get("properties", {})
    given = {key: value for key, value in parsed.items() if value is not None}
    for key in info.parameters.get("required", ()):
        if key not in given:
            raise ToolArgumentsError(f"{name}: {key!r} is required", tool_name=name)
    for key, value in given.items():
        spec = properties.get(key)
        if spec is not None:
            _check_value(name, key, value, spec)
    return given


def _check_value(tool: str, key: str, value: Any, spec: Mapping[str, Any]) -> None:
    kind = spec.get("type")
    kinds = _KINDS.get(kind) if isinstance(kind, str) else None
    wrong = kinds is not None and (
        not isinstance(value, kinds) or (kind != "boolean" and isinstance(value, bool))
    )
    if wrong:
        raise ToolArgumentsError(
            f"{tool}: {key!r} must be {_article(kind)} {kind} (got {value!r})", tool_name=tool
        )
    enum = spec.get("enum")
    if enum is not None and value not in enum:
        choices = ", ".join(repr(choice) for choice in enum)
        raise ToolArgumentsError(
            f"{tool}: {key!r} must be one of {choices} (got {value!r})", tool_name=tool
        )
    items = spec.get("items")
    if kind == "array" and isinstance(items, Mapping):
        for position, item in enumerate(value):
            _check_value(tool, f"{key}[{position}]", item, items)
    if kind == "object" and isinstance(spec.get("properties"), Mapping):
        for required in spec.get("required", ()):
            if value.get(required) is None:
                raise ToolArgumentsError(f"{tool}: {key}.{required} is required", tool_name=tool)
        for inner, item in value.items():
            inner_spec = spec["properties"].get(inner)
            if inner_spec is not None and item is not None:
                _check_value(tool, f"{key}.{inner}", item, inner_spec)


def _article(kind: object) -> str:
    return "an" if isinstance(kind, str) and kind[:1] in "aeiou" else "a"


def add_tools(context: AgentContext, tools: Iterable[BaseTool], who: str) -> None:
    """Append ``tools`` to the run's tools; a name the agent has already is refused.

    Raises:
        AgentConfigError: the agent has a tool of the same name.
    """
    names = {tool.info().name for tool in context.tools}
    for tool in tools:
        name = tool.info().name
        if name in names:
            raise AgentConfigError(
                f"{who} adds a tool named {name!r} to agent {context.agent_name!r}, which has "
                "one already; rename or remove one of them"
            )
        names.add(name)
        context.tools.append(tool)
