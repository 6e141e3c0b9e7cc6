"""The HTML and text fallbacks of static records (:mod:`kode_nb.ui.records`), from their data.

The HTML must read the same after a sanitizer has removed every ``style=`` attribute (JupyterLab
for an untrusted notebook, GitHub, nbviewer): structure comes from semantic tags (``<details>``,
``<summary>``, ``<table>``, ``<pre>``, ``<code>``, ``<b>``) and states from plain words and
emoji; ``class`` attributes are only hooks for optional styling. Every value is escaped, and
sizes are bounded: long texts are clipped, and a big trace shows its first :data:`MAX_SPANS`
spans and how many more there are (the JSON in the record has them all).
"""

from __future__ import annotations

import html
import json
from collections.abc import Mapping
from typing import Any

from kode_nb._format import format_cost, format_duration, format_run_tokens, format_tokens

__all__ = [
    "MAX_SPANS",
    "approval_html",
    "approval_text",
    "count_of",
    "call_html",
    "call_text",
    "card_html",
    "markdown",
    "run_html",
    "run_text",
    "table_html",
    "table_text",
    "trace_html",
    "trace_text",
]

MAX_SPANS = 40
"""Spans of a trace drawn in its HTML; the others are summarized as "N more"."""
# Status marks are symbols common text fonts have (no emoji: a headless browser or a plain
# terminal shows those as empty boxes).
TEXT_CHARS = 4_000
"""Characters of one value shown in the HTML (the record's JSON has the whole value)."""
FOLD_CHARS = 120
"""Arguments longer than this (or on several lines) are folded in a ``<details>``."""

STATUS_ICONS = {
    "ok": "✔",
    "completed": "✔",
    "error": "✘",
    "invalid": "✘",
    "denied": "✘",
    "not_found": "✘",
    "timeout": "⚠",
    "time_limit": "⚠",
    "max_turns": "⚠",
    "cancelled": "■",
    "interrupted": "■",
    "running": "…",
}
_DECISIONS = {
    "approved": "✔ Approved",
    "always_allowed": "✔ Always allowed",
    "auto": "✔ Approved automatically",
    "denied": "✘ Denied",
    "cancelled": "■ Cancelled before a decision",
}


def count_of(n: int, noun: str) -> str:
    """``"1 message"``, ``"3 messages"``: a count with its noun (plural by an added s)."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def _clip(text: str, limit: int = TEXT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit:,} more characters]"


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


def _pre(text: str) -> str:
    return f"<pre>{_esc(_clip(text))}</pre>"


def _status(status: str) -> str:
    icon = STATUS_ICONS.get(status, "•")
    return f"{icon} {status.replace('_', ' ')}"


def _tokens(usage: Mapping[str, Any] | None) -> str:
    """A span's tokens: "tokens unknown" when its server sent no usage (never 0)."""
    usage = usage or {}
    return format_tokens(usage.get("input_tokens"), usage.get("output_tokens"))


def _span_tokens(usage: Mapping[str, Any] | None) -> str:
    """Tokens of a span that may have none (a tool call): "" unless it recorded usage."""
    return _tokens(usage) if usage else ""


def _cost_of(data: Mapping[str, Any], key: str = "cost") -> str:
    return format_cost(data[key]) if key in data else ""


def _line(*parts: str) -> str:
    return " · ".join(p for p in parts if p)


def markdown(text: str) -> str:
    """``text`` rendered from markdown (raw HTML in it escaped), the same at every nesting level."""
    try:
        import mistune

        render = mistune.create_markdown(escape=True, plugins=["table", "strikethrough"])
        return f'<div class="kode-markdown">{render(text)}</div>'
    except Exception:  # mistune missing or failed: the text itself is still right
        return _pre(text)


# --------------------------------------------------------------------------- calls


def approval_line(approval: Mapping[str, Any] | None) -> str:
    """ "Approved", "Denied: reason", "Always allowed" (empty when nothing was decided)."""
    if not approval:
        return ""
    label = _DECISIONS.get(str(approval.get("decision")), str(approval.get("decision")))
    reason = approval.get("reason")
    return label + (f": {reason}" if reason else "")


def _arguments_html(arguments: Any) -> str:
    if arguments is None or arguments == {}:
        return ""
    compact = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    if len(compact) <= FOLD_CHARS and "\n" not in compact.strip():
        return f"<div>arguments <code>{_esc(compact)}</code></div>"
    text = _json(arguments)
    return f"<details><summary>arguments ({len(text):,} characters)</summary>{_pre(text)}</details>"


def call_head(data: Mapping[str, Any]) -> str:
    return _line(
        f"tool <b>{_esc(data['tool'])}</b> <code>{_esc(data.get('kind') or 'other')}</code>",
        _esc(_status(str(data["status"]))),
        _esc(format_duration(data.get("duration"))),
    )


def _call_body(data: Mapping[str, Any]) -> str:
    parts = []
    decided = approval_line(data.get("approval"))
    if decided:
        parts.append(f'<div class="kode-approval">{_esc(decided)}</div>')
    parts.append(_arguments_html(data.get("arguments")))
    updates = data.get("updates")
    if updates and updates.get("text"):
        cut = " (tail)" if updates.get("truncated") else ""
        parts.append(
            f"<details><summary>streamed output, {updates.get('count', 0)} updates{cut}</summary>"
            f"{_pre(updates['text'])}</details>"
        )
    result = data.get("result") or {}
    text = str(result.get("text") or "")
    if text:
        more = result.get("total_chars", len(text)) - len(text)
        # a subagent's answer (a `think` tool) is markdown, rendered as the run's own answer is
        answer = data.get("kind") == "think" and not result.get("is_error")
        body = markdown(text) if answer else _pre(text)
        parts.append(body + (f"<div>… {more:,} more characters</div>" if more > 0 else ""))
    if result.get("error_type"):
        parts.append(f"<div>error type <code>{_esc(result['error_type'])}</code></div>")
    return "".join(parts)


def call_html(data: Mapping[str, Any]) -> str:
    return (
        f'<div class="kode-record kode-call"><div>{call_head(data)}</div>{_call_body(data)}</div>'
    )


def call_text(data: Mapping[str, Any]) -> str:
    head = f"{data['tool']}: {str(data['status']).replace('_', ' ')}"
    took = format_duration(data.get("duration"))
    head += f" in {took}" if took else ""
    decided = approval_line(data.get("approval"))
    lines = [head] + ([decided] if decided else [])
    text = str((data.get("result") or {}).get("text") or "")
    if text:
        lines.append(_clip(text, 2_000))
    return "\n".join(lines)


def approval_html(data: Mapping[str, Any]) -> str:
    """A decided question (``kode_nb.approval/v1``): the tool, why it asked, the decision and
    the arguments it was about."""
    asked = f" · {_esc(data['asked'])}" if data.get("asked") else ""
    head = (
        f"approval of <b>{_esc(data['tool'])}</b> <code>{_esc(data.get('kind') or 'other')}</code>"
    )
    decided = approval_line(data.get("approval")) or "no decision"
    return (
        f'<div class="kode-record kode-approval-record"><div>{head}{asked}</div>'
        f'<div class="kode-approval">{_esc(decided)}</div>'
        f"{_arguments_html(data.get('arguments'))}</div>"
    )


def approval_text(data: Mapping[str, Any]) -> str:
    decided = approval_line(data.get("approval")) or "no decision"
    return f"approval of {data['tool']} [{data.get('kind') or 'other'}]: {decided}"


# --------------------------------------------------------------------------- runs


def run_tokens(data: Mapping[str, Any]) -> str:
    """A run record's tokens, labelled: this run's own, and with its subagents' when they add
    any (a record saved before ``total_usage`` was recorded shows its own only)."""
    own = data.get("usage") or {}
    total = data.get("total_usage") or {}
    return format_run_tokens(
        own.get("input_tokens"),
        own.get("output_tokens"),
        total.get("input_tokens"),
        total.get("output_tokens"),
    )


def run_head(data: Mapping[str, Any]) -> str:
    turns = data.get("turns", 0)
    model = f" <code>{_esc(data['model'])}</code>" if data.get("model") else ""
    return _line(
        f"agent <b>{_esc(data['agent'])}</b>{model}",
        _esc(_status(str(data["status"]))),
        f"{turns} turn{'s' if turns != 1 else ''}",
        _esc(run_tokens(data)),
        _esc(_cost_of(data)),
        _esc(format_duration(data.get("duration"))),
    )


def run_html(data: Mapping[str, Any]) -> str:
    parts = [f'<div class="kode-record kode-run"><div>{run_head(data)}</div>']
    if data.get("prompt"):
        parts.append(f"<details><summary>prompt</summary>{_pre(str(data['prompt']))}</details>")
    interrupted = data.get("interrupted")
    if interrupted:
        parts.append(
            f"<div>■ <b>interrupted in turn {_esc(interrupted['turn'])}</b>: "
            f"{_esc(interrupted['reason'])}</div>"
        )
    elif data.get("error"):
        parts.append(f"<div><b>{_esc(_status(str(data['status'])))}</b></div>{_pre(data['error'])}")
    if data.get("output") is not None:
        parts.append(f"<div><b>answer</b></div>{markdown(str(data['output']))}")
    for warning in data.get("warnings") or ():
        parts.append(f"<div>⚠ {_esc(warning)}</div>")
    steps = data.get("steps")
    if steps:
        parts.append(f"<div>❚❚ <b>stepped</b>: {_esc(_steps_line(steps))}</div>")
        parts.extend(f"<div>✎ {_esc(line)}</div>" for line in steps.get("changes") or ())
    if data.get("trace"):
        parts.append(trace_html(data["trace"]))
    return "".join(parts) + "</div>"


def run_text(data: Mapping[str, Any]) -> str:
    turns = data.get("turns", 0)
    line = ", ".join(
        p
        for p in (
            f"agent {data['agent']}: {data['status'].replace('_', ' ')}",
            f"{turns} turn{'s' if turns != 1 else ''}",
            run_tokens(data),
            _cost_of(data),
        )
        if p
    )
    steps = data.get("steps")
    if steps:
        line += "\nstepped: " + _steps_line(steps)
        line += "".join(f"\n  {change}" for change in steps.get("changes") or ())
    interrupted = data.get("interrupted")
    if interrupted:
        return f"{line}\ninterrupted in turn {interrupted['turn']}: {interrupted['reason']}"
    if data.get("output") is not None:
        return f"{line}\n{_clip(str(data['output']), 2_000)}"
    return f"{line}\n{data['error']}" if data.get("error") else line


def _steps_line(steps: Mapping[str, Any]) -> str:
    pauses, changes = steps.get("pauses", 0), len(steps.get("changes") or ())
    return (
        f"{pauses} pause{'s' if pauses != 1 else ''}, {changes} change"
        f"{'s' if changes != 1 else ''} by hand"
    )


# --------------------------------------------------------------------------- traces


class _Budget:
    def __init__(self, spans: int) -> None:
        self.left = spans
        self.skipped = 0


def _span_summary(span: Mapping[str, Any]) -> str:
    kind = str(span.get("kind", ""))
    label = {"run": "agent", "model_call": "model", "tool_call": "tool"}.get(kind, kind)
    return _line(
        f"{_esc(label)} <b>{_esc(span.get('name', ''))}</b>",
        _esc(_status(str(span.get("status", "")))),
        _esc(format_duration(span.get("duration"))),
        _esc(_span_tokens((span.get("attributes") or {}).get("usage"))),
        _esc(_span_cost(span)),
    )


def _span_cost(span: Mapping[str, Any]) -> str:
    a = span.get("attributes") or {}
    if span.get("kind") == "tool_call" and "subtree_cost" in a:
        return f"subtree {_tokens(a.get('subtree_usage'))}, " + format_cost(a["subtree_cost"])
    return _cost_of(a) if span.get("kind") in ("model_call", "run") else ""


def _labelled(label: str, value: Any) -> str:
    if value is None or value == "" or value == {} or value == []:
        return ""
    return f"<div><i>{_esc(label)}</i></div>{_pre(_json(value))}"


def _span_body(span: Mapping[str, Any]) -> str:
    a = span.get("attributes") or {}
    kind = span.get("kind")
    parts: list[str] = []
    if kind == "run":
        tools = ", ".join(a.get("tools") or []) or "none"
        parts.append(f"<div>tools: {_esc(tools)}</div>")
        parts.append(_labelled("prompt", a.get("prompt")))
    elif kind == "model_call":
        # the whole request can be large: the fallback shows what this turn added to it
        new = a.get("messages")
        if new:
            estimate = a.get("request_tokens_estimate")
            size = f", request ≈ {estimate} tokens" if isinstance(estimate, int) else ""
            parts.append(_labelled(f"new this turn ({count_of(len(new), 'message')}{size})", new))
        parts.extend(
            f"<div>{_esc(_step_event(e))}</div>"
            for e in span.get("events") or ()
            if e.get("name") == "step_edit"
        )
        response = a.get("response") or {}
        parts.append(_labelled("text", response.get("text")))
        calls = [f"{c.get('name')}({c.get('arguments')})" for c in response.get("tool_calls") or []]
        parts.append(_labelled("tool calls", "\n".join(calls)))
    elif kind == "tool_call":
        parts.append(_labelled("arguments", a.get("arguments")))
        for event in span.get("events") or ():
            if event.get("name") == "approval_resolved":
                ev = event.get("attributes") or {}
                parts.append(f"<div>{_esc(approval_line(_decision(ev)))}</div>")
            elif event.get("name") in ("step_edit", "step_given"):
                parts.append(f"<div>{_esc(_step_event(event))}</div>")
        result = a.get("result") or {}
        parts.append(_labelled(f"result ({result.get('status', '?')})", result.get("text")))
        if "model_text" in a:
            cut = a.get("cut_chars")
            parts.append(_labelled(f"what the model got ({cut} characters cut)", a["model_text"]))
    elif kind not in ("turn",):  # a kind this version does not know: its attributes
        parts.append(_labelled("attributes", a))
    if span.get("error") and kind != "tool_call":
        parts.append(_labelled("error", span["error"]))
    if kind == "run" and a.get("output") is not None:
        parts.append(_labelled("output", a.get("output")))
    return "".join(parts)


def _step_event(event: Mapping[str, Any]) -> str:
    ev = event.get("attributes") or {}
    if event.get("name") == "step_given":
        return f"✍ result given by hand (the tool did not run): {ev.get('text')}"
    if "message" in ev:
        return (
            f"✎ message [{ev.get('message')}] ({ev.get('role')}) edited by hand: {ev.get('after')}"
        )
    return f"✎ arguments edited by hand, from {json.dumps(ev.get('before'), default=str)}"


def _decision(attrs: Mapping[str, Any]) -> dict[str, Any]:
    if not attrs.get("approved"):
        return {"decision": "denied", "reason": attrs.get("reason")}
    return {"decision": "always_allowed" if attrs.get("always") else "approved", "reason": None}


def _count(span: Mapping[str, Any]) -> int:
    return 1 + sum(_count(c) for c in span.get("children") or ())


def _span_html(span: Mapping[str, Any], budget: _Budget, depth: int) -> str:
    if budget.left <= 0:
        budget.skipped += _count(span)
        return ""
    budget.left -= 1
    children = "".join(_span_html(c, budget, depth + 1) for c in span.get("children") or ())
    opened = " open" if depth < 3 and span.get("kind") != "model_call" else ""
    return (
        f"<details{opened}><summary>{_span_summary(span)}</summary>"
        f"<blockquote>{_span_body(span)}{children}</blockquote></details>"
    )


def trace_html(data: Mapping[str, Any], *, max_spans: int = MAX_SPANS) -> str:
    """The trace as nested ``<details>``: the first ``max_spans`` spans, then "N more"."""
    root = data.get("root") or {}
    budget = _Budget(max_spans)
    body = _span_html(root, budget, 0)
    more = (
        f"<div>… {budget.skipped:,} more span{'s' if budget.skipped != 1 else ''} not shown"
        " (the record's JSON holds the whole trace)</div>"
        if budget.skipped
        else ""
    )
    total = _count(root)
    return (
        f'<details class="kode-record kode-trace"><summary><b>Trace</b> · {total} spans'
        f"</summary>{body}{more}</details>"
    )


def trace_text(data: Mapping[str, Any], *, max_lines: int = MAX_SPANS) -> str:
    lines: list[str] = []
    total = 0

    def walk(span: Mapping[str, Any], depth: int) -> None:
        nonlocal total
        total += 1
        if len(lines) < max_lines:
            took = format_duration(span.get("duration"))
            lines.append(
                "  " * depth
                + f"{span.get('kind')} {span.get('name')} [{span.get('status')}]"
                + (f" {took}" if took else "")
            )
        for child in span.get("children") or ():
            walk(child, depth + 1)

    walk(data.get("root") or {}, 0)
    if total > len(lines):
        lines.append(f"… {total - len(lines)} more spans")
    return "\n".join(lines)


# --------------------------------------------------------------------------- cards and tables


def card_html(data: Mapping[str, Any]) -> str:
    meta = _line(
        f"category {_esc(data['category'])}",
        f"groups {_esc(', '.join(data['groups']))}" if data.get("groups") else "",
        f"timeout {data['timeout']:g} s" if data.get("timeout") else "",
        f"approval {_esc(data['approval'])}" if data.get("approval") else "",
    )
    params = data.get("parameters") or []
    if params:
        rows = "".join(
            f"<tr><td><code>{_esc(p['name'])}</code></td><td><code>{_esc(p['type'])}</code></td>"
            f"<td>{'yes' if p['required'] else 'no'}</td>"
            f"<td>{'' if p.get('default') is None else '<code>' + _esc(json.dumps(p['default'])) + '</code>'}</td>"
            f"<td>{_esc(p.get('description') or '')}</td></tr>"
            for p in params
        )
        table = (
            "<table><thead><tr><th>parameter</th><th>type</th><th>required</th><th>default</th>"
            f"<th>description</th></tr></thead><tbody>{rows}</tbody></table>"
        )
    else:
        table = "<div><i>No parameters.</i></div>"
    schemas = "".join(
        f"<details><summary>{_esc(fmt)}</summary>{_pre(_json(schema))}</details>"
        for fmt, schema in (data.get("schemas") or {}).items()
    )
    return (
        f'<div class="kode-record kode-card"><div>tool <b>{_esc(data["name"])}</b> '
        f"<code>{_esc(data['kind'])}</code> · {meta}</div>"
        f"<p>{_esc(data.get('description') or '')}</p>{table}"
        f"<details><summary>JSON schema the model sees</summary>{schemas}</details></div>"
    )


def _cell(value: Any) -> str:
    return "—" if value is None or value == "" else str(value)


def table_html(data: Mapping[str, Any]) -> str:
    columns = data["columns"]
    rows = data.get("rows") or []
    title = f"<div><b>{_esc(data['title'])}</b></div>"
    note = f"<div>{_esc(data['note'])}</div>" if data.get("note") else ""
    if not rows:
        return f'<div class="kode-record kode-table">{title}<div>{_esc(data.get("empty") or "")}</div>{note}</div>'
    head = "".join(f'<th align="{c.get("align", "left")}">{_esc(c["label"])}</th>' for c in columns)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td align="{c.get("align", "left")}">{_esc(_cell(r.get(c["key"])))}</td>'
            for c in columns
        )
        + "</tr>"
        for r in rows
    )
    return (
        f'<div class="kode-record kode-table">{title}<table><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>{note}</div>"
    )


def table_text(data: Mapping[str, Any]) -> str:
    rows = data.get("rows") or []
    if not rows:
        return f"{data['title']}\n{data.get('empty') or ''}".strip()
    columns = data["columns"]
    cells = [[str(c["label"]).upper() for c in columns]]
    cells += [[_cell(r.get(c["key"])) for c in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = [data["title"]]
    for n, row in enumerate(cells):
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    if data.get("note"):
        lines.append(str(data["note"]))
    return "\n".join(lines)
