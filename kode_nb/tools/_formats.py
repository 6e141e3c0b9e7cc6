"""Provider exports of a tool: OpenAI (plain and strict), Anthropic, Gemini and MCP.

``openai_tool(tool, strict=True)`` and ``gemini_tool`` rewrite the schema with
:mod:`kode_nb.tools._schema_dialects` (its docstring lists each provider's rules); Anthropic and MCP
get the schema as it is. Every function deep-copies: the tool's own schema is never modified.
Root schemas must be objects (all four providers require it); anything else raises
ConfigurationError. A tool without a description gets no ``description`` key.

MCP annotations (hints, derived from kind and category; ``metadata["mcp_annotations"]`` wins):

================  ==============================================================================
readOnlyHint      kind read, search, think or fetch (they do not change the environment)
destructiveHint   kind edit, delete, move or execute (the mutating kinds)
idempotentHint    read-only kinds, and delete (a second identical call has no further effect)
openWorldHint     category network or mcp, or kind fetch (they reach outside the kernel)
================  ==============================================================================
"""

from __future__ import annotations

import copy
from typing import Any

from kode_nb.tools._model import Tool
from kode_nb.tools._schema_dialects import (
    GEMINI_KEYS,
    check_root,
    drop_strict_nulls,
    gemini_schema,
    openai_strict_schema,
)
from kode_nb.types import MUTATING_KINDS, ToolCategory, ToolKind

__all__ = [
    "GEMINI_KEYS",
    "anthropic_tool",
    "drop_strict_nulls",
    "gemini_schema",
    "gemini_tool",
    "mcp_annotations",
    "mcp_tool",
    "openai_strict_schema",
    "openai_tool",
]

Schema = dict[str, Any]

_READ_ONLY = frozenset({ToolKind.READ, ToolKind.SEARCH, ToolKind.THINK, ToolKind.FETCH})


# --------------------------------------------------------------------------- tool exports


def openai_tool(tool: Tool, *, strict: bool = False) -> Schema:
    """``{"type": "function", "function": {...}}`` for OpenAI chat completions."""
    params = _root(tool)
    function: Schema = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    if strict:
        function["parameters"] = openai_strict_schema(params, tool=tool.name)
        function["strict"] = True
    else:
        function["parameters"] = params
    return {"type": "function", "function": function}


def anthropic_tool(tool: Tool) -> Schema:
    """``{"name", "description", "input_schema"}`` for the Anthropic Messages API."""
    out: Schema = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["input_schema"] = _root(tool)
    return out


def gemini_tool(tool: Tool) -> Schema:
    """A Gemini function declaration ``{"name", "description", "parameters"}``."""
    out: Schema = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    params = gemini_schema(_root(tool), tool=tool.name)
    if params.get("properties"):
        out["parameters"] = params
    return out


def mcp_tool(tool: Tool) -> Schema:
    """An MCP ``Tool`` (``tools/list`` entry) with annotations."""
    out: Schema = {"name": tool.name, "title": tool.label}
    if tool.description:
        out["description"] = tool.description
    out["inputSchema"] = _root(tool)
    out["annotations"] = mcp_annotations(tool)
    return out


def mcp_annotations(tool: Tool) -> Schema:
    """MCP behaviour hints for ``tool`` (see the module docstring for the rules)."""
    read_only = tool.kind in _READ_ONLY
    hints: Schema = {
        "title": tool.label,
        "readOnlyHint": read_only,
        "destructiveHint": tool.kind in MUTATING_KINDS,
        "idempotentHint": read_only or tool.kind is ToolKind.DELETE,
        "openWorldHint": tool.category in (ToolCategory.NETWORK, ToolCategory.MCP)
        or tool.kind is ToolKind.FETCH,
    }
    override = tool.metadata.get("mcp_annotations")
    if isinstance(override, dict):
        hints.update(override)
    return hints


def _root(tool: Tool) -> Schema:
    return check_root(copy.deepcopy(tool.parameters), tool.name)
