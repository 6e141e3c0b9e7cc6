"""A small MCP server for the kode_nb MCP client tests, written with the SDK's MCPServer.

Usage: ``python toolbox.py [--http [--port N]] [--record FILE] [--name NAME]``

* stdio by default; with ``--http`` it binds 127.0.0.1 on port N (default: a free one), prints
  ``PORT <n>`` on stdout and serves streamable HTTP at ``/mcp``.
* ``--record FILE``: every ``notifications/cancelled`` the server receives, and every tool call
  that gets cancelled, is appended to FILE as one JSON line (the tests read it).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
from typing import Any

import anyio
from _run import run, transport_arguments
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def build(name: str, record: str | None) -> MCPServer:
    def note(entry: dict[str, Any]) -> None:
        if record:
            with open(record, "a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")

    async def record_cancellations(ctx: Any, call_next: Any) -> Any:
        if ctx.method == "notifications/cancelled":
            note({"event": "notifications/cancelled", "params": dict(ctx.params or {})})
        return await call_next(ctx)

    server: MCPServer = MCPServer(name, middleware=[record_cancellations], log_level="ERROR")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    def remove_item(item: str) -> str:
        """Pretend to delete an item."""
        return f"removed {item}"

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def overwrite(item: str, value: str) -> str:
        """Pretend to overwrite an item."""
        return f"{item}={value}"

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    def append_note(note_text: str) -> str:
        """Pretend to append a note (additive only)."""
        return "appended"

    @server.tool()
    async def count(steps: int, ctx: Context) -> str:
        """Count to ``steps``, reporting progress for each step."""
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}")
        return f"counted to {steps}"

    @server.tool()
    def fail(reason: str) -> str:
        """Always fails with ``reason`` (an ``isError`` result)."""
        raise ToolError(reason)

    @server.tool()
    def crash() -> str:
        """Kill the server process in the middle of the call."""
        os._exit(3)

    @server.tool()
    async def hang(label: str = "") -> str:
        """Never return (until cancelled)."""
        note({"event": "tool_started", "label": label})
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            note({"event": "tool_cancelled", "label": label})
            raise
        return "unreachable"

    @server.tool(structured_output=False)
    def picture() -> list[Any]:
        """A caption and a tiny PNG."""
        return ["a pixel", Image(data=PNG, format="png")]

    @server.tool(structured_output=True)
    def stats(values: list[float]) -> dict[str, float]:
        """Min, max and mean of some numbers."""
        return {"min": min(values), "max": max(values), "mean": sum(values) / len(values)}

    @server.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def header(name: str, ctx: Context) -> str:
        """The value of an HTTP request header ("" if absent or not HTTP)."""
        return (ctx.headers or {}).get(name.lower(), "")

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    transport_arguments(parser)
    parser.add_argument("--record")
    parser.add_argument("--name", default="toolbox")
    args = parser.parse_args()
    server = build(args.name, args.record)
    run(server, args)


if __name__ == "__main__":
    main()
