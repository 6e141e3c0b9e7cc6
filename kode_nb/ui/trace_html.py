"""A run's :class:`~kode_nb.traces.Trace` as collapsible HTML (``<details>``) and as a text tree.

Every span is one ``<details>``: its summary line holds the kind, the name, the status, the
duration and the tokens; opening it shows what the span recorded (the prompt and the answer of
a run, the response of a model call, the arguments, result and approval events of a tool call)
and its children, so a subagent's run nests under the tool call that ran it. The trace is
redacted when it is recorded (:func:`kode_nb._redact`), and every value is HTML-escaped
here. No widgets: these strings are saved in the notebook and read by nbconvert and nbval.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kode_nb._format import format_duration, format_tokens, shorten
from kode_nb.ui.html import BOX, PRE, clip, esc, status_badge

if TYPE_CHECKING:
    from kode_nb.traces._trace import Span, Trace

__all__ = ["TraceDisplay", "span_tokens", "trace_bundle", "trace_html", "trace_text", "usage_total"]

_ICONS = {"run": "agent", "turn": "", "model_call": "model", "tool_call": "tool"}
_MUTED = "color:var(--jp-ui-font-color2,#666)"
_TEXT_LIMIT = 4000
"""Characters of one value shown in the HTML (the tail is kept; the JSON has everything)."""


def usage_total(
    tokens: tuple[int | None, int | None], usage: Any, *, first: bool
) -> tuple[int | None, int | None]:
    """``tokens`` plus one model call's ``usage``; the first call's counts replace the
    starting zeros, so a server that sends none shows unknown."""
    if first:
        return usage.input_tokens, usage.output_tokens
    return _add(tokens[0], usage.input_tokens), _add(tokens[1], usage.output_tokens)


def _add(a: int | None, b: int | None) -> int | None:
    """``a + b`` where known; ``None`` only when both are unknown."""
    return b if a is None else a if b is None else a + b


def span_tokens(span: Span) -> tuple[int | None, int | None] | None:
    """``(input, output)`` tokens of a model call, or of a run (its own model calls); a count
    the server did not send is ``None``."""
    usage = span.attributes.get("usage")
    if not isinstance(usage, Mapping):
        return None
    return _count(usage.get("input_tokens")), _count(usage.get("output_tokens"))


def _count(value: Any) -> int | None:
    return None if value is None or isinstance(value, bool) else int(value)


def _status(span: Span) -> str:
    status = "ok" if span.status in ("ok", "completed") else span.status
    return status_badge(status, span.status.replace("_", " "))


def _duration(span: Span) -> str:
    return "running" if span.duration is None else format_duration(span.duration, "not run")


def _summary(span: Span) -> str:
    parts = [
        f'<span style="{_MUTED}">{_ICONS.get(span.kind, "")}</span> <b>{esc(span.name)}</b>',
        _status(span),
        f'<span style="{_MUTED}">{esc(_duration(span))}</span>',
    ]
    tokens = span_tokens(span)
    if tokens is not None:
        parts.append(f'<span style="{_MUTED}">{format_tokens(*tokens)}</span>')
    return " ".join(parts)


def _pre(label: str, value: Any) -> str:
    if value is None or value == "" or value == {} or value == []:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)
    return (
        f'<div style="{_MUTED};font-size:11px;margin-top:2px">{esc(label)}</div>'
        f'<pre style="{PRE};max-height:14em">{esc(clip(text, _TEXT_LIMIT))}</pre>'
    )


def _events_html(span: Span) -> str:
    shown = []
    for event in span.events:
        attrs = event.get("attributes") or {}
        name = str(event.get("name", ""))
        if name in (
            "approval_requested",
            "approval_resolved",
            "failed",
            "cancelled",
            "timed_out",
            "step_edit",
            "step_given",
        ):
            extra = ", ".join(f"{k}={v}" for k, v in attrs.items() if v not in (None, "", False))
            shown.append(f"<code>{esc(name)}</code> {esc(extra)}")
    if not shown:
        return ""
    return f'<div style="font-size:12px">{"<br>".join(shown)}</div>'


def _body(span: Span, open_levels: int) -> str:
    a = span.attributes
    parts: list[str] = []
    if span.kind == "run":
        parts.append(
            f'<div style="{_MUTED};font-size:12px">model <code>{esc(a.get("model", ""))}</code>'
            f" · tools {esc(', '.join(a.get('tools') or []) or 'none')}"
            f" · depth {esc(a.get('depth', 0))}</div>"
        )
        parts.append(_pre("prompt", a.get("prompt")))
    elif span.kind == "model_call":
        response = a.get("response") or {}
        parts.append(_pre("text", response.get("text")))
        calls = [f"{c.get('name')}({c.get('arguments')})" for c in response.get("tool_calls") or []]
        parts.append(_pre("tool calls", "\n".join(calls)))
        parts.append(_events_html(span))
    elif span.kind == "tool_call":
        parts.append(_pre("arguments", a.get("arguments")))
        parts.append(_events_html(span))
    if span.error and span.kind != "tool_call":
        parts.append(_pre("error", span.error))
    parts.extend(_span_html(child, open_levels=open_levels) for child in span.children)
    if span.kind == "tool_call":
        result = a.get("result") or {}
        parts.append(_pre(f"result ({result.get('status', '?')})", result.get("text")))
    if span.kind == "run" and "output" in a:
        parts.append(_pre("output", a.get("output")))
    return "".join(parts)


def _span_html(span: Span, *, open_levels: int) -> str:
    opened = " open" if open_levels > 0 and span.kind != "model_call" else ""
    if span.kind == "turn":  # a turn is its children; keep it light
        inner = "".join(_span_html(c, open_levels=open_levels - 1) for c in span.children)
        return (
            f'<details{opened} style="margin-left:10px"><summary>{_summary(span)}</summary>'
            f"{inner}</details>"
        )
    return (
        f'<details{opened} style="margin-left:10px"><summary>{_summary(span)}</summary>'
        f'<div style="margin-left:8px">{_body(span, open_levels - 1)}</div></details>'
    )


def trace_html(trace: Trace, *, open_levels: int = 0) -> str:
    """The whole trace as nested ``<details>`` (the top ``open_levels`` levels open)."""
    root = trace.root
    spans = trace.spans()
    calls = sum(1 for s in spans if s.kind == "tool_call")
    models = sum(1 for s in spans if s.kind == "model_call")
    head = (
        f'<summary><b>Trace</b> <span style="{_MUTED}">{len(spans)} spans · {models} model '
        f"call{'s' if models != 1 else ''} · {calls} tool call{'s' if calls != 1 else ''}"
        f"</span></summary>"
    )
    opened = " open" if open_levels > 0 else ""
    body = _span_html(root, open_levels=open_levels - 1)
    return f'<div style="{BOX}"><details{opened}>{head}{body}</details></div>'


def _line(span: Span) -> str:
    tokens = span_tokens(span)
    text = f"{span.name} [{span.status}] {_duration(span)}"
    if tokens is not None:
        text += f" · {format_tokens(*tokens)}"
    a = span.attributes
    if span.kind == "tool_call":
        args = json.dumps(a.get("arguments", {}), ensure_ascii=False)
        result = (a.get("result") or {}).get("text", "")
        text += f"  {clip(args, 120)} → {shorten(str(result), 100)}"
    return text


TEXT_LINES = 200
"""Lines of the text tree a saved trace output keeps (``text/plain``); the rest is "N more"."""


def trace_text(trace: Trace, *, max_lines: int | None = None) -> str:
    """The trace as an indented tree, one line per span (turn spans folded); past
    ``max_lines`` lines, one "… N more spans" line instead of the rest."""
    lines: list[str] = []
    more = 0
    todo: list[tuple[Span, int]] = [(trace.root, 0)]
    while todo:  # depth first, without recursion (a deep trace cannot overflow)
        span, depth = todo.pop()
        if span.kind != "turn":
            if max_lines is not None and len(lines) >= max_lines:
                more += 1
            else:
                lines.append("  " * depth + _line(span))
        below = depth if span.kind == "turn" else depth + 1
        todo.extend((c, below) for c in reversed(span.children))
    if more:
        lines.append(f"… {more:,} more span{'s' if more != 1 else ''} (the trace viewer shows all)")
    return "\n".join(lines)


def trace_bundle(trace: Trace) -> dict[str, Any]:
    """The trace's static record (``application/vnd.kode-nb.trace+json``), whose HTML fallback
    survives sanitizers, with the text tree's first :data:`TEXT_LINES` lines as ``text/plain``."""
    from kode_nb.ui.records import trace_record

    bundle = trace_record(trace).bundle()
    bundle["text/plain"] = trace_text(trace, max_lines=TEXT_LINES)
    return bundle


class TraceDisplay:
    """Displays a trace: collapsible HTML, and the text tree for plain front ends."""

    def __init__(self, trace: Trace, *, open_levels: int = 6) -> None:
        self.trace = trace
        """The trace shown."""
        self.open_levels = open_levels
        """How many levels start open."""

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return trace_bundle(self.trace)

    def __repr__(self) -> str:
        return trace_text(self.trace)
