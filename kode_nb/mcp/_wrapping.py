"""An MCP server's tool listing as kode_nb tools (see :mod:`kode_nb.mcp.client`).

:func:`wrap_listing` turns each ``mt.Tool`` of a listing into a :class:`~kode_nb.Tool` (category
``mcp``, group ``mcp_<server>``, kind from the annotations, the server's ``inputSchema`` as the
parameters, ``source`` ``mcp:<server>/<mcp name>``). A tool the previous listing had with the
same definition and name is reused as it is (the same object), so re-listing after
``notifications/tools/list_changed`` only replaces the tools that changed.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import mcp_types as mt

from kode_nb.errors import ToolDefinitionError
from kode_nb.mcp._convert import kind_from_annotations, served_by_meta, tool_name_for
from kode_nb.tools._define import define_tool
from kode_nb.tools._model import Tool
from kode_nb.types import ToolContext, ToolResult, normalize_name

__all__ = ["CallFn", "Listed", "wrap_listing"]

log = logging.getLogger("kode_nb.mcp")

CallFn = Callable[[str, dict[str, Any], ToolContext], Awaitable[ToolResult]]
"""``call(mcp_name, arguments, ctx)``: makes the call on the server."""

Listed = dict[str, tuple[mt.Tool, Tool]]
"""A listing by MCP tool name: the server's definition and its wrapped tool."""


def wrap_listing(
    listing: Iterable[mt.Tool],
    previous: Mapping[str, tuple[mt.Tool, Tool]],
    *,
    server: str,
    timeout: float | None,
    call: CallFn,
) -> Listed:
    """Wrap ``listing``, reusing the tools of ``previous`` whose definition and name are the same."""
    listed: Listed = {}
    taken: set[str] = set()
    for item in listing:
        name = base = tool_name_for(item.name)
        n = 2
        while normalize_name(name) in taken:  # two MCP names that normalize alike
            name, n = f"{base[:60]}_{n}", n + 1
        before = previous.get(item.name)
        if before is not None and before[0] == item and before[1].name == name:
            tool = before[1]
        else:
            tool = _wrap(item, name, server=server, timeout=timeout, call=call)
        taken.add(tool.key)
        listed[item.name] = (item, tool)
    return listed


def _wrap(item: mt.Tool, name: str, *, server: str, timeout: float | None, call: CallFn) -> Tool:
    mcp_name = item.name

    async def call_mcp_tool(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await call(mcp_name, arguments, ctx)

    ann = item.annotations
    metadata: dict[str, Any] = {
        "mcp_server": server,
        "mcp_tool": mcp_name,
        "mcp_annotations": ann.model_dump(by_alias=True, exclude_none=True) if ann else {},
    }
    if item.output_schema is not None:
        metadata["mcp_output_schema"] = item.output_schema
    if (chain := served_by_meta(item)) is not None:
        metadata["mcp_served_by"] = chain
    options: dict[str, Any] = dict(
        name=name, description=item.description or "",
        label=item.title or (ann.title if ann is not None else None) or "",
        kind=kind_from_annotations(ann), category="mcp", groups=(f"mcp_{server}",),
        timeout=timeout, can_update_output=True, registry=None,
    )  # fmt: skip
    schema = copy.deepcopy(item.input_schema)
    schema.setdefault("type", "object")
    try:
        tool = define_tool(call_mcp_tool, parameters=schema, metadata=metadata, **options)
    except ToolDefinitionError as exc:
        log.warning("MCP server %r: tool %r has an unusable inputSchema (%s); its arguments "
                    "are checked to be an object only", server, mcp_name, exc)  # fmt: skip
        metadata["mcp_schema_problem"] = str(exc)
        tool = define_tool(
            call_mcp_tool, parameters={"type": "object"}, metadata=metadata, **options
        )
    return tool.evolve(source=f"mcp:{server}/{mcp_name}")
