"""A test MCP server with resources, a resource template and prompts (stdio).

Written for both mcp 1.x (FastMCP) and 2.x (MCPServer).
"""

# No ``from __future__ import annotations``: early mcp 1.x servers need real annotations.
from pydantic import BaseModel

try:  # mcp 2.x
    from mcp.server.mcpserver import Context, MCPServer
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import Context  # type: ignore[attr-defined, no-redef]
    from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[attr-defined, no-redef]

server = MCPServer("library", log_level="WARNING")


@server.resource("book://catalog", name="catalog", mime_type="text/plain")
def catalog() -> str:
    """The books of the library."""
    return "Dune\nEmma"


@server.resource("book://{title}/summary", name="summary")
def summary(title: str) -> str:
    """A book's summary."""
    return f"{title}: a very good book"


@server.prompt()
def review(title: str, tone: str = "kind") -> str:
    """Ask for a review of a book."""
    return f"Write a {tone} review of {title}."


class Loan(BaseModel):
    days: int
    confirm: bool


@server.tool()
async def reserve(title: str, ctx: Context) -> str:
    """Reserve a book; asks the user for how long."""
    result = await ctx.elicit(f"Reserve {title}: for how many days?", Loan)
    if result.action == "accept":
        loan = result.data
        return f"reserved {title} for {loan.days} days" if loan.confirm else "not confirmed"
    return f"no reservation ({result.action})"


@server.tool()
async def index(ctx: Context) -> str:
    """Index the books, reporting progress and logging."""
    await ctx.report_progress(1, 2, "half")
    await ctx.info("indexing")
    await ctx.report_progress(2, 2, "all")
    return "indexed"


@server.tool()
async def summarize(text: str, tokens: int, ctx: Context) -> str:
    """Summarize a text with the client's model (sampling)."""
    import warnings

    from mcp import types

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = await ctx.session.create_message(
                [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))],
                max_tokens=tokens,
                system_prompt="Summarize.",
            )
        except Exception as error:
            return f"sampling refused: {error}"
    return f"summary: {result.content.text}"


if __name__ == "__main__":
    server.run()
