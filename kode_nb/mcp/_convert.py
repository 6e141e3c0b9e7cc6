"""Conversions between MCP and kode_nb: tool names, annotations → kinds, results, progress.

Kinds from MCP annotations (the hints are the server's claims; they only choose a default, and
only for a trusted server or tool: an untrusted one asks whatever it claims, see
:mod:`kode_nb.mcp.config`):

=====================================================  ============  ========================
annotations                                            kind          asks when trusted?
=====================================================  ============  ========================
``readOnlyHint: true``                                 ``read``      no
``destructiveHint: true`` and ``idempotentHint: true``  ``delete``    yes
``destructiveHint: true``                              ``edit``      yes
``destructiveHint: false`` (additive updates only)     ``edit``      yes
none of these (no hints at all)                        ``execute``   yes
=====================================================  ============  ========================

This mirrors :func:`kode_nb.tools._formats.mcp_annotations`: a kode_nb tool served over MCP and
imported back keeps read/edit/delete, other mutating kinds stay mutating, the read-only kinds
come back as ``read``, and ``other`` (exported as "not read-only, not destructive") comes back
as ``edit``: an explicit ``readOnlyHint: false`` is taken at its word. The server's original annotations are kept in
``Tool.metadata["mcp_annotations"]`` (re-exports use them as they are).

Results: text → :class:`~kode_nb.TextBlock`, images → :class:`~kode_nb.ImageBlock`,
``structuredContent`` → :class:`~kode_nb.JsonBlock` (replacing a text block that only repeats it
as JSON, which the spec asks servers to send; a text block saying something else is kept and the
structured data goes to ``details``). Audio, embedded resources and resource links become short
text descriptions (text resources: their text; image blobs: images).

Served by: kode_nb's server lists each tool with ``_meta["kode-nb/served-by"]``, the ids of the
kode_nb servers it passed through (itself last), and the client keeps that list in
``Tool.metadata["mcp_served_by"]`` (:func:`served_by`), so a server can tell — and not serve —
the copies of its own tools (a notebook connected to its own endpoint, two notebooks connected
to each other): served back, each change would come round again, renamed, forever.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from typing import Any

import mcp_types as mt

from kode_nb.tools._model import Tool
from kode_nb.types import ContentBlock, ImageBlock, JsonBlock, TextBlock, ToolKind, ToolResult

__all__ = [
    "SERVED_BY",
    "from_mcp_result",
    "claims",
    "kind_from_annotations",
    "progress_text",
    "served_by",
    "served_by_meta",
    "to_mcp_result",
    "tool_name_for",
]

_INVALID = re.compile(r"[^A-Za-z0-9_-]+")

SERVED_BY = "kode-nb/served-by"
"""The ``_meta`` key of a listed tool: the kode_nb servers it was served by (see above)."""


def served_by(tool: Tool) -> tuple[str, ...]:
    """The ids of the kode_nb servers ``tool`` came through (empty: none, or not from MCP)."""
    chain = tool.metadata.get("mcp_served_by")
    return tuple(chain) if isinstance(chain, (list, tuple)) else ()


def served_by_meta(item: mt.Tool) -> tuple[str, ...] | None:
    """The served-by list an MCP tool was listed with, if it has a well-formed one."""
    chain = (item.meta or {}).get(SERVED_BY)
    if isinstance(chain, list) and all(isinstance(i, str) for i in chain):
        return tuple(chain)
    return None


def kind_from_annotations(annotations: mt.ToolAnnotations | None) -> ToolKind:
    """The kode_nb kind for a tool with these MCP annotations (table in the module docstring)."""
    if annotations is None:
        return ToolKind.EXECUTE
    if annotations.read_only_hint is True:
        return ToolKind.READ
    if annotations.destructive_hint is True:
        return ToolKind.DELETE if annotations.idempotent_hint is True else ToolKind.EDIT
    if annotations.destructive_hint is False:
        return ToolKind.EDIT
    return ToolKind.EXECUTE


def claims(annotations: mt.ToolAnnotations | None) -> str:
    """What a server's annotations claim, in words: ``"read-only"``, ``"destructive,
    idempotent"``, ``"no hints"``."""
    if annotations is None:
        return "no hints"
    said = []
    if annotations.read_only_hint is not None:
        said.append("read-only" if annotations.read_only_hint else "not read-only")
    if annotations.destructive_hint is not None:
        said.append("destructive" if annotations.destructive_hint else "not destructive")
    if annotations.idempotent_hint:
        said.append("idempotent")
    if annotations.open_world_hint is not None:
        said.append("open world" if annotations.open_world_hint else "closed world")
    return ", ".join(said) or "no hints"


def tool_name_for(mcp_name: str, prefix: str | None = None) -> str:
    """A valid kode_nb tool name for an MCP tool name (which may hold ``.``, ``/``, 128 chars).

    Invalid characters become ``_``; a name not starting with a letter, or ``prefix`` when
    given, gets ``PREFIX_`` in front; names over 64 characters are shortened with a hash.
    """
    base = _INVALID.sub("_", mcp_name).strip("_") or "tool"
    if prefix:
        base = f"{prefix}_{base}"
    elif not base[0].isalpha():
        base = f"t_{base}"
    if len(base) > 64:
        digest = hashlib.sha1(mcp_name.encode("utf-8")).hexdigest()[:8]
        base = f"{base[:55].rstrip('_-')}_{digest}"
    return base


def progress_text(progress: float, total: float | None, message: str | None) -> str:
    """One readable line per MCP progress notification: ``"[3/5] message\\n"``."""
    done = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
    return f"[{done}] {message}\n" if message else f"[{done}]\n"


# --------------------------------------------------------------------------- MCP → kode_nb


def from_mcp_result(
    result: mt.CallToolResult, *, server: str, tool: str, mcp_tool: str
) -> ToolResult:
    """A :class:`~kode_nb.ToolResult` for a ``tools/call`` result (``isError`` → an error)."""
    blocks: list[ContentBlock] = [_block(item) for item in result.content]
    structured = result.structured_content
    details: dict[str, Any] = {"server": server, "tool": mcp_tool}
    if structured is not None:
        repeats = [
            i
            for i, b in enumerate(blocks)
            if isinstance(b, TextBlock) and _same_json(b.text, structured)
        ]
        if repeats or not any(isinstance(b, TextBlock) for b in blocks):
            first = repeats[0] if repeats else len(blocks)
            blocks = [b for i, b in enumerate(blocks) if i not in repeats]
            blocks.insert(first, JsonBlock(data=structured))
        details["structured_content"] = structured
    if result.meta:
        details["meta"] = result.meta
    if result.is_error:
        if not blocks:
            blocks = [TextBlock(text=f"MCP tool '{mcp_tool}' on server '{server}' failed")]
        return ToolResult(
            content=tuple(blocks),
            details=details,
            is_error=True,
            status="error",
            tool=tool,
            error_type="McpToolError",
        )
    if not blocks:
        blocks = [TextBlock(text="(no output)")]
    return ToolResult(content=tuple(blocks), details=details, tool=tool)


def _same_json(text: str, data: Any) -> bool:
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        return bool(json.loads(text) == data)
    except ValueError:
        return False


def _block(item: mt.ContentBlock) -> ContentBlock:
    if isinstance(item, mt.TextContent):
        return TextBlock(text=item.text)
    if isinstance(item, mt.ImageContent):
        return ImageBlock(data=item.data, mime_type=item.mime_type)
    if isinstance(item, mt.AudioContent):
        return TextBlock(text=f"[audio: {item.mime_type}, {_b64_size(item.data)} bytes]")
    if isinstance(item, mt.EmbeddedResource):
        res = item.resource
        if isinstance(res, mt.TextResourceContents):
            return TextBlock(text=res.text)
        mime = res.mime_type or "application/octet-stream"
        if mime.startswith("image/"):
            return ImageBlock(data=res.blob, mime_type=mime)
        return TextBlock(text=f"[resource {res.uri}: {mime}, {_b64_size(res.blob)} bytes]")
    # a resource link
    about = f": {item.description}" if item.description else ""
    return TextBlock(text=f"[resource link {item.name} <{item.uri}>{about}]")


def _b64_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return 0


# --------------------------------------------------------------------------- kode_nb → MCP


def to_mcp_result(result: ToolResult) -> mt.CallToolResult:
    """A ``tools/call`` result for a kode_nb result (JSON blocks as text; one JSON object also
    as ``structuredContent``)."""
    content: list[mt.ContentBlock] = []
    objects: list[Any] = []
    for block in result.content:
        if isinstance(block, TextBlock):
            content.append(mt.TextContent(text=block.text))
        elif isinstance(block, ImageBlock):
            content.append(mt.ImageContent(data=block.data, mime_type=block.mime_type))
        else:
            content.append(
                mt.TextContent(text=json.dumps(block.data, ensure_ascii=False, default=str))
            )
            objects.append(block.data)
    structured = objects[0] if len(objects) == 1 and isinstance(objects[0], dict) else None
    return mt.CallToolResult(
        content=content, structured_content=structured, is_error=result.is_error
    )
