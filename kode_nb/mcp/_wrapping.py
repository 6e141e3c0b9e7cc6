"""An MCP server's tool listing as kode_nb tools (see :mod:`kode_nb.mcp.client`).

:func:`wrap_listing` turns each ``mt.Tool`` of a listing into a :class:`~kode_nb.Tool` (category
``mcp``, group ``mcp_<server>``, kind from the annotations, the server's ``inputSchema`` as the
parameters, ``source`` ``mcp:<server>/<mcp name>``). A tool the previous listing had with the
same definition, name and trust is reused as it is (the same object), so re-listing after
``notifications/tools/list_changed`` only replaces the tools that changed.

**Trust.** The annotations are the server's claims: a tool that is not trusted
(``trusted(mcp_name)`` is False) gets ``approval="ask"`` whatever its kind, and the approval
prompt's reason shows what the server claims ("server says: read-only"). Its kind still comes
from the annotations (cards show it), and ``metadata["mcp_annotations"]`` keeps them as sent.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import mcp_types as mt

from kode_nb.errors import ToolDefinitionError
from kode_nb.mcp._convert import claims, kind_from_annotations, served_by_meta, tool_name_for
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
    trusted: Callable[[str], bool] = lambda name: False,
    skipped: dict[str, str] | None = None,
) -> Listed:
    """Wrap ``listing``, reusing the tools of ``previous`` whose definition, name and trust are
    the same. A tool whose ``inputSchema`` is not a usable JSON Schema is left out (its
    arguments could not be checked) and put in ``skipped`` with the reason."""
    listed: Listed = {}
    taken: set[str] = set()
    for item in listing:
        name = base = tool_name_for(item.name)
        n = 2
        while normalize_name(name) in taken:  # two MCP names that normalize alike
            name, n = f"{base[:60]}_{n}", n + 1
        before = previous.get(item.name)
        trust = trusted(item.name)
        if (
            before is not None
            and before[0] == item
            and before[1].name == name
            and (before[1].approval is None) == trust
        ):
            tool = before[1]
        else:
            try:
                tool = _wrap(item, name, server=server, timeout=timeout, call=call, trusted=trust)
            except ToolDefinitionError as exc:
                if skipped is not None:
                    why = str(exc).split("(): ", 1)[-1]  # without the wrapper's own name
                    skipped[item.name] = f"unusable inputSchema ({why})"
                continue
        taken.add(tool.key)
        listed[item.name] = (item, tool)
    return listed


def _wrap(
    item: mt.Tool, name: str, *, server: str, timeout: float | None, call: CallFn, trusted: bool
) -> Tool:
    mcp_name = item.name

    async def call_mcp_tool(arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await call(mcp_name, arguments, ctx)

    ann = item.annotations
    metadata: dict[str, Any] = {
        "mcp_server": server,
        "mcp_tool": mcp_name,
        "mcp_annotations": ann.model_dump(by_alias=True, exclude_none=True) if ann else {},
    }
    if not trusted:
        metadata["approval_reason"] = (
            f"MCP server '{server}' is not trusted (server says: {claims(ann)}); "
            f"trust it with %mcp trust {server} {mcp_name}"
        )
    if item.output_schema is not None:
        metadata["mcp_output_schema"] = item.output_schema
    if (chain := served_by_meta(item)) is not None:
        metadata["mcp_served_by"] = chain
    options: dict[str, Any] = dict(
        name=name,
        description=item.description or "",
        label=item.title or (ann.title if ann is not None else None) or "",
        kind=kind_from_annotations(ann),
        category="mcp",
        groups=(f"mcp_{server}",),
        timeout=timeout,
        can_update_output=True,
        registry=None,
        approval=None if trusted else "ask",
    )
    schema = copy.deepcopy(item.input_schema)
    schema.setdefault("type", "object")
    tool = define_tool(call_mcp_tool, parameters=schema, metadata=metadata, **options)
    return tool.evolve(source=f"mcp:{server}/{mcp_name}")
