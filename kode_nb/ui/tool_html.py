"""Static HTML and text of tools and registries: parameter tables, the tool card, schema
exports per provider, the ``%tools`` table. No widgets (see :mod:`kode_nb.ui.html`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from kode_nb.ui.html import BOX, PRE, TD, esc, fmt_duration, kind_badge, pretty_json

if TYPE_CHECKING:
    from kode_nb.tools._model import Tool
    from kode_nb.tools._registry import ToolRegistry

__all__ = [
    "FORMATS",
    "ParamRow",
    "export_tool",
    "parameter_rows",
    "params_table_html",
    "params_table_text",
    "registry_html",
    "registry_text",
    "schema_block_html",
    "schema_type",
    "tool_html",
    "tool_summary_html",
    "tool_text",
]


# --------------------------------------------------------------------------- schemas


def schema_type(schema: Any) -> str:
    """A short human type for a JSON Schema: ``integer``, ``array[string]``, ``"a" | "b"``."""
    if not isinstance(schema, Mapping) or not schema:
        return "any"
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(schema_type(s) for s in schema[key])
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array":
        return f"array[{schema_type(schema['items'])}]" if "items" in schema else "array"
    if kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
        return f"object[string, {schema_type(schema['additionalProperties'])}]"
    return str(kind) if kind else "any"


class ParamRow(NamedTuple):
    name: str
    type: str
    required: bool
    default: str
    description: str


def parameter_rows(schema: Mapping[str, Any]) -> list[ParamRow]:
    """One row per top-level property of an object schema."""
    required = set(schema.get("required", ()))
    rows = []
    for name, prop in (schema.get("properties") or {}).items():
        prop = prop if isinstance(prop, Mapping) else {}
        default = json.dumps(prop["default"], default=str) if "default" in prop else ""
        rows.append(
            ParamRow(
                name, schema_type(prop), name in required, default, str(prop.get("description", ""))
            )
        )
    return rows


def params_table_html(schema: Mapping[str, Any]) -> str:
    rows = parameter_rows(schema)
    if not rows:
        return '<div style="color:var(--jp-ui-font-color2,#666)">No parameters.</div>'
    head = "".join(
        f'<th style="{TD}">{h}</th>'
        for h in ("parameter", "type", "required", "default", "description")
    )
    body = "".join(
        f'<tr><td style="{TD}"><code>{esc(r.name)}</code></td><td style="{TD}"><code>{esc(r.type)}</code></td>'
        f'<td style="{TD}">{"yes" if r.required else "no"}</td><td style="{TD}"><code>{esc(r.default)}</code></td>'
        f'<td style="{TD}">{esc(r.description)}</td></tr>'
        for r in rows
    )
    return f'<table style="border-collapse:collapse;margin:4px 0"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _text_table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> str:
    table = [header, *rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def params_table_text(schema: Mapping[str, Any]) -> str:
    rows = parameter_rows(schema)
    if not rows:
        return "No parameters."
    return _text_table(
        ("parameter", "type", "required", "default", "description"),
        ((r.name, r.type, "yes" if r.required else "no", r.default, r.description) for r in rows),
    )


# --------------------------------------------------------------------------- tools


FORMATS: Mapping[str, str] = {
    "openai": "OpenAI",
    "openai-strict": "OpenAI strict",
    "anthropic": "Anthropic",
    "gemini": "Gemini",
    "mcp": "MCP",
}
"""Export formats of a tool's schema (as ``%tools show NAME --format`` takes them) -> label."""


def _exporter(fmt: str) -> Callable[[Tool], dict[str, Any]]:
    from kode_nb.tools import _formats as formats

    if fmt == "openai-strict":
        return lambda t: formats.openai_tool(t, strict=True)
    exporter: Callable[[Tool], dict[str, Any]] = getattr(formats, f"{fmt}_tool")
    return exporter


def export_tool(tool: Tool, fmt: str) -> dict[str, Any] | str:
    """The provider dict of ``tool`` in ``fmt``, or an error message if the schema cannot be
    expressed in that format (e.g. a free-form ``dict`` in OpenAI strict mode)."""
    try:
        return _exporter(fmt)(tool)
    except Exception as exc:  # ConfigurationError names the property that cannot be expressed
        return f"Cannot export to {FORMATS[fmt]}: {exc}"


def _meta_line(tool: Tool) -> str:
    parts = [f"category: {tool.category.value}"]
    if tool.groups:
        parts.append("groups: " + ", ".join(tool.groups))
    if tool.timeout is not None:
        parts.append(f"timeout: {tool.timeout:g} s")
    if tool.approval is not None:
        parts.append(f"approval: {tool.approval if isinstance(tool.approval, str) else 'rule'}")
    if tool.mode != "sync":
        parts.append(f"mode: {tool.mode}")
    if tool.inline:
        parts.append("inline")
    if tool.isolation != "thread":
        parts.append(f"isolation: {tool.isolation}")
    return " · ".join(parts)


def tool_summary_html(tool: Tool) -> str:
    """Name, kind badge, metadata, description and the parameter table."""
    return (
        f'<div><b style="font-size:14px">{esc(tool.name)}</b> {kind_badge(tool.kind.value)} '
        f'<span style="color:var(--jp-ui-font-color2,#666)">{esc(_meta_line(tool))}</span></div>'
        f'<div style="margin:4px 0;white-space:pre-wrap">{esc(tool.description)}</div>'
        + params_table_html(tool.parameters)
    )


def schema_block_html(tool: Tool, fmt: str) -> str:
    data = export_tool(tool, fmt)
    body = data if isinstance(data, str) else pretty_json(data, redacted=False)
    return f'<pre style="{PRE}">{esc(body)}</pre>'


def tool_html(tool: Tool) -> str:
    """The static tool card: summary plus each export format in a collapsible section."""
    sections = "".join(
        f'<details style="margin-left:1em"><summary>{esc(label)}</summary>{schema_block_html(tool, f)}</details>'
        for f, label in FORMATS.items()
    )
    return (
        f'<div style="{BOX}">{tool_summary_html(tool)}'
        f"<details><summary>JSON schema the model sees</summary>{sections}</details></div>"
    )


def tool_text(tool: Tool) -> str:
    head = f"{tool.name} [{tool.kind.value}]  {_meta_line(tool)}"
    return f"{head}\n{tool.description}\n{params_table_text(tool.parameters)}"


def tool_rows(
    registry: ToolRegistry, tools: Iterable[Tool], stuck: Mapping[str, int] | None = None
) -> list[tuple[str, ...]]:
    """One row per tool; with ``stuck`` (tool name -> stuck worker threads, from
    ``Executor.stuck()``) a last cell says ``N stuck`` (empty for tools with none)."""
    rows: list[tuple[str, ...]] = []
    for t in tools:
        s = registry.stats(t.name)
        mean = fmt_duration(s.mean) if s.calls else "—"
        rows.append(
            (
                t.name,
                t.kind.value,
                t.category.value,
                ", ".join(t.groups),
                str(s.calls),
                str(s.failures),
                mean,
            )
        )
        if stuck is not None:
            n = stuck.get(t.name, 0)
            rows[-1] += (f"{n} stuck" if n else "",)
    return rows


_REGISTRY_HEADER = ("name", "kind", "category", "groups", "calls", "failures", "mean")


def _header(stuck: Mapping[str, int] | None) -> tuple[str, ...]:
    return (*_REGISTRY_HEADER, "threads") if stuck is not None else _REGISTRY_HEADER


def registry_html(
    registry: ToolRegistry,
    tools: Iterable[Tool] | None = None,
    stuck: Mapping[str, int] | None = None,
) -> str:
    """The tool table; ``stuck`` (``Executor.stuck()``) adds a column when any thread is stuck."""
    stuck = stuck or None
    rows = tool_rows(registry, registry.list() if tools is None else tools, stuck)
    title = f"{len(rows)} tool{'s' if len(rows) != 1 else ''}"
    if registry.name:
        title = f"registry {esc(registry.name)}: {title}"
    if not rows:
        return f'<div style="{BOX}">{title}.</div>'
    head = "".join(f'<th style="{TD}">{h}</th>' for h in _header(stuck))
    body = "".join(
        "<tr>"
        + f'<td style="{TD}"><code>{esc(r[0])}</code></td><td style="{TD}">{kind_badge(r[1])}</td>'
        + "".join(f'<td style="{TD}">{esc(c)}</td>' for c in r[2:])
        + "</tr>"
        for r in rows
    )
    return (
        f'<div style="{BOX}"><div>{title}</div><table style="border-collapse:collapse">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def registry_text(
    registry: ToolRegistry,
    tools: Iterable[Tool] | None = None,
    stuck: Mapping[str, int] | None = None,
) -> str:
    stuck = stuck or None
    rows = tool_rows(registry, registry.list() if tools is None else tools, stuck)
    if not rows:
        return "No tools."
    return _text_table(_header(stuck), rows)
