"""A test MCP server that asks for the client's roots, takes resource subscriptions and
reports progress of resource reads and prompts (stdio).

- tool ``roots``: lists the client's roots (``roots/list``), one ``<uri> <name>`` per line;
- ``notifications/roots/list_changed``: logged back to the client as ``roots changed``;
- resource ``note://status`` (subscribable): tool ``write`` sets its text and, when the client
  subscribed to it, sends ``notifications/resources/updated``; its result says which;
- ``resources/read`` and ``prompts/get`` report progress when the client asked for it.

Written for mcp 2.x's low-level server (1.x spells every handler differently).
"""

from __future__ import annotations

import warnings
from typing import Any

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

NOTE = "note://status"
_text = {"value": "idle"}
_subscribed: set[str] = set()


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    empty = {"type": "object", "properties": {}}
    text = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    return types.ListToolsResult(
        tools=[
            types.Tool(name="roots", description="The client's roots.", input_schema=empty),
            types.Tool(name="write", description="Set the note's text.", input_schema=text),
        ]
    )


def _text_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "roots":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the roots capability is deprecated in 2026 drafts
            listed = await ctx.session.list_roots()
        return _text_result("\n".join(f"{root.uri} {root.name or '-'}" for root in listed.roots))
    if params.name == "write":
        _text["value"] = str((params.arguments or {})["text"])
        if NOTE not in _subscribed:
            return _text_result("written; nobody subscribed")
        await ctx.session.send_resource_updated(NOTE)
        return _text_result("written; subscribers notified")
    raise ValueError(f"unknown tool {params.name}")


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(name="status", uri=NOTE)])


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    if str(params.uri) != NOTE:
        raise ValueError(f"no resource {params.uri}")
    await ctx.session.report_progress(1, 2, "reading")
    await ctx.session.report_progress(2, 2, "read")
    return types.ReadResourceResult(
        contents=[types.TextResourceContents(uri=NOTE, text=_text["value"])]
    )


async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
    _subscribed.add(str(params.uri))
    return types.EmptyResult()


async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    _subscribed.discard(str(params.uri))
    return types.EmptyResult()


async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
    return types.ListPromptsResult(prompts=[types.Prompt(name="greet")])


async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    await ctx.session.report_progress(1, None, "filling")
    return types.GetPromptResult(
        messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text="hello"))
        ]
    )


async def roots_changed(ctx: Any, params: Any) -> None:
    await ctx.session.send_log_message("info", "roots changed", logger="desk")


with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # on_roots_list_changed: deprecated in 2026 drafts
    server: Server[Any] = Server(
        "desk",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_list_prompts=list_prompts,
        on_get_prompt=get_prompt,
        on_roots_list_changed=roots_changed,
    )


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
