"""kode_nb tools served over stdio with :func:`kode_nb.mcp.serve_stdio` (for the round-trip test).

Usage: ``python kode_stdio.py`` — serves a read, an edit and a delete tool; edits are approved by
an AutoApprove executor, deletes are refused (the default policy without an approver).
"""

from __future__ import annotations

import asyncio

from kode_nb import AutoApprove, Executor, Policy, ToolRegistry, define_tool
from kode_nb.mcp import serve_stdio


def main() -> None:
    registry = ToolRegistry(name="served")

    def read_note(name: str) -> str:
        """Read the note called ``name``."""
        return f"contents of {name}"

    def write_note(name: str, text: str) -> dict[str, int]:
        """Write ``text`` to the note called ``name``."""
        return {"written": len(text)}

    def delete_note(name: str) -> str:
        """Delete the note called ``name``."""
        return "deleted"

    define_tool(read_note, kind="read", registry=registry)
    define_tool(write_note, kind="edit", registry=registry)
    define_tool(delete_note, kind="delete", registry=registry)
    policy = Policy(overrides={"delete_note": "deny"})
    executor = Executor(registry, policy=policy, approver=AutoApprove())
    asyncio.run(serve_stdio(registry, executor=executor))


if __name__ == "__main__":
    main()
