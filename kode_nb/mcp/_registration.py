"""Putting an MCP server's tools into a registry, with the server's name as prefix on clashes.

A wrapped tool's ``source`` is ``mcp:<server>/<mcp tool name>``, so the registry can tell this
server's tools (replaced in place when registered again) from everyone else's (a clash). A tool
registered before with the same name and fields is left alone (no ``replaced`` change).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from kode_nb.mcp._convert import tool_name_for
from kode_nb.tools._model import Tool
from kode_nb.tools._registry import ToolRegistry

__all__ = ["register_tools", "unregister_tools"]


def _own(server: str) -> str:
    return f"mcp:{server}/"


def register_tools(
    tools: Iterable[Tool], registry: ToolRegistry, server: str, prefix: bool | None
) -> list[Tool]:
    """Register ``tools`` (all or none) and drop this server's tools it no longer lists;
    returns them as registered.

    ``prefix=None``: ``<server>_<name>`` only for a name another tool holds (and for a tool
    that was registered prefixed before, so names stay stable); ``True``: always; ``False``:
    never (a clash raises :class:`~kode_nb.DuplicateToolError`).
    """
    previous = {t.source: t for t in registry.list() if t.source.startswith(_own(server))}
    chosen: list[Tool] = []
    for tool in tools:
        before = previous.get(tool.source)
        if prefix is None:
            holder = registry.get(tool.name)
            clash = holder is not None and holder.source != tool.source
            use = clash or (before is not None and before.key != tool.key)
        else:
            use = prefix
        if use:
            name = tool_name_for(str(tool.metadata["mcp_tool"]), prefix=server)
            tool = tool.evolve(name=name)
        if before is not None and _same(before, tool):
            tool = before  # unchanged: left as it is
        chosen.append(tool)
    registry.register_many(t for t in chosen if t is not previous.get(t.source))
    kept = {t.key for t in chosen}
    for old in previous.values():  # renamed, or no longer listed by the server
        if old.key not in kept:
            registry.unregister(old.name)
    return chosen


def _same(old: Tool, new: Tool) -> bool:
    """``old`` is ``new`` in all but identity (the same wrapped tool, named the same)."""
    return all(getattr(old, f.name) == getattr(new, f.name) for f in dataclasses.fields(Tool))


def unregister_tools(registry: ToolRegistry, server: str) -> list[str]:
    """Remove every tool of ``server`` from ``registry``; returns their names."""
    removed: list[str] = []
    for tool in registry.list():
        if tool.source.startswith(_own(server)) and registry.unregister(tool.name) is not None:
            removed.append(tool.name)
    return removed
