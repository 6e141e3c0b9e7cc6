"""An MCP server whose tool list changes, written with the SDK's MCPServer (stdio or HTTP).

Usage: ``python changing.py [--http [--port N]] [--generation-file PATH]`` (HTTP: prints
``PORT <n>``, serves ``/mcp``).

It starts with ``echo``, ``stable``, ``old_tool`` and ``tweak_me``, and these tools change it,
each time sending ``notifications/tools/list_changed`` (``ctx.session.send_tool_list_changed()``):

* ``change(burst)``: adds ``new_tool``, removes ``old_tool``, redefines ``tweak_me`` (another
  description, a read-only hint), then sends the notification ``burst`` times in a row;
* ``break_listing()`` / ``fix_listing()``: ``tools/list`` answers with an error / works again;
* ``die_on_listing()``: adds ``never_seen``; the process exits when it is next asked to list.

``listings()`` says how many ``tools/list`` requests the server has answered, ``pid()`` the
process id, and ``crash()`` exits the process (a restart then lists other tools when the
``--generation-file`` changed meanwhile: with it, the server also lists ``gen_<word>``, ``<word>``
being the file's text when the process started).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from _run import run, transport_arguments
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import INTERNAL_ERROR, ToolAnnotations


def build(generation_file: str | None = None) -> MCPServer:
    state = {"listings": 0, "broken": False, "dying": False}

    async def watch_listings(ctx: Any, call_next: Any) -> Any:
        if ctx.method == "tools/list":
            if state["dying"]:
                os._exit(4)
            if state["broken"]:
                raise MCPError(code=INTERNAL_ERROR, message="the tool catalogue is being rebuilt")
            state["listings"] += 1
        return await call_next(ctx)

    server: MCPServer = MCPServer("changing", middleware=[watch_listings], log_level="ERROR")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def stable() -> str:
        """Never changes."""
        return "stable"

    @server.tool()
    def old_tool() -> str:
        """Removed by change()."""
        return "old"

    def tweak_me(x: int) -> int:
        """The first version."""
        return x

    server.add_tool(tweak_me)

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def listings() -> int:
        """How many tools/list requests the server has answered."""
        return int(state["listings"])

    def new_tool(word: str) -> str:
        """Added by change()."""
        return f"new:{word}"

    def tweak_me_again(x: int) -> int:
        """The second version."""
        return x * 2

    @server.tool()
    async def change(ctx: Context, burst: int = 1) -> str:
        """Change the tool list and say so ``burst`` times."""
        server.add_tool(new_tool)
        server.remove_tool("old_tool")
        server.remove_tool("tweak_me")
        server.add_tool(
            tweak_me_again, name="tweak_me", annotations=ToolAnnotations(read_only_hint=True)
        )
        for _ in range(burst):
            await ctx.session.send_tool_list_changed()
        return "changed"

    @server.tool()
    async def break_listing(ctx: Context) -> str:
        """Make tools/list fail, and say the list changed."""
        state["broken"] = True
        await ctx.session.send_tool_list_changed()
        return "broken"

    @server.tool()
    async def fix_listing(ctx: Context) -> str:
        """Make tools/list work again, with ``new_tool`` added, and say the list changed."""
        state["broken"] = False
        server.add_tool(new_tool)
        await ctx.session.send_tool_list_changed()
        return "fixed"

    def never_seen() -> str:
        """Added just before the server dies."""
        return "never"

    @server.tool()
    async def die_on_listing(ctx: Context) -> str:
        """Add a tool, say so, and exit when asked for the list."""
        server.add_tool(never_seen)
        state["dying"] = True
        await ctx.session.send_tool_list_changed()
        return "dying"

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool()
    def crash() -> str:
        """Exit the process at once."""
        os._exit(3)

    if generation_file is not None:
        word = Path(generation_file).read_text(encoding="utf-8").strip()

        def generation() -> str:
            """Made at start from the generation file."""
            return word

        server.add_tool(generation, name=f"gen_{word}")
    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    transport_arguments(parser)
    parser.add_argument("--generation-file")
    args = parser.parse_args()
    server = build(args.generation_file)
    run(server, args)


if __name__ == "__main__":
    main()
