"""A small MCP server for notebooks/05-mcp.ipynb, written with the MCP SDK's ``MCPServer``.

Run over stdio by an MCP client: ``python mcp_demo_server.py``. It keeps a few notes in memory:

* ``word_count(text)`` — read-only (``readOnlyHint``): counts words;
* ``count_slowly(steps, delay)`` — reports progress at each step (``notifications/progress``);
* ``forget_note(title)`` — destructive (``destructiveHint``, ``idempotentHint``): deletes a note.
"""

from __future__ import annotations

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

server = MCPServer(
    "demo-notes", instructions="A demo server: counts words, counts slowly, forgets notes."
)
NOTES = {"groceries": "milk, eggs", "todo": "write the demo"}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def count_slowly(steps: int, ctx: Context, delay: float = 0.2) -> str:
    """Count to ``steps``, reporting progress after each step."""
    for i in range(1, steps + 1):
        await anyio.sleep(delay)
        await ctx.report_progress(i, steps, f"step {i} of {steps}")
    return f"counted to {steps}"


@server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
def forget_note(title: str) -> str:
    """Delete a note by its title."""
    if NOTES.pop(title, None) is None:
        return f"there was no note {title!r}"
    return f"forgot {title!r}; notes left: {', '.join(sorted(NOTES)) or 'none'}"


if __name__ == "__main__":
    server.run("stdio")
